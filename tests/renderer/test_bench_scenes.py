"""``benchmarks/scenes.py``'s trained-model scenes (``ply:PLY@COLMAP[#I]``): the PLY's Gaussians,
activated, seen from the COLMAP view the name picks, in the model's frame when the run turned it."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # benchmarks/ is run from the checkout, not installed

from benchmarks.scenes import check_scene, ply_scene, scene_info  # noqa: E402
from pointrix_lite.io.colmap import ColmapCamera, ColmapImage, ColmapModel, write_model  # noqa: E402
from pointrix_lite.io.ply import save_ply  # noqa: E402


def write_run(tmp: Path, turn_deg: float) -> tuple[str, dict, np.ndarray]:
    """A 3-view COLMAP folder and a trained-model PLY beside an orientation.json turning the world
    by turn_deg about z; returns the scene name, the raw parameters and that rotation."""
    g = torch.Generator().manual_seed(0)
    n = 50
    params = dict(
        means=torch.randn(n, 3, generator=g),
        quats=torch.randn(n, 4, generator=g),
        scales=torch.randn(n, 3, generator=g) - 3.0,
        opacities=torch.randn(n, generator=g),
        sh0=torch.randn(n, 1, 3, generator=g),
        shN=torch.randn(n, 3, 3, generator=g),
    )
    run = tmp / "run"
    run.mkdir()
    save_ply(params, run / "point_cloud.ply")
    c, s = math.cos(math.radians(turn_deg)), math.sin(math.radians(turn_deg))
    R = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
    (run / "orientation.json").write_text(json.dumps({"rotation": R.tolist()}))
    cams = {1: ColmapCamera(1, "PINHOLE", 64, 48, np.array([50.0, 52.0, 31.5, 23.5]))}
    # three views sorted by name; "b.png" (index 1, the default) looks from 5 units back along z
    images = {
        i + 1: ColmapImage(i + 1, np.array([1.0, 0.0, 0.0, 0.0]), np.array([0.1 * i, 0.0, 5.0 + i]), 1, name)
        for i, name in enumerate(["a.png", "b.png", "c.png"])
    }
    colmap = tmp / "colmap"
    write_model(ColmapModel(cams, images, np.zeros((1, 3)), np.zeros((1, 3), np.uint8), {}), colmap / "sparse" / "0")
    return f"ply:{run / 'point_cloud.ply'}@{colmap}", params, R


def project(viewmat: torch.Tensor, K: torch.Tensor, points: torch.Tensor) -> torch.Tensor:
    cam = points @ viewmat[:3, :3].T + viewmat[:3, 3]
    uv = cam @ K.T
    return uv[:, :2] / uv[:, 2:]


def test_a_trained_model_is_seen_from_the_named_view_in_its_own_frame(tmp_path: Path) -> None:
    name, params, R = write_run(tmp_path, turn_deg=30.0)
    assert check_scene(name) is None
    s = ply_scene(name)
    assert (s["width"], s["height"], s["sh_degree"]) == (64, 48, 1)
    assert scene_info(name) == (64, 48, 50, 1)
    torch.testing.assert_close(s["means"], params["means"])
    torch.testing.assert_close(s["scales"], params["scales"].exp())
    torch.testing.assert_close(s["opacities"], torch.sigmoid(params["opacities"]))
    torch.testing.assert_close(s["colors"], torch.cat([params["sh0"], params["shN"]], 1))
    torch.testing.assert_close(s["Ks"][0], torch.tensor([[50.0, 0, 31.5], [0, 52.0, 23.5], [0, 0, 1]]))
    # the model's points (R @ dataset points) land where the dataset's view "b.png" sees the dataset points
    dataset_pts = torch.randn(20, 3, dtype=torch.float64)
    model_pts = dataset_pts @ torch.from_numpy(R).T
    w2c = torch.eye(4, dtype=torch.float64)
    w2c[:3, 3] = torch.tensor([0.1, 0.0, 6.0])
    want = project(w2c, s["Ks"][0].double(), dataset_pts)
    torch.testing.assert_close(project(s["viewmats"][0].double(), s["Ks"][0].double(), model_pts), want)
    assert not torch.allclose(project(w2c, s["Ks"][0].double(), model_pts), want)  # the turn matters
    assert ply_scene(name + "#2")["viewmats"][0, 2, 3].item() == 7.0  # another view by index


def test_bad_names_get_one_line_reasons(tmp_path: Path) -> None:
    name, _, _ = write_run(tmp_path, turn_deg=0.0)
    ply, colmap = name[len("ply:") :].split("@")
    assert "expected ply:PLY@COLMAP" in check_scene("ply:" + ply)
    assert "PLY file not found" in check_scene(f"ply:{tmp_path / 'missing.ply'}@{colmap}")
    assert "COLMAP folder not found" in check_scene(f"ply:{ply}@{tmp_path / 'nope'}")
    assert "must be a number" in check_scene(f"{name}#x")
    assert "unknown scene 'photo2'" in check_scene("photo2")
