"""The report's curves: PSNR and loss from the run's log, against steps and against seconds."""

from __future__ import annotations

from html import escape

from .runlog import Point, RunLog
from .svg import Series, line_chart

MAX_POINTS = 1000  # per series and chart; longer series are averaged over runs of equal length
LOSS = "train/loss"


def psnr_names(log: RunLog) -> list[str]:
    """The logged PSNR series (``val/psnr``, ``test/psnr``, any ``<split>/psnr``), training's first."""
    order = {"train": 0, "val": 1, "test": 2}
    names = [n for n in log.series if n.rsplit("/", 1)[-1] == "psnr"]
    return sorted(names, key=lambda n: (order.get(n.split("/", 1)[0], 3), n))


def thin(points: list[Point], limit: int = MAX_POINTS) -> list[Point]:
    """``points`` as is, or, beyond ``limit``, the means of ``limit`` consecutive runs of them."""
    if len(points) <= limit:
        return points
    edges = [round(i * len(points) / limit) for i in range(limit + 1)]
    runs = [points[a:b] for a, b in zip(edges, edges[1:])]
    return [
        Point(
            round(sum(p.step for p in r) / len(r)), sum(p.seconds for p in r) / len(r), sum(p.value for p in r) / len(r)
        )
        for r in runs
    ]


def curves_section(log: RunLog, log_name: str) -> str:
    """HTML: four charts (PSNR and loss, against steps and seconds), or sentences for what is absent."""
    parts: list[str] = []
    groups = [("PSNR (dB)", psnr_names(log)), ("loss", [LOSS] if LOSS in log.series else [])]
    for label, names in groups:
        if not names:
            parts.append(_missing_curve(label, log_name))
            continue
        points = {n: thin(log.series[n]) for n in names}
        for axis, title in (("step", "steps"), ("seconds", "seconds")):
            series = [
                Series(n, [float(getattr(p, axis)) for p in ps], [p.value for p in ps]) for n, ps in points.items()
            ]
            parts.append(line_chart(series, f"{label} against {title}", title, label))
        thinned = [n for n in names if len(log.series[n]) > MAX_POINTS]
        if thinned:
            parts.append(
                f'<p class="note">{escape(", ".join(thinned))}: more than {MAX_POINTS} records, '
                f"drawn as the means of {MAX_POINTS} runs of consecutive ones.</p>"
            )
    notes = [*log.problems]
    if log.resumes:
        notes.append(
            f"{log.resumes} resumed run(s): each continues the curves from its checkpoint's step; "
            "seconds count training runs only, not the time between them."
        )
    parts += [f'<p class="note">{escape(n)}</p>' for n in notes]
    return "\n".join(parts)


def _missing_curve(label: str, log_name: str) -> str:
    if label == "loss":
        text = f"No loss curve: {log_name} has no {LOSS} records (LogHook writes them every interval steps)."
    else:
        text = f"No PSNR curve: {log_name} has no PSNR records (validation every trainer.val_interval steps, and the test)."
    return f'<p class="missing">{escape(text)}</p>'
