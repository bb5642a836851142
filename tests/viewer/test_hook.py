"""ViewerHook in a real (tiny) training run: results unchanged, live frames, pause/resume, --viewer."""

from __future__ import annotations

import copy
import socket
import threading
import time

import pytest
import torch
from reliability.scene import real_raw_config, write_tiny_scene

from pointrix_lite.cli.train import main as train_main
from pointrix_lite.components import import_all
from pointrix_lite.engine.experiment import load_experiment
from pointrix_lite.engine.trainer import DefaultTrainer
from pointrix_lite.viewer.hook import ViewerHook

from .helpers import ViserProtocolClient, pose_looking_at

STEPS = 40


@pytest.fixture(scope="module")
def scene(tmp_path_factory):
    import_all()
    return write_tiny_scene(tmp_path_factory.mktemp("tiny_scene"))


def raw(tmp_path, scene, viewer: dict | None):
    cfg = real_raw_config(tmp_path, scene, backend="native", max_steps=STEPS)
    cfg["hooks"] = [{"type": "LogHook", "interval": 100, "progress_bar": False}]
    cfg["writers"] = []
    if viewer is not None:
        cfg["hooks"].append({"type": "ViewerHook", "port": 0, **viewer})
    return cfg


def train(tmp_path, scene, viewer: dict | None, during=None) -> tuple[DefaultTrainer, dict]:
    cfg = load_experiment(None, data=raw(tmp_path, scene, viewer))
    trainer = DefaultTrainer(cfg, tmp_path / "exp", "cpu")
    result: dict = {}
    if during is None:
        trainer.run()
    else:  # training on a thread, the test plays the browser on this one
        thread = threading.Thread(target=lambda: result.setdefault("error", trainer.run()))
        thread.start()
        try:
            during(trainer, result)
        finally:
            for h in trainer.hooks:
                if isinstance(h, ViewerHook):
                    h.gate.set_paused(False)
                    h.stop_serving()
            thread.join(60)
        assert not thread.is_alive()
    return trainer, {k: v.detach().clone() for k, v in trainer.model.params.items()}


def viewer_hook(trainer) -> ViewerHook:
    return next(h for h in trainer.hooks if isinstance(h, ViewerHook))


def test_results_are_identical_with_the_hook_with_or_without_a_browser(tmp_path, scene):
    _, baseline = train(tmp_path / "a", scene, None)
    hooked, params = train(tmp_path / "b", scene, {"keep_serving": False})
    assert viewer_hook(hooked).viewer is None  # closed after the run
    for name in baseline:
        assert torch.equal(baseline[name], params[name]), name

    def watch_and_pause(trainer, result):
        hook = wait_until(lambda: viewer_hook(trainer) if viewer_hook(trainer).viewer else None)
        client = ViserProtocolClient(hook.viewer.port)
        try:
            wxyz, position = pose_looking_at((0.0, -4.0, 1.5))
            hook.gate.set_paused(True)  # what the GUI's pause button does
            client.send_camera(wxyz, position, 0.7, 96, 96)
            image = client.wait_image((96, 96))
            assert image.std() > 5  # the model being trained, not an empty frame
            step = trainer.global_step
            time.sleep(0.3)
            assert trainer.global_step == step < STEPS  # paused between steps
            hook.gate.set_paused(False)
            for k in range(200):  # keep the viewer busy while training runs
                client.send_camera(*pose_looking_at((0.01 * k, -4.0, 1.5)), 0.7, 96, 96)
                if trainer.global_step >= STEPS:
                    break
                time.sleep(0.01)
            wait_until(lambda: trainer.global_step >= STEPS)
            # after training the viewer keeps serving the final model
            client.send_camera(*pose_looking_at((0.5, -4.0, 1.5)), 0.7, 80, 80)
            client.wait_image((80, 80))
            assert hook.viewer is not None and hook.viewer.gui_step.value == str(STEPS)
        finally:
            client.close()
            time.sleep(0.2)

    watched, params = train(
        tmp_path / "c", scene, {"keep_serving": True, "max_res": 96, "preview_res": 48}, watch_and_pause
    )
    assert viewer_hook(watched).viewer is None
    for name in baseline:  # renders, a pause and a client change nothing
        assert torch.equal(baseline[name], params[name]), name


def wait_until(predicate, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)
    return value


def test_viewer_flag_and_busy_port(tmp_path, scene, capsys):
    import yaml

    config = tmp_path / "tiny.yaml"
    config.write_text(yaml.safe_dump(raw(tmp_path, scene, None)))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        assert train_main(["--config", str(config), "--viewer", "--viewer-port", str(port)]) == 2
    err = capsys.readouterr().err
    assert err == f"error: --viewer-port: port {port} on 127.0.0.1 is already in use (pick another port)\n"
    cfg = copy.deepcopy(raw(tmp_path, scene, {"keep_serving": False}))
    config.write_text(yaml.safe_dump(cfg))
    assert train_main(["--config", str(config), "--viewer"]) == 2
    assert "already has a ViewerHook" in capsys.readouterr().err


@pytest.mark.parametrize("option, value", [("time_share", 0.0), ("max_res", 4), ("jpeg_quality", 0)])
def test_bad_hook_options_name_the_key(option, value):
    from pointrix_lite.errors import ConfigError

    with pytest.raises(ConfigError, match=f"hooks.ViewerHook.*{option}"):
        ViewerHook(ViewerHook.Config(**{option: value}))
