"""Issue 63's partition cases, each with a real hostile input: manifest names that are paths, a re-partition
that fails half-way, a merge into a block's run, stale block runs after a re-partition, a hand-edited
manifest with a block removed or listed twice, and a grid too large to be a plan."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pointrix_lite.errors import ConfigError, DataError
from pointrix_lite.io.ply import save_ply
from pointrix_lite.partition.manifest import block_digest, load_manifest
from pointrix_lite.partition.merge import merge_blocks
from pointrix_lite.partition.split import SplitOptions, split_scene
from pointrix_lite.partition.status import BlockStatus, write_status

from .test_merge import _gaussians

REPO = Path(__file__).resolve().parents[2]


def _cli(script: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(REPO / "scripts" / script), *args], capture_output=True, text=True, timeout=120, cwd=REPO
    )


@pytest.fixture
def part(partition, tmp_path) -> Path:
    """A copy of the session's 2 x 2 partition this test may spoil."""
    return Path(shutil.copytree(partition.root, tmp_path / "part", symlinks=True))


def _edit(manifest: Path, fn) -> None:
    data = json.loads(manifest.read_text())
    fn(data)
    manifest.write_text(json.dumps(data))


def test_a_block_name_that_is_a_path_is_refused_before_anything_is_deleted(part, tmp_path):
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep.txt").write_text("mine")

    def hostile(data):
        data["blocks"][0]["name"] = "../victim"
        data["blocks"][0]["folder"] = "blocks/../../victim"

    _edit(part / "manifest.json", hostile)
    args = ["--manifest", str(part), "--config", str(REPO / "configs" / "colmap_cpu.yaml")]
    proc = _cli("train_blocks.py", *args, "--runs", str(part / "runs"), "--overwrite", "--only", "../victim")
    assert proc.returncode == 2 and (victim / "keep.txt").read_text() == "mine"
    assert proc.stderr.strip().startswith(f"error: {part / 'manifest.json'}: blocks[0] is named '../victim'")


def test_a_failed_repartition_leaves_the_old_partition_whole(part, street):
    before = (part / "manifest.json").read_text()
    with pytest.raises(DataError, match="use fewer blocks or a larger --margin"):
        split_scene(street, part, SplitOptions(grid=(30, 30), overwrite=True), say=lambda line: None)
    assert (part / "manifest.json").read_text() == before
    assert sorted(p.name for p in (part / "blocks").iterdir()) == [f"block_00{i}" for i in range(4)]
    assert not [p for p in part.iterdir() if p.name.startswith(".partition")]  # no stage left behind
    load_manifest(part)  # still a whole partition


def test_a_merge_into_the_runs_or_the_partition_is_refused(part):
    runs = part / "runs"
    for out in (runs / "block_000", part / "merged"):
        proc = _cli("merge_blocks.py", "--manifest", str(part), "--out", str(out))
        assert proc.returncode == 2 and "choose a folder outside it" in proc.stderr, proc.stderr


def _fake_runs(manifest, runs: Path, digest_of=block_digest) -> None:
    """Each block 'trained': a PLY of a few Gaussians in its cell and a done status for its digest."""
    ground = np.asarray(manifest.rotation)
    for b in manifest.blocks:
        pts = np.zeros((1, 3))
        xy = [0.0 if v is None else v for v in (b.cell.x0, b.cell.y0)]
        pts[0] = np.linalg.solve(ground, [xy[0] + 1e-3, xy[1] + 1e-3, 0.0])
        save_ply(_gaussians(pts, np.zeros(1)), runs / b.name / "point_cloud.ply")
        status = BlockStatus(b.name, "done", "", str(runs / b.name), partition=digest_of(manifest, b))
        write_status(runs, status)


