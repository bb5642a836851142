"""A real browser (Debian's chromium, driven by Playwright) shows the scene the viewer renders.

Skipped, with the reason, where chromium or playwright is missing (``.ci/run`` installs chromium
with apt-get when it can). ``POINTRIX_VIEWER_SCREENSHOT=path.png`` also keeps the screenshot
(docs/viewer.md's picture comes from here).
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from pointrix_lite.renderer.renderer import GaussianRenderer
from pointrix_lite.viewer.camera import InitialView
from pointrix_lite.viewer.scene import DisplayOptions, SceneView
from pointrix_lite.viewer.server import Viewer

from .helpers import BACKGROUND, make_scene_model, psnr, reference_render

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--enable-unsafe-swiftshader",
    "--use-angle=swiftshader",  # software WebGL
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
WIDTH, HEIGHT = 800, 500


def sync_playwright():
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} not installed (apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright as factory
    except ImportError:
        pytest.skip("playwright not installed (pip install -e '.[dev]')")
    return factory()


def wait_until(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)
    return value


def test_browser_shows_the_rendered_scene(tmp_path):
    model = make_scene_model(n=4000)
    start = InitialView(position=np.array([0.5, -3.0, 1.0]), look_at=np.zeros(3), up=np.array([0.0, 0.0, 1.0]), fov=0.9)
    viewer = Viewer(
        SceneView(model, GaussianRenderer(), BACKGROUND),
        "127.0.0.1",
        0,
        options=DisplayOptions(max_res=1024, preview_res=128),
        initial_view=start,
        settle_s=0.1,
    )
    shot = tmp_path / "viewer.png"
    # The centre, below viser's notification and left of its control panel: the scene the
    # rasterizer draws for that camera, not a blank canvas.
    box = (slice(HEIGHT // 2 - 60, HEIGHT // 2 + 180), slice(WIDTH // 2 - 250, WIDTH // 2 + 50))
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            try:
                page = browser.new_page(viewport={"width": WIDTH, "height": HEIGHT}, device_scale_factor=1)
                page.goto(f"http://127.0.0.1:{viewer.port}")
                page.get_by_text("Connected", exact=True).wait_for(timeout=60_000)
                worker = wait_until(lambda: next(iter(viewer.workers.values()), None), 60, "a render worker")
                client = next(iter(viewer.server.get_clients().values()))
                # The initial view reaches the browser: on a loaded machine the browser's own first
                # camera message can arrive after it, and the viewer then re-sends it.
                wait_until(
                    lambda: np.allclose(client.camera.position, start.position, atol=1e-3),
                    30,
                    "the initial view in the browser",
                )
                wait_until(lambda: worker.stats.full >= 1, 60, "a full-resolution frame")
                camera = client.camera
                wxyz, position, fov = tuple(camera.wxyz), tuple(camera.position), camera.fov
                assert (camera.image_width, camera.image_height) == (WIDTH, HEIGHT)
                np.testing.assert_allclose(position, start.position, atol=1e-3)
                expected = reference_render(model, wxyz, position, fov, WIDTH, HEIGHT)
                assert expected[box].std() > 20
                # The browser decodes and draws the frame in its own time (slow with software WebGL on
                # a loaded machine): screenshots for up to 15 s, the last one is judged.
                deadline = time.monotonic() + 15.0
                while True:
                    page.screenshot(path=str(shot))
                    score = psnr(np.asarray(Image.open(shot).convert("RGB"))[box], expected[box])
                    if score >= 28.0 or time.monotonic() > deadline:
                        break
                    time.sleep(0.5)
            finally:
                browser.close()
    finally:
        time.sleep(0.2)
        viewer.close()
    print(f"browser screenshot vs rasterization(), centre {box}: PSNR {score:.2f} dB")
    assert score >= 28.0
    if os.environ.get("POINTRIX_VIEWER_SCREENSHOT"):
        shutil.copyfile(shot, os.environ["POINTRIX_VIEWER_SCREENSHOT"])
