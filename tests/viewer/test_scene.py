"""Render modes: depth colouring and SH degree choice."""

from __future__ import annotations

import numpy as np
import pytest

from pointrix_lite.renderer.renderer import GaussianRenderer
from pointrix_lite.viewer.camera import ViewState, camera_from_view
from pointrix_lite.viewer.scene import SceneView, colorize_depth

from .helpers import BACKGROUND, make_scene_model, pose_looking_at


def test_colorize_depth_near_is_bright_far_is_dark_uncovered_is_black():
    depth = np.array([[1.0, 2.0, 3.0, 9.0]])
    alpha = np.array([[1.0, 1.0, 1.0, 0.0]])
    rgb = colorize_depth(depth, alpha)
    brightness = rgb.sum(-1)[0]
    assert brightness[0] > brightness[1] > brightness[2] > 0  # viridis: yellow (near) to purple (far)
    assert brightness[3] == 0


def test_depth_mode_shows_the_near_side_brighter():
    model = make_scene_model(n=2000)
    scene = SceneView(model, GaussianRenderer(), BACKGROUND)
    # looking at the ball (radius ~1) from 2.5 away: its centre is nearer than its rim
    wxyz, position = pose_looking_at((0.0, -2.5, 0.0))
    cam = camera_from_view(ViewState(wxyz, position, 0.9, 160, 120), 160, 120)
    depth_img = scene.render(cam, "Depth").astype(float).sum(-1)
    alpha = scene.render(cam, "Alpha")[..., 0]
    assert alpha[60, 80] > 200 and alpha[2, 2] < 50  # ball in the centre, background at the corner
    assert depth_img[2, 2] == 0  # uncovered
    assert alpha[60, 80 + 35] > 200  # still on the ball, near its rim
    assert depth_img[60, 80] > depth_img[60, 80 + 35] > 0
    with pytest.raises(ValueError, match="render mode"):
        scene.render(cam, "Normals")


@pytest.mark.parametrize("degree", [0, 1, 2])
def test_the_sh_slider_reaches_the_models_own_degree(degree):
    # Read from the GaussianModel itself (its `config`), so a renamed attribute cannot silently cap it at 0.
    assert SceneView(make_scene_model(n=10, sh_degree=degree), GaussianRenderer(), BACKGROUND).max_sh_degree == degree
