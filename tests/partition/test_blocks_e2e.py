"""The whole path on a tiny street: partition, 2-rank torchrun over 3 blocks with one killed, that block
resumed alone, merge, render.py --ply on the whole scene's test views."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from pointrix_lite.partition.split import SplitOptions, split_scene
from pointrix_lite.partition.status import read_status

from .block_config import block_config

REPO = Path(__file__).resolve().parents[2]
PLUGIN = Path(__file__).with_name("kill_plugin.py")


def _run(*args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    """Run a command in its own session; on timeout its whole process group goes (torchrun's workers too)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("WORLD_SIZE", None)
    proc = subprocess.Popen(
        [sys.executable, *args],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"timed out after {timeout} s: {args}\n{out}\n{err}")
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _config(path: Path, once: Path) -> Path:
    return block_config(path, {"type": "KillBlockHook", "block": "block_000", "step": 15, "once_file": str(once)})


@pytest.mark.slow
def test_torchrun_blocks_kill_resume_merge_render(street, tmp_path):
    manifest = split_scene(street, tmp_path / "part", SplitOptions(grid=(3, 1)), say=lambda line: None).path
    config = _config(tmp_path / "block.yaml", tmp_path / "killed_once")
    common = ["--manifest", str(manifest), "--config", str(config), "--plugin", str(PLUGIN), "--threads", "1"]
    first = _run(
        "-m",
        "torch.distributed.run",
        "--nproc_per_node",
        "2",
        "--master_addr",
        "127.0.0.1",
        "--master_port",
        str(_free_port()),
        "scripts/train_blocks.py",
        *common,
    )
    out = first.stdout + first.stderr
    assert first.returncode != 0, out  # a block failed: the job says so
    runs = manifest.parent / "runs"
    states = {b: read_status(runs, b) for b in ("block_000", "block_001", "block_002")}
    assert states["block_000"].state == "failed" and states["block_000"].message == "killed by SIGKILL", out
    assert states["block_001"].state == "done" and states["block_002"].state == "done", (
        out
    )  # rank 0 went on after the kill
    assert all(s.peak_rss_bytes > 0 and s.seconds > 0 for s in states.values())
    assert "--only block_000 --resume" in out

    refused = _run("scripts/merge_blocks.py", "--manifest", str(manifest), "--out", str(tmp_path / "merged"))
    assert refused.returncode == 2 and "block_000: training failed" in refused.stderr

    again = _run("scripts/train_blocks.py", *common, "--only", "block_000", "--resume")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "block_000: resuming" in again.stdout and read_status(runs, "block_000").state == "done"
    log = (runs / "logs" / "block_000.log").read_text()
    assert "--resume" in log and "step 20/20" in log

    merged = _run("scripts/merge_blocks.py", "--manifest", str(manifest), "--out", str(tmp_path / "merged"))
    assert merged.returncode == 0, merged.stderr
    ply = tmp_path / "merged" / "point_cloud.ply"
    render = _run("scripts/render.py", "--ply", str(ply), "--data", str(street))
    assert render.returncode == 0, render.stderr
    metrics = json.loads((tmp_path / "merged" / "point_cloud_render" / "metrics.json").read_text())
    assert metrics["mean"]["psnr"] > 5 and len(metrics["per_view"]) == 6
