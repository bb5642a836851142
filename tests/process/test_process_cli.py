"""process.py end to end on 10 demo views (seconds): outputs re-read by pycolmap and ColmapDataset."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import imageio.v3 as iio
import pytest

from pointrix_lite.data.demo import ensure_demo
from pointrix_lite.process.colmap_import import import_pycolmap
from pointrix_lite.registry import DATASETS

REPO = Path(__file__).resolve().parents[2]


def _process(*args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, str(REPO / "scripts" / "process.py"), *args]
    return subprocess.run(cmd, capture_output=True, text=True)


@pytest.fixture(scope="module")
def processed(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    demo = ensure_demo(REPO / "data" / "demo")
    photos = tmp_path_factory.mktemp("photos")
    for i in range(10):  # neighbours on the ring: 75 degrees of azimuth
        (photos / f"r_{i:03d}.png").write_bytes((demo / "colmap" / "images" / f"r_{i:03d}.png").read_bytes())
    out = tmp_path_factory.mktemp("run") / "scene"
    proc = _process(
        "--images", str(photos), "--out", str(out), "--downscales", "1", "--threads", "1", "--principal-point", "refine"
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return out, proc


def test_outputs_are_what_colmap_dataset_reads(processed):
    out, proc = processed
    summary = json.loads((out / "colmap" / "summary.json").read_text())
    rec = import_pycolmap().Reconstruction(str(out / "sparse" / "0"))  # an independent reader
    names = sorted(im.name for im in rec.images.values())
    assert names == summary["registered"] and len(names) >= 4
    assert sorted(summary["registered"] + summary["unregistered"]) == [f"r_{i:03d}.png" for i in range(10)]
    assert [cam.model_name for cam in rec.cameras.values()] == ["PINHOLE"]  # undistorted
    assert sorted(p.name for p in (out / "images").iterdir()) == names
    cam = next(iter(rec.cameras.values()))
    for name in names:
        assert iio.imread(out / "images_2" / name).shape[:2] == (round(cam.height / 2), round(cam.width / 2))
    dataset = DATASETS.build({"type": "ColmapDataset", "data_path": str(out), "scale": 2, "test_every": 4}, "dataset")
    assert len(dataset.train_views) + len(dataset.test_views) == len(names)
    assert dataset.train_views[0].camera.width == round(cam.width / 2)
    assert (out / "colmap" / "colmap.log").stat().st_size > 0 and (out / "colmap" / "database.db").is_file()
    # The summary on the terminal ends with the command to run next.
    assert (
        summary["train_command"] == f"python scripts/train.py --config configs/colmap_cpu.yaml dataset.data_path={out}"
    )
    assert proc.stdout.rstrip().endswith(summary["train_command"])
    assert f"Registered {len(names)}/10 images" in proc.stdout
    # The principal point, freed in the last adjustment, is the raw model's (what undistortion read).
    raw = import_pycolmap().Reconstruction(str(out / "colmap" / "sparse" / "0"))
    (point,) = summary["principal_points"]
    raw_cam = next(iter(raw.cameras.values()))
    assert point == pytest.approx([float(v) for v in raw_cam.params[1:3]])
    centre = [raw_cam.width / 2, raw_cam.height / 2]
    moved = [abs(p - c) / n for p, c, n in zip(point, centre, (raw_cam.width, raw_cam.height))]
    held = "beyond 5% of the image: held at the centre" in " ".join(proc.stdout.split())  # rich wraps lines
    assert (point == centre) if held else (0 < max(moved) <= 0.05)
    for stage in ("features", "matching", "mapping", "principal point", "undistort", "downscale"):
        assert f"✓ {stage}: " in proc.stdout and summary["stage_seconds"][stage] >= 0
    # The training resolution the shipped config's scale: auto will pick for these 160 px photos.
    assert summary["image_size"] == [cam.width, cam.height]
    assert f"dataset.scale: auto -> 1: training at {cam.width}x{cam.height}, the images' full size" in proc.stdout


def test_second_run_refuses_to_overwrite(processed, tmp_path):
    out, _ = processed
    before = {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file()}
    proc = _process("--images", str(out / "images"), "--out", str(out))
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"error: --out {out}: already holds colmap, images, images_2, sparse; pass --overwrite to replace them "
        "or choose another folder"
    ]
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file()} == before


def test_printed_train_command_trains_with_the_shipped_config(processed, tmp_path):
    """The summary's command, run as printed (plus a short schedule), trains on the processed scene
    with configs/colmap_cpu.yaml: training poses as given, test views aligned, metrics written."""
    out, proc = processed
    command = proc.stdout.rstrip().splitlines()[-1].split()
    assert command[:4] == ["python", "scripts/train.py", "--config", "configs/colmap_cpu.yaml"]
    exp = tmp_path / "exp"
    extra = [
        "trainer.max_steps=12",
        "trainer.val_interval=0",
        "save_ckpt_after_iter=0",
        f"exp_dir={exp}",
        "hooks.1.test_align_steps=2",
        "dataset.test_every=4",
        "writers=[]",
    ]
    run = subprocess.run([sys.executable, *command[1:], *extra], cwd=REPO, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    metrics = json.loads((exp / "metrics.json").read_text())
    # Every test view was rendered and scored (12 steps on a white-background scene trained with
    # white_background false: the number itself is low and not the point here).
    assert sorted(metrics["per_view"]) == sorted(p.stem for p in (exp / "renders" / "test" / "render").iterdir())
    assert len(metrics["per_view"]) >= 1 and 0.0 < metrics["mean"]["psnr"] < 100.0
    assert set(metrics["per_view_aligned"]) == set(metrics["per_view"])  # given poses in mean, fitted beside
    names = [h["type"] for h in __import__("yaml").safe_load((exp / "config.yaml").read_text())["hooks"]]
    assert "PoseOptHook" in names
