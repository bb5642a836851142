"""Helpers of the distributed tests: configs on the demo scene and launching train.py (torchrun or not)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
TRAIN = REPO / "scripts" / "train.py"
PLUGIN = Path(__file__).with_name("rank_probe_plugin.py")


def demo_scene() -> Path:
    from pointrix_lite.data.demo import ensure_demo

    return ensure_demo(REPO / "data" / "demo") / "nerf_synthetic"


def renderer_backend() -> str:
    from pointrix_lite.renderer import native

    # Built here, in the test process, so the ranks only load the cached extension.
    return "native" if native.is_available() else "torch"


def short_run_config(path: Path, scene: Path, backend: str, exp_dir: Path, max_steps: int = 20) -> Path:
    """A short run at 1/4 resolution (40x40) whose strategy densifies at steps 6, 11, 16."""
    cfg: dict[str, Any] = {
        "name": "dist",
        "exp_dir": str(exp_dir),
        "seed": 0,
        "device": "cpu",
        "trainer": {
            "max_steps": max_steps,
            "val_interval": 0,
            "batch_size": 1,
            "test_at_end": True,
            "save_test_renders": False,
        },
        "dataset": {
            "type": "NerfSyntheticDataset",
            "data_path": str(scene),
            "white_background": True,
            "scale": 4,
            "max_points": 1500,
        },
        "model": {"type": "GaussianModel", "sh_degree": 1, "sh_degree_interval": 10},
        "renderer": {"type": "GaussianRenderer", "backend": backend},
        # Small steps so grow *and* prune happen within the run; prune_opa close to the initial
        # opacity 0.1 so some Gaussians are pruned too; splits draw random offsets.
        "strategy": {
            "type": "DefaultStrategy",
            "refine_start_iter": 4,
            "refine_every": 5,
            "reset_every": 1000,
            "refine_stop_iter": 1000,
            "prune_opa": 0.09,
        },
        "writers": [{"type": "JsonlWriter"}, {"type": "TensorboardWriter"}],
        "hooks": [{"type": "RankProbeHook"}],
        "save_ckpt_after_iter": 10,
        "log_show_after_iter": 5,
    }
    path.write_text(yaml.safe_dump(cfg))
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Launch:
    returncode: int
    stdout: str
    stderr: str
    seconds: float


def launch(config: Path, nproc: int, *args: str, timeout: float = 240) -> Launch:
    """Run train.py with ``nproc`` processes (torchrun for > 1), one torch thread each."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    env.pop("WORLD_SIZE", None)
    train = [str(TRAIN), "--config", str(config), "--plugin", str(PLUGIN), *args]
    if nproc == 1:
        cmd = [sys.executable, *train]
    else:
        cmd = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc_per_node",
            str(nproc),
            "--master_addr",
            "127.0.0.1",
            "--master_port",
            str(free_port()),
            *train,
        ]
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)
    return Launch(proc.returncode, proc.stdout, proc.stderr, time.perf_counter() - start)


def read_probe(exp_dir: Path, rank: int) -> list[dict[str, Any]]:
    path = exp_dir / "probe" / f"rank{rank}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]
