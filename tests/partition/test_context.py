"""Context for the blocks (partition/context.py, cli/blocks_coarse.py): the cut context renders every block view
as the whole outside of the block does, and train_blocks.py --context coarse trains a coarse model first, gives
each block its context, trains only the block's own Gaussians and merges none of the context."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from pointrix_lite.data.cameras import Camera
from pointrix_lite.io import colmap as colmap_io
from pointrix_lite.io.ply import load_ply, save_ply
from pointrix_lite.model import GaussianModel
from pointrix_lite.partition.context import ALPHA_MIN, block_context
from pointrix_lite.partition.split import SplitOptions, pinhole_view, split_scene
from pointrix_lite.renderer.renderer import GaussianRenderer

from .block_config import block_config

REPO = Path(__file__).resolve().parents[2]


def coarse_model(points: np.ndarray, seed: int = 0) -> dict[str, torch.Tensor]:
    """Gaussians on the scene's points and above it, sizes from tiny to larger than a building, some transparent."""
    g = torch.Generator().manual_seed(seed)
    xyz = torch.from_numpy(points).float()
    xyz = torch.cat([xyz, xyz + torch.tensor([0.0, 0.0, 6.0]) * torch.rand(len(xyz), 1, generator=g)])
    n = len(xyz)
    opacity = torch.rand(n, generator=g) * 0.9 + 0.05
    opacity[torch.rand(n, generator=g) < 0.2] = 0.5 * ALPHA_MIN
    return {
        "means": xyz,
        "scales": (torch.rand(n, 3, generator=g) * 6.0 - 4.5),  # log: 0.011 .. 4.5
        "quats": torch.randn(n, 4, generator=g),
        "opacities": torch.logit(opacity),
        "sh0": torch.rand(n, 1, 3, generator=g),
        "shN": torch.rand(n, 3, 3, generator=g) * 0.1,
    }


def camera(view) -> Camera:
    viewmat = torch.eye(4)
    viewmat[:3, :3], viewmat[:3, 3] = torch.from_numpy(view.R).float(), torch.from_numpy(view.t).float()
    (fx, fy), (cx, cy), (w, h) = view.focal, view.center, view.size
    return Camera(fx=fx, fy=fy, cx=cx, cy=cy, width=w, height=h, viewmat=viewmat)


def render(context: dict[str, torch.Tensor], cameras: list[Camera], path: Path) -> torch.Tensor:
    model = GaussianModel(GaussianModel.Config(sh_degree=1, init_num_points=1, context=str(save_ply(context, path))))
    model.step = 10_000
    out = GaussianRenderer(GaussianRenderer.Config(backend="torch"))(model, cameras, (0.0, 0.0, 0.0), depth=False)
    return out["rgb"]


