"""Running the real command line in a subprocess, and reading what a run left on disk."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
TRAIN = REPO / "scripts" / "train.py"
FAULT_PLUGIN = Path(__file__).with_name("fault_plugin.py")


def write_config(path: Path, raw: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def train_cmd(*args: str) -> list[str]:
    return [sys.executable, str(TRAIN), *args]


def run_train(*args: str, timeout: float = 180, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``python scripts/train.py ARGS`` from the repository root (``env``: extra variables); output captured as text."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    # A shell that starts pytest in the background without job control leaves SIGINT ignored, and an
    # ignored signal stays ignored across exec: the child gets Ctrl-C's default back, as in a terminal.
    return subprocess.run(
        train_cmd(*args),
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=REPO,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def logged(exp_dir: Path, name: str = "train/loss") -> dict[int, float]:
    """``{step: value}`` of one scalar in ``<exp_dir>/log.jsonl`` (a resumed run appends to it)."""
    out: dict[int, float] = {}
    for line in (exp_dir / "log.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if rec.get("kind") == "scalar" and rec["name"] == name:
            out[rec["step"]] = rec["value"]
    return out
