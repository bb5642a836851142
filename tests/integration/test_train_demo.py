"""The main job end to end: train the demo scene, then check every output with a second reader."""

from __future__ import annotations

import json

import imageio.v3 as iio
import numpy as np
import pytest
import torch
from plyfile import PlyData
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from pointrix_lite.components import import_all
from pointrix_lite.engine.experiment import load_experiment
from pointrix_lite.engine.trainer import DefaultTrainer
from pointrix_lite.io.ply import ply_property_names

from .conftest import MAX_STEPS, REPO, SCALE, demo_overrides


def _psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = np.mean((a.astype(np.float64) / 255 - b.astype(np.float64) / 255) ** 2)
    return float(-10 * np.log10(mse))


@pytest.fixture(scope="module")
def init_psnr(tmp_path_factory) -> float:
    """Test PSNR of the untrained model: the same config with max_steps=0, through test()."""
    import_all()
    exp_dir = tmp_path_factory.mktemp("init") / "exp"
    cfg = load_experiment(REPO / "configs" / "demo.yaml", demo_overrides(exp_dir, "trainer.max_steps=0", "writers=[]"))
    return DefaultTrainer(cfg, exp_dir, "cpu").test()["mean"]["psnr"]


def test_training_improves_test_psnr_by_8db(trained_run, init_psnr):
    psnr = trained_run.metrics["mean"]["psnr"]
    assert psnr > init_psnr + 8.0, (init_psnr, psnr)


def test_metrics_json_format(trained_run):
    m = trained_run.metrics
    assert m["steps"] == MAX_STEPS and m["train_seconds"] > 0
    ply = PlyData.read(str(trained_run.exp_dir / "point_cloud.ply"))
    assert m["num_gaussians"] == ply["vertex"].count
    names = sorted(m["per_view"])
    assert names == [f"r_{i:03d}" for i in range(0, 48, 8)]  # the demo's test views
    for metric in ("psnr", "ssim"):
        per_view = [m["per_view"][n][metric] for n in names]
        assert m["mean"][metric] == pytest.approx(np.mean(per_view), abs=1e-9)
    assert 0.0 < m["mean"]["ssim"] <= 1.0
    if m["mean"]["lpips"] is None:  # no VGG weights cached: null plus a one-line reason
        assert "\n" not in m["notes"]["lpips"] and m["notes"]["lpips"]
    else:
        assert 0.0 <= m["mean"]["lpips"] < 1.0


def test_renders_match_metrics(trained_run):
    root = trained_run.exp_dir / "renders" / "test"
    renders = sorted(p.name for p in (root / "render").glob("*.png"))
    assert renders == sorted(p.name for p in (root / "gt").glob("*.png"))
    assert renders == [f"{n}.png" for n in sorted(trained_run.metrics["per_view"])]
    for name in renders:
        render, gt = iio.imread(root / "render" / name), iio.imread(root / "gt" / name)
        assert render.shape == gt.shape == (160 // SCALE, 160 // SCALE, 3)
        # PNGs are 8-bit, metrics use the float render: agreement within quantisation.
        expected = trained_run.metrics["per_view"][name[:-4]]["psnr"]
        assert _psnr(render, gt) == pytest.approx(expected, abs=0.15)


def test_ply_is_a_3dgs_file(trained_run):
    ply = PlyData.read(str(trained_run.exp_dir / "point_cloud.ply"))
    vertex = ply["vertex"]
    assert [p.name for p in vertex.properties] == ply_property_names(3)  # sh_degree 1: 3 rest coefs
    xyz = np.stack([vertex[k] for k in "xyz"], axis=1)
    assert np.isfinite(xyz).all() and np.abs(xyz).max() < 50.0  # inside the scene, not exploded


def test_tensorboard_has_scalars_and_images(trained_run):
    acc = EventAccumulator(str(trained_run.exp_dir / "tensorboard"), size_guidance={"scalars": 0, "images": 0})
    acc.Reload()
    assert acc.Scalars("test/psnr")[0].value == pytest.approx(trained_run.metrics["mean"]["psnr"], rel=1e-6)
    assert [e.step for e in acc.Scalars("val/psnr")] == [150, 300]
    val_images = [t for t in acc.Tags()["images"] if t.startswith("val/")]
    assert val_images and all(e.width == 2 * 160 // SCALE for t in val_images for e in acc.Images(t))  # gt | render
    assert any(t.startswith("test/") for t in acc.Tags()["images"])


def test_final_summary_names_outputs(trained_run):
    out = trained_run.stdout
    m = trained_run.metrics
    assert f"PSNR {m['mean']['psnr']:.2f} dB" in out
    assert f"{m['num_gaussians']:,} Gaussians" in out
    for path in ("metrics.json", "point_cloud.ply", "renders/test", "tensorboard"):
        assert str(trained_run.exp_dir / path) in out
    latest = (trained_run.exp_dir / "checkpoints" / "latest.txt").read_text().strip()
    assert latest == f"step_{MAX_STEPS:06d}.pth"
    saved = json.loads((trained_run.exp_dir / "metrics.json").read_text())
    assert saved == m


def test_phases_outside_training_are_timed(trained_run):
    phases = trained_run.metrics["phase_seconds"]
    # validation at steps 150 and 300, the PLY after training, then the test; loading is part of setup
    assert {"setup", "loading images", "validation", "export", "test"} <= set(phases)
    assert all(v >= 0 for v in phases.values()) and phases["loading images"] <= phases["setup"]
    assert "time outside training: " in trained_run.stdout and "test " in trained_run.stdout


def test_checkpoint_carries_training_time(trained_run):
    # The final checkpoint is saved inside the loop (step 300 is a save_ckpt_after_iter multiple),
    # so it must already hold the time trained so far, not the time at the start of the run.
    ckpt = torch.load(trained_run.exp_dir / "checkpoints" / f"step_{MAX_STEPS:06d}.pth", weights_only=True)
    assert 0.0 < ckpt["train_seconds"] <= trained_run.metrics["train_seconds"]


def test_config_yaml_keeps_the_factor_auto_chose(tmp_path):
    """scale: auto is resolved by the training device; config.yaml stores the factor, so a resumed run
    and render.py load the views at the size this run trained at, whatever device they run on."""
    import io
    from contextlib import redirect_stdout

    import yaml

    from pointrix_lite.cli.train import main as train_main

    exp = tmp_path / "exp"
    with redirect_stdout(io.StringIO()):
        code = train_main(
            [
                "--config",
                str(REPO / "configs" / "demo.yaml"),
                *demo_overrides(exp),
                "dataset.scale=auto",
                "trainer.max_steps=2",
                "save_ckpt_after_iter=0",
            ]
        )
    assert code == 0
    saved = yaml.safe_load((exp / "config.yaml").read_text())["dataset"]["scale"]
    assert saved == 1.0  # the demo's 160x160 fits the CPU's budget
