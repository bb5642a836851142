"""What a run left in its folder, read for the report; each missing or unreadable part becomes a sentence.

Train runs write ``config.yaml``, ``metrics.json``, the JSON-lines log and ``renders/test/``;
``render.py`` writes ``metrics.json`` and ``renders/test/`` into its ``--out`` folder only. Nothing
here raises on a file's content: the report is written at the end of a run and must not fail it.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .runlog import RunLog, read_log

DEFAULT_LOG = "log.jsonl"  # JsonlWriter's default filename


@dataclass
class RunData:
    exp_dir: Path
    metrics: dict[str, Any] | None = None
    config: dict[str, Any] | None = None
    config_text: str | None = None
    log: RunLog | None = None
    log_name: str = DEFAULT_LOG
    missing: dict[str, str] = field(default_factory=dict)  # part ("metrics", "config", "log") -> sentence


def collect(exp_dir: Path) -> RunData:
    """``metrics.json``, ``config.yaml`` and the log of ``exp_dir``, with a sentence for each one absent."""
    run = RunData(exp_dir)
    _read_config(run)
    _read_metrics(run)
    _read_run_log(run)
    return run


def option(config: dict[str, Any] | None, dotted: str) -> Any:
    """``config["a"]["b"]`` for ``"a.b"``, or None where the config or a key is missing."""
    value: Any = config
    for key in dotted.split("."):
        value = value.get(key) if isinstance(value, dict) else None
    return value


def _read_config(run: RunData) -> None:
    path = run.exp_dir / "config.yaml"
    if not path.is_file():
        run.missing["config"] = "No config.yaml in this folder (render.py writes none into its --out folder)."
        return
    try:
        run.config_text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        run.missing["config"] = f"config.yaml could not be read ({_first_line(exc)})."
        return
    try:
        loaded = yaml.safe_load(run.config_text)
    except yaml.YAMLError as exc:
        run.missing["config"] = f"config.yaml is not valid YAML ({_first_line(exc)}); shown as text."
        return
    if isinstance(loaded, dict):
        run.config = loaded


def _read_metrics(run: RunData) -> None:
    path = run.exp_dir / "metrics.json"
    if not path.is_file():
        why = (
            "trainer.test_at_end is false"
            if option(run.config, "trainer.test_at_end") is False
            else ("the run has not reached its test yet, or stopped before it")
        )
        run.missing["metrics"] = f"No metrics.json: no test scores ({why})."
        return
    try:
        metrics = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:  # UnicodeDecodeError is a ValueError
        run.missing["metrics"] = f"metrics.json could not be read ({_first_line(exc)})."
        return
    if not isinstance(metrics, dict):
        run.missing["metrics"] = f"metrics.json holds a {type(metrics).__name__}, not the object test() writes."
        return
    run.metrics = metrics


def _read_run_log(run: RunData) -> None:
    writers = option(run.config, "writers")
    names = [
        w.get("filename", DEFAULT_LOG) for w in writers or [] if isinstance(w, dict) and w.get("type") == "JsonlWriter"
    ]
    if isinstance(writers, list) and not names:
        kinds = [str(w.get("type")) for w in writers if isinstance(w, dict)]
        text = f"No curves: the run's writers ({', '.join(kinds) or 'none'}) include no JsonlWriter, whose log this page draws"
        if "TensorboardWriter" in kinds:
            tb = [w for w in writers if isinstance(w, dict) and w.get("type") == "TensorboardWriter"]
            subdir = str(tb[0].get("subdir") or "tensorboard")
            command = shlex.join(["tensorboard", "--logdir", str(run.exp_dir / subdir)])  # pastes as typed
            text += f"; {command} shows the curves"
        run.missing["log"] = text + "."
        return
    run.log_name = str(names[0]) if names else DEFAULT_LOG
    path = run.exp_dir / run.log_name
    if not path.is_file():
        why = "the run's JsonlWriter writes it" if names else "render.py writes none; a run writes it with JsonlWriter"
        run.missing["log"] = f"No curves: {run.log_name} is not in this folder ({why})."
        return
    try:
        run.log = read_log(path)
    except OSError as exc:
        run.missing["log"] = f"No curves: {run.log_name} could not be read ({_first_line(exc)})."


def _first_line(exc: Exception) -> str:
    return " ".join(str(exc).split())[:200]


def run_outputs(exp_dir: Path) -> list[str]:
    """Which of the files a run or ``render.py`` writes ``exp_dir`` holds; none: not a run folder."""
    return [name for name in ("config.yaml", "metrics.json", DEFAULT_LOG, "renders/test") if (exp_dir / name).exists()]