def test_cut_context_renders_the_block_views_as_the_whole_outside(street, partition, tmp_path):
    scene = colmap_io.read_model(colmap_io.find_sparse_dir(street))
    by_name = {im.name: im for im in scene.images.values()}
    coarse = coarse_model(scene.xyz)
    rotation = partition.ground_rotation()
    block = partition.blocks[0]
    views = [pinhole_view(by_name[n], scene.cameras[by_name[n].camera_id]) for n in block.views]
    context = block_context(coarse, block, rotation, views)
    outside = ~block.margin.contains(coarse["means"].double().numpy() @ rotation[:2].T)
    assert not block.margin.contains(context["means"].double().numpy() @ rotation[:2].T).any()
    assert (torch.sigmoid(context["opacities"]) >= ALPHA_MIN).all()
    opaque = outside & (torch.sigmoid(coarse["opacities"]) >= ALPHA_MIN).numpy()
    assert 0 < len(context["means"]) < 0.95 * opaque.sum()  # the views' cut drops some: the test is not vacuous
    whole = {k: v[torch.from_numpy(outside)] for k, v in coarse.items()}
    cameras = [camera(v) for v in views[:: max(1, len(views) // 6)]]
    got = render(context, cameras, tmp_path / "cut.ply")
    want = render(whole, cameras, tmp_path / "whole.ply")
    assert want.abs().amax() > 0.2  # the outside shows in these views
    torch.testing.assert_close(got, want, rtol=0, atol=1e-5)


def _config(path: Path) -> Path:
    return block_config(path, max_points=400)


def _blocks(*args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "scripts/train_blocks.py", "--threads", "1", *args]
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=240)


def _rows(params: dict[str, torch.Tensor]) -> set[tuple[float, ...]]:
    return {tuple(row) for row in params["means"].tolist()}


@pytest.mark.slow
def test_coarse_context_trains_own_gaussians_and_never_reaches_the_merge(street, tmp_path):
    manifest = split_scene(street, tmp_path / "part", SplitOptions(grid=(2, 1)), say=lambda line: None).path
    runs = manifest.parent / "runs"
    common = ["--manifest", str(manifest), "--config", str(_config(tmp_path / "block.yaml"))]
    array = _blocks(*common, "--rank", "1", "--world-size", "2")  # a job array cannot wait for a coarse model
    assert array.returncode == 2 and "--coarse-only" in array.stderr, array.stderr

    first = _blocks(*common, "--coarse-steps", "10")
    assert first.returncode == 0, first.stdout + first.stderr
    assert "coarse: training the whole scene, 42 views, 10 steps" in first.stdout
    assert "done: 10 steps" in (runs / "logs" / "coarse.log").read_text()
    coarse = load_ply(runs / "coarse" / "point_cloud.ply")
    for name in ("block_000", "block_001"):
        context_ply = runs / "context" / f"{name}.ply"
        config = yaml.safe_load((runs / name / "config.yaml").read_text())
        assert config["model"]["context"] == str(context_ply)
        context, trained = load_ply(context_ply), load_ply(runs / name / "point_cloud.ply")
        assert 0 < len(context["means"]) < len(coarse["means"]) and _rows(context) <= _rows(coarse)
        checkpoint = torch.load(sorted((runs / name / "checkpoints").glob("*.pth"))[-1], weights_only=False)
        assert torch.equal(trained["means"], checkpoint["model"]["params.means"])  # the model's own rows, all of them
        assert not (_rows(trained) & _rows(context))  # no context row was trained or exported

    again = _blocks(*common, "--only", "block_001", "--overwrite", "--block-init", "coarse")
    assert again.returncode == 0 and "coarse: done already, reused" in again.stdout, again.stdout + again.stderr
    start = yaml.safe_load((runs / "block_001" / "config.yaml").read_text())["model"]["init_ply"]
    begun = load_ply(start)  # the coarse model's rows in the block's region: the complement of its context
    assert 0 < len(begun["means"]) and _rows(begun) <= _rows(coarse)
    assert not (_rows(begun) & _rows(load_ply(runs / "context" / "block_001.ply")))
    merged = subprocess.run(
        [sys.executable, "scripts/merge_blocks.py", "--manifest", str(manifest), "--out", str(tmp_path / "merged")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert merged.returncode == 0, merged.stderr
    joined = load_ply(tmp_path / "merged" / "point_cloud.ply")
    contexts = set().union(*(_rows(load_ply(runs / "context" / f"{n}.ply")) for n in ("block_000", "block_001")))
    assert len(joined["means"]) > 0 and not (_rows(joined) & contexts)


def test_coarse_steps_must_be_positive(partition, tmp_path):
    common = ["--manifest", str(partition.path), "--config", str(_config(tmp_path / "b.yaml"))]
    result = _blocks(*common, "--coarse-steps", "0")
    assert result.returncode == 2 and "--coarse-steps: must be >= 1, got 0" in result.stderr
    result = _blocks(*common, "--context", "none", "--block-init", "coarse")
    assert result.returncode == 2 and "--block-init coarse" in result.stderr and "--context coarse" in result.stderr