def test_runs_of_an_earlier_partition_are_not_taken_for_this_ones(part, street, tmp_path):
    old = load_manifest(part)
    _fake_runs(old, part / "runs")
    merge_blocks(old, part / "runs", tmp_path / "merged_old", say=lambda line: None)  # matching: merges
    new = split_scene(street, part, SplitOptions(grid=(3, 1), overwrite=True), say=lambda line: None)
    with pytest.raises(DataError) as e:
        merge_blocks(new, part / "runs", tmp_path / "merged_new", say=lambda line: None)
    assert "trained on another partition" in str(e.value) and "--only block_000 --overwrite" in str(e.value)
    args = ["--manifest", str(part), "--config", str(REPO / "configs" / "colmap_cpu.yaml"), "--resume"]
    (part / "runs" / "block_000" / "checkpoints").mkdir(parents=True)
    (part / "runs" / "block_000" / "checkpoints" / "latest.txt").write_text("step_000001.pth")
    proc = _cli("train_blocks.py", *args)
    assert proc.returncode == 2 and "block_000: its run in" in proc.stderr and "done already" not in proc.stdout


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda d: d["blocks"].pop(1), "no block's cell covers ground point"),
        (lambda d: d["blocks"].append(dict(d["blocks"][0])), "block block_000 is listed twice"),
        (lambda d: d["blocks"][1].update(cell=[None, None, None, None]), "overlap"),
    ],
)
def test_a_hand_edited_manifest_is_refused_on_load(part, edit, message):
    _edit(part / "manifest.json", edit)
    with pytest.raises(DataError) as e:
        load_manifest(part)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_a_grid_too_large_to_be_a_plan_is_one_line(street, tmp_path):
    proc = _cli("partition.py", "--scene", str(street), "--out", str(tmp_path / "p"), "--grid", "100000x100000")
    assert proc.returncode == 2 and not (tmp_path / "p").exists()
    assert "10,000,000,000 blocks; at most 1024" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    with pytest.raises(ConfigError, match=r"--kd: must be in 1 \.\. 1024"):
        from pointrix_lite.cli.partition import build_parser, run

        run(build_parser().parse_args(["--scene", str(street), "--out", str(tmp_path / "q"), "--kd", "5000"]))


def test_a_stale_block_without_checkpoints_is_refused_on_resume_and_kept(part, street):
    """A finished run whose checkpoints were deleted (its PLY kept) is still a run: --resume over a
    re-partition names the block instead of clearing its folder and training it again."""
    _fake_runs(load_manifest(part), part / "runs")
    split_scene(street, part, SplitOptions(grid=(3, 1), overwrite=True), say=lambda line: None)
    ply = part / "runs" / "block_000" / "point_cloud.ply"
    before = ply.read_bytes()
    config = str(REPO / "configs" / "colmap_cpu.yaml")
    proc = _cli("train_blocks.py", "--manifest", str(part), "--config", config, "--resume")
    assert (
        proc.returncode == 2
        and "block_000: its run in" in proc.stderr
        and "--only block_000 --overwrite" in proc.stderr
    )
    assert len(proc.stderr.strip().splitlines()) == 1 and ply.read_bytes() == before


def test_a_finished_block_without_checkpoints_is_not_cleared_without_a_flag(part):
    _fake_runs(load_manifest(part), part / "runs")
    ply = part / "runs" / "block_000" / "point_cloud.ply"
    before = ply.read_bytes()
    proc = _cli("train_blocks.py", "--manifest", str(part), "--config", str(REPO / "configs" / "colmap_cpu.yaml"))
    assert proc.returncode == 2 and "holds a run of block_000 already" in proc.stderr
    assert ply.read_bytes() == before


def test_a_second_merge_into_the_same_folder_needs_overwrite(part, tmp_path):
    _fake_runs(load_manifest(part), part / "runs")
    out = tmp_path / "merged"
    first = _cli("merge_blocks.py", "--manifest", str(part), "--out", str(out))
    assert first.returncode == 0, first.stderr
    before = (out / "point_cloud.ply").read_bytes()
    again = _cli("merge_blocks.py", "--manifest", str(part), "--out", str(out))
    assert again.returncode == 2 and "holds a merged model already; pass --overwrite" in again.stderr
    assert (out / "point_cloud.ply").read_bytes() == before
    forced = _cli("merge_blocks.py", "--manifest", str(part), "--out", str(out), "--overwrite")
    assert forced.returncode == 0, forced.stderr


def test_an_unfinished_or_foreign_coarse_run_is_refused_and_kept(part):
    """The coarse stage is a run like a block's: an unfinished one (a checkpoint, no finished status) needs
    --resume or --overwrite, and a finished one of another scene split is never taken for this one's."""
    coarse = part / "runs" / "coarse"
    (coarse / "checkpoints").mkdir(parents=True)
    (coarse / "checkpoints" / "latest.txt").write_text("step_000010.pth\n")
    config = str(REPO / "configs" / "colmap_cpu.yaml")
    proc = _cli("train_blocks.py", "--manifest", str(part), "--config", config)
    assert proc.returncode == 2 and "holds an unfinished coarse run; pass --resume" in proc.stderr, proc.stderr
    save_ply(_gaussians(np.zeros((3, 3)), np.arange(3)), coarse / "point_cloud.ply")
    write_status(part / "runs", BlockStatus("coarse", "done", "", str(coarse), partition="another-split"))
    proc = _cli("train_blocks.py", "--manifest", str(part), "--config", config, "--resume")
    assert proc.returncode == 2 and "a coarse model of another partition" in proc.stderr, proc.stderr
    assert (coarse / "checkpoints" / "latest.txt").is_file() and (coarse / "point_cloud.ply").is_file()
