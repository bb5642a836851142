"""The command line: plugins, --show-hooks, user errors, Ctrl-C and --resume (subprocesses)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch
import yaml

from pointrix_lite.cli.train import main
from pointrix_lite.engine.checkpoint import find_latest
from tests.engine.engine_helpers import TOY_PLUGIN, toy_raw_config

REPO = Path(__file__).resolve().parents[2]
TRAIN = REPO / "scripts" / "train.py"

PLUGIN = textwrap.dedent('''
    """A user's plugin: one hook and one writer, registered by name."""
    import json
    from dataclasses import dataclass

    from pointrix_lite.engine.hooks import Hook
    from pointrix_lite.registry import HOOKS, WRITERS
    from pointrix_lite.writers import Writer


    @HOOKS.register()
    class MyHook(Hook):
        @dataclass
        class Config:
            tag: str = "none"

        def __init__(self, config):
            super().__init__(config)
            self.iters = 0

        def after_train_iter(self, batch_idx, batch):
            self.iters += 1

        def after_run(self):
            out = self.trainer.exp_dir / "my_hook.json"
            out.write_text(json.dumps({"tag": self.config.tag, "iters": self.iters, "step": self.trainer.global_step}))


    @WRITERS.register()
    class MyWriter(Writer):
        def __init__(self, exp_dir):
            super().__init__(exp_dir=exp_dir)
            self.path = self.exp_dir / "my_writer.txt"

        def write_scalar(self, name, value, step):
            with open(self.path, "a") as f:
                f.write(f"{step} {name} {value}\\n")
''')


def _write_config(tmp_path: Path, extra: dict | None = None) -> Path:
    cfg = toy_raw_config(tmp_path)
    cfg.update(extra or {})
    path = tmp_path / "toy.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _cli(*args: str, **kw) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.run(
        [sys.executable, str(TRAIN), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=kw.get("cwd", REPO),
    )


def test_plugin_hook_and_writer_from_yaml(tmp_path):
    plugin = tmp_path / "my_plugin.py"
    plugin.write_text(PLUGIN)
    config = _write_config(
        tmp_path,
        {
            "hooks": [{"type": "MyHook", "priority": "HIGH", "tag": "hello"}],
            "writers": [{"type": "MyWriter"}, {"type": "JsonlWriter"}],
        },
    )
    # Run from another directory: the wrapper script must find the package without installing.
    res = _cli(
        "--config",
        str(config),
        "--plugin",
        str(TOY_PLUGIN),
        "--plugin",
        str(plugin),
        "trainer.max_steps=6",
        "trainer.val_interval=0",
        "save_ckpt_after_iter=3",
        "log_show_after_iter=2",
        cwd=tmp_path,
    )
    assert res.returncode == 0, res.stderr
    exp_dir = tmp_path / "outputs" / "toy"
    assert json.loads((exp_dir / "my_hook.json").read_text()) == {"tag": "hello", "iters": 6, "step": 6}
    lines = (exp_dir / "my_writer.txt").read_text().splitlines()
    assert [line.split()[0] for line in lines if " train/loss " in line] == ["2", "4", "6"]
    assert any(line.startswith("6 test/psnr ") for line in lines)
    saved = yaml.safe_load((exp_dir / "config.yaml").read_text())
    assert next(h for h in saved["hooks"] if h["type"] == "CheckPointHook")["interval"] == 3
    assert next(h for h in saved["hooks"] if h["type"] == "MyHook") == {
        "type": "MyHook",
        "priority": "HIGH",
        "enabled": True,
        "tag": "hello",
    }
    assert sorted(p.name for p in (exp_dir / "checkpoints").glob("*.pth")) == ["step_000003.pth", "step_000006.pth"]
    assert "Hooks will be executed in the following order:" in res.stdout
    assert "step 4/6 |" in res.stdout  # non-TTY: plain progress lines, no bar


def test_plugin_is_required_to_name_its_hook(tmp_path):
    config = _write_config(tmp_path, {"hooks": [{"type": "MyHook"}]})
    res = _cli("--config", str(config), "--plugin", str(TOY_PLUGIN))
    assert res.returncode == 2
    assert res.stderr.strip().splitlines() == [res.stderr.strip()]  # one line, no traceback
    assert res.stderr.startswith("error: hooks[0].type: unknown hook 'MyHook';")


def test_show_hooks_prints_table_and_exits(tmp_path, capsys):
    config = _write_config(tmp_path, {"hooks": [{"type": "NaNGuardHook"}, {"type": "LogHook", "enabled": False}]})
    assert main(["--config", str(config), "--show-hooks", "--plugin", str(TOY_PLUGIN)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Hooks will be executed in the following order:")
    assert "after_train_iter:\n(VERY_HIGH) NaNGuardHook\n(NORMAL   ) IterTimerHook\n(VERY_LOW ) CheckPointHook" in out
    assert "LogHook" not in out
    assert not (tmp_path / "outputs").exists()  # nothing built, nothing written


def test_user_errors_exit_2_with_one_line(tmp_path, capsys):
    config = _write_config(tmp_path)
    assert main(["--config", str(config), "--plugin", str(TOY_PLUGIN), "model.lrr=1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: model.lrr: unknown key (did you mean 'lr'?); valid keys:") and err.count("\n") == 1
    assert main(["--config", str(config), "--plugin", str(TOY_PLUGIN), "--resume"]) == 2
    assert "error: --resume: no checkpoint in" in capsys.readouterr().err
    assert main(["--config", str(config), "--plugin", str(tmp_path / "missing.py")]) == 2
    assert "missing.py: file not found" in capsys.readouterr().err


def test_resume_flag_followed_by_override_is_an_override(tmp_path):
    from pointrix_lite.cli.train import parse_args

    args = parse_args(["--config", "x.yaml", "--resume", "trainer.max_steps=5", "seed=1"])
    assert args.resume == "latest" and args.overrides == ["trainer.max_steps=5", "seed=1"]


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_sigint_saves_checkpoint_exits_130_and_resumes(tmp_path):
    config = _write_config(tmp_path)
    cmd = [
        sys.executable,
        str(TRAIN),
        "--config",
        str(config),
        "--plugin",
        str(TOY_PLUGIN),
        "trainer.max_steps=1000000",
        "trainer.val_interval=0",
        "hooks.1.interval=50",
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
    exp_dir = tmp_path / "outputs" / "toy"
    deadline = time.time() + 60
    while not (exp_dir / "checkpoints" / "latest.txt").exists():
        assert proc.poll() is None and time.time() < deadline, proc.communicate()
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    latest = find_latest(exp_dir)
    step = torch.load(latest, weights_only=True)["step"]
    assert step >= 50 and latest.name == f"step_{step:06d}.pth"
    assert f"interrupted at step {step}; checkpoint saved to {latest}" in err
    assert f"--config {exp_dir / 'config.yaml'} --resume --plugin {TOY_PLUGIN}" in err

    # The printed resume command works (with a nearer end so the test finishes).
    res = _cli(
        "--config",
        str(exp_dir / "config.yaml"),
        "--resume",
        "--plugin",
        str(TOY_PLUGIN),
        f"trainer.max_steps={step + 3}",
    )
    assert res.returncode == 0, res.stderr
    assert json.loads((exp_dir / "metrics.json").read_text())["steps"] == step + 3
    assert find_latest(exp_dir).name == f"step_{step + 3:06d}.pth"
