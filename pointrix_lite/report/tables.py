"""The report's tables from ``metrics.json``: the run at a glance, scores per test view, phase times.

Every cell holding a number carries it unrounded in ``data-value`` (JSON), so the page can be
checked against, or scraped back into, the file it came from.
"""

from __future__ import annotations

import json
from html import escape
from typing import Any

ALIGNED = " (aligned)"  # column suffix of the scores after test-time pose alignment (PoseOptHook)
# Phases timed within another one (progress.PHASES, DefaultTrainer): shown, but not added to the total twice.
NESTED = {"validation": "training", "loading images": "setup"}


def format_metric(name: str, value: Any) -> str:
    """``31.13`` for PSNR (dB), ``0.9759`` for the rest, ``n/a`` for None."""
    if value is None:
        return "n/a"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    return f"{value:.2f}" if name.startswith("psnr") else f"{value:.4f}"


def _cell(name: str, value: Any) -> str:
    return f'<td data-value="{escape(json.dumps(value))}">{escape(format_metric(name, value))}</td>'


def _columns(*tables: Any) -> list[str]:
    """Metric names in order of first appearance over ``tables`` ({view: {metric: value}} or {metric: value})."""
    names: dict[str, None] = {}
    for table in tables:
        for row in (table or {}).values():
            if isinstance(row, dict):
                names.update(dict.fromkeys(row))
    return list(names)


def per_view_table(metrics: dict[str, Any]) -> str:
    """The mean, then one row per test view; given-pose scores, then aligned ones where the run has them."""
    per_view = metrics.get("per_view") if isinstance(metrics.get("per_view"), dict) else {}
    aligned = metrics.get("per_view_aligned") if isinstance(metrics.get("per_view_aligned"), dict) else {}
    names = _columns(per_view) or [str(k) for k in metrics.get("mean") or {}]
    aligned_names = _columns(aligned)
    head = "".join(f"<th>{escape(n)}</th>" for n in names) + "".join(
        f"<th>{escape(n + ALIGNED)}</th>" for n in aligned_names
    )
    rows = [f"<tr><th>view</th>{head}</tr>"]

    def row(label: str, scores: Any, aligned_scores: Any, css: str) -> str:
        scores = scores if isinstance(scores, dict) else {}
        aligned_scores = aligned_scores if isinstance(aligned_scores, dict) else {}
        cells = [_cell(n, scores.get(n)) for n in names] + [_cell(n, aligned_scores.get(n)) for n in aligned_names]
        return f'<tr class="{css}" data-view="{escape(label)}"><th>{escape(label)}</th>{"".join(cells)}</tr>'

    rows.append(row("mean", metrics.get("mean"), metrics.get("mean_aligned"), "mean"))
    rows += [row(str(view), scores, aligned.get(view), "view") for view, scores in per_view.items()]
    return '<table id="per-view-table">\n' + "\n".join(rows) + "\n</table>"


def summary_table(metrics: dict[str, Any] | None, log_steps: int | None) -> str:
    """Steps, Gaussians, training time and the mean test scores, as label/value rows."""
    metrics = metrics or {}
    rows: list[tuple[str, str]] = []
    steps = metrics.get("steps", log_steps)
    if metrics.get("source"):
        rows.append(("model", f"{metrics['source']} (rendered by render.py --ply, not trained here)"))
    if steps is not None:
        rows.append(("steps", f"{steps:,}" if isinstance(steps, int) else str(steps)))
    if isinstance(metrics.get("num_gaussians"), int):
        rows.append(("Gaussians", f"{metrics['num_gaussians']:,}"))
    if isinstance(metrics.get("train_seconds"), (int, float)):
        rows.append(("training time", f"{metrics['train_seconds']:.1f} s (validation included)"))
    for key, suffix in (("mean", ""), ("mean_aligned", ALIGNED)):
        scores = metrics.get(key)
        if isinstance(scores, dict) and scores:
            text = " · ".join(f"{n.upper()} {format_metric(n, v)}" for n, v in scores.items())
            views = len(metrics.get("per_view") or {})
            rows.append((f"test{suffix}", f"{text} · {views} views" if views else text))
    notes = metrics.get("notes")
    for name, note in notes.items() if isinstance(notes, dict) else []:
        rows.append((f"note: {name}", str(note)))
    body = "\n".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in rows)
    return f'<table id="summary-table">\n{body}\n</table>'


def phase_table(metrics: dict[str, Any]) -> str | None:
    """Training and each phase outside it in seconds, with a bar of its share; None without times."""
    phases: list[tuple[str, float]] = []
    if isinstance(metrics.get("train_seconds"), (int, float)):
        phases.append(("training", float(metrics["train_seconds"])))
    given = metrics.get("phase_seconds")
    phases += [
        (str(k), float(v)) for k, v in (given.items() if isinstance(given, dict) else []) if isinstance(v, (int, float))
    ]
    if not phases:
        return None
    present = {name for name, _ in phases}
    inside = {name: NESTED[name] for name in present if NESTED.get(name) in present}
    total = sum(seconds for name, seconds in phases if name not in inside) or 1.0
    rows = ["<tr><th>phase</th><th>seconds</th><th>share</th></tr>"]
    for name, seconds in phases:
        share = seconds / total
        label = f"{name} (in {inside[name]})" if name in inside else name
        bar = f'<span class="bar" style="width:{max(share * 200, 1):.0f}px"></span> {share:.0%}'
        rows.append(f'<tr><th>{escape(label)}</th><td data-value="{seconds!r}">{seconds:.2f}</td><td>{bar}</td></tr>')
    return '<table id="phase-table">\n' + "\n".join(rows) + "\n</table>"
