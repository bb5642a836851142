"""The viewer over viser's real websocket protocol, and its one-line errors for bad hosts and ports."""

from __future__ import annotations

import socket
import time

import numpy as np
import pytest
import torch

from pointrix_lite.cli.view import main as view_main
from pointrix_lite.errors import ConfigError
from pointrix_lite.renderer.rasterization import rasterization
from pointrix_lite.renderer.renderer import GaussianRenderer
from pointrix_lite.viewer.scene import DisplayOptions, SceneView
from pointrix_lite.viewer.server import Viewer, check_bind

from .helpers import BACKGROUND, ViserProtocolClient, make_scene_model, pose_looking_at, psnr, reference_render

FOV = 0.9


@pytest.fixture(scope="module")
def model():
    return make_scene_model()


@pytest.fixture
def viewer(model):
    v = Viewer(
        SceneView(model, GaussianRenderer(), BACKGROUND),
        "127.0.0.1",
        0,
        options=DisplayOptions(max_res=320, preview_res=64),
        settle_s=0.1,
    )
    yield v
    v.close()


@pytest.fixture
def client(viewer):
    c = ViserProtocolClient(viewer.port)
    yield c
    c.close()
    time.sleep(0.2)  # let viser see the disconnect before the server stops


def test_camera_from_the_socket_comes_back_as_the_expected_jpeg(viewer, client, model):
    wxyz, position = pose_looking_at((0.5, -3.0, 1.0))
    client.send_camera(wxyz, position, FOV, 640, 480)
    preview = client.wait_image((64, 48))  # the quick frame first ...
    image = client.wait_image((320, 240))  # ... then max_res once the camera stays put
    expected = reference_render(model, wxyz, position, FOV, 320, 240)
    assert psnr(image, expected) >= 30.0
    assert expected.std() > 20  # the scene really is in view, not a flat background
    assert psnr(preview, reference_render(model, wxyz, position, FOV, 64, 48)) >= 25.0
    # another pose gives another picture: the camera is really used
    assert psnr(image, reference_render(model, *pose_looking_at((3.0, 0.5, -1.0)), FOV, 320, 240)) < 20.0


def test_zero_size_canvas_is_ignored_and_gui_changes_rerender(viewer, client, model):
    wxyz, position = pose_looking_at((0.0, -3.5, 0.5))
    client.send_camera(wxyz, position, FOV, 0, 480)  # a collapsed tab: ignored
    assert not any(m.get("type") == "BackgroundImageMessage" and m.get("rgb_data") for m in client.messages(0.7))
    client.send_camera(wxyz, position, FOV, 320, 240)
    client.wait_image((320, 240))
    viewer.gui_mode.value = "Alpha"  # as if picked in the browser: the same callbacks run
    image = client.wait_image((320, 240))
    p = model.render_params()
    from pointrix_lite.viewer.camera import ViewState, camera_from_view

    cam = camera_from_view(ViewState(wxyz, position, FOV, 320, 240), 320, 240)
    with torch.no_grad():
        _, alphas, _ = rasterization(
            p["means"],
            p["quats"],
            p["scales"],
            p["opacities"],
            p["colors"],
            cam.viewmat[None],
            cam.K[None],
            320,
            240,
            sh_degree=p["sh_degree"],
        )
    expected = np.repeat((alphas[0].clamp(0, 1).numpy() * 255).round().astype(np.uint8), 3, axis=-1)
    assert psnr(image, expected) >= 30.0
    viewer.gui_mode.value = "RGB"
    client.wait_image((320, 240))
    viewer.gui_sh.value = 0  # view-independent colours only
    image = client.wait_image((320, 240))
    sh0 = reference_render(model, wxyz, position, FOV, 320, 240, sh_degree=0)
    assert psnr(image, sh0) >= 30.0
    assert psnr(sh0, reference_render(model, wxyz, position, FOV, 320, 240)) < psnr(image, sh0) - 3  # SH 1 differs


class Exploding:
    def render_params(self, sh_degree=None):
        raise RuntimeError("model exploded")


def test_render_error_notifies_the_browser_and_the_server_lives_on(model, capsys):
    scene = SceneView(model, GaussianRenderer(), BACKGROUND)
    v = Viewer(scene, "127.0.0.1", 0, options=DisplayOptions(max_res=160, preview_res=160), settle_s=0.05)
    c = ViserProtocolClient(v.port)
    try:
        scene.model = Exploding()
        c.send_camera(*pose_looking_at((0.0, -3.0, 0.0)), FOV, 160, 120)
        note = next((m for m in c.messages(10.0) if m.get("type") == "NotificationShowMessage"), None)
        assert note is not None and "model exploded" in note["props"]["body"]
        scene.model = model
        c.send_camera(*pose_looking_at((0.1, -3.0, 0.0)), FOV, 160, 120)
        assert c.wait_image((160, 120)).std() > 10
    finally:
        c.close()
        time.sleep(0.2)
        v.close()
    assert "render failed" in capsys.readouterr().err


def busy_port() -> socket.socket:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    return s


def test_bind_errors_are_one_line():
    with busy_port() as s:
        with pytest.raises(ConfigError, match=rf"port {s.getsockname()[1]} on 127.0.0.1 is already in use"):
            check_bind("127.0.0.1", s.getsockname()[1])
    with pytest.raises(ConfigError, match="cannot resolve host 'no-such-host.invalid'"):
        check_bind("no-such-host.invalid", 8080)
    with pytest.raises(ConfigError, match="192.0.2.1 is not an address of this machine"):
        check_bind("192.0.2.1", 8080)  # TEST-NET-1: never local
    with pytest.raises(ConfigError, match="0..65535"):
        check_bind("127.0.0.1", 70000)


def test_view_script_prints_one_line_errors(tmp_path, capsys):
    with busy_port() as s:
        assert view_main(["--ply", str(tmp_path / "x.ply"), "--port", str(s.getsockname()[1])]) == 2
        assert capsys.readouterr().err.strip().count("\n") == 0
    assert view_main(["--ply", str(tmp_path / "missing.ply"), "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --ply: file not found") and err.count("\n") == 1
    assert view_main(["--ply", str(tmp_path / "x.ply"), "--host", "no-such-host.invalid"]) == 2
    assert "cannot resolve host" in capsys.readouterr().err


def test_view_script_serves_a_ply_until_ctrl_c(tmp_path, model):
    import re
    import signal
    import subprocess
    import sys
    from pathlib import Path

    from pointrix_lite.io.ply import save_ply

    ply = save_ply(model, tmp_path / "scene.ply")
    repo = Path(__file__).resolve().parents[2]
    # SIGINT as a terminal delivers it: a test run launched as a background job of a non-interactive
    # shell has SIGINT ignored, the child would inherit that, and Python then never raises
    # KeyboardInterrupt (view.py would serve on, past the wait below)
    proc = subprocess.Popen(
        [sys.executable, str(repo / "scripts" / "view.py"), "--ply", str(ply), "--port", "0", "--max-res", "200"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        line = proc.stdout.readline()
        port = int(re.match(r"viewer: http://localhost:(\d+)", line).group(1))
        client = ViserProtocolClient(port)
        try:
            wxyz, position = pose_looking_at((0.5, -3.0, 1.0))
            client.send_camera(wxyz, position, FOV, 200, 150)
            image = client.wait_image((200, 150))
        finally:
            client.close()
        assert psnr(image, reference_render(model, wxyz, position, FOV, 200, 150)) >= 30.0
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "Traceback" not in proc.stderr.read()
