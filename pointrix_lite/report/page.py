"""``report.html``: one self-contained page per run folder (inline CSS and SVG, images as data: URIs).

The page's Content-Security-Policy forbids every fetch except data: images, so a browser shows it
offline and it cannot reach the network even if a part of it tried.
"""

from __future__ import annotations

import datetime
from html import escape
from pathlib import Path

from ..errors import ConfigError, DataError
from ..io.atomic import atomic_write
from .charts import curves_section
from .collect import RunData, collect, option
from .tables import format_metric, per_view_table, phase_table, summary_table
from .views import ANCHORS, COLOURS, ShownViews, colour_index, error_scale, png_data_uri, read_test_views

REPORT_NAME = "report.html"
MAX_SIDE = 512  # px, long side of each image on the page
MAX_VIEWS = 16  # test views with images; the table lists every view
CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"
STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; max-width: 1700px; }
h1 { margin-bottom: 0.1em; } h2 { margin-top: 1.6em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; } th, td { padding: 2px 10px; text-align: right; border-bottom: 1px solid #eee; }
th:first-child { text-align: left; } tr.mean { font-weight: bold; background: #f4f4f4; }
#summary-table td { text-align: left; }
.missing { color: #8a4b00; background: #fff6e5; padding: 4px 8px; } .note { color: #555; }
svg.chart { margin: 0 12px 12px 0; font-size: 11px; } svg .box { fill: none; stroke: #999; }
svg .grid { stroke: #eee; } svg .title { font-weight: bold; font-size: 12px; } svg .tick { fill: #555; }
.views { display: flex; flex-wrap: wrap; gap: 0 28px; } figure.view { margin: 0 0 1.2em 0; }
figure.view .row { display: flex; gap: 6px; align-items: flex-start; }
figure.view img { image-rendering: pixelated; border: 1px solid #ddd; }
#phase-table td:last-child, #phase-table th:last-child { text-align: left; }
.bar { display: inline-block; height: 10px; background: #1f77b4; vertical-align: middle; }
pre { background: #f7f7f7; padding: 8px; overflow-x: auto; }
"""


def write_report(exp_dir: str | Path, *, max_side: int = MAX_SIDE, max_views: int = MAX_VIEWS) -> Path:
    """Write ``<exp_dir>/report.html`` from the files a run (or ``render.py``) left there; return its path.

    Reads ``metrics.json``, ``config.yaml``, the JSON-lines log and ``renders/test/{render,gt}``;
    each one absent or unreadable is a sentence on the page, never an error. The file is replaced
    atomically, so a Ctrl-C leaves the previous report or the new one.

    Raises:
        DataError: ``exp_dir`` is not a folder.
        ConfigError: ``max_side`` or ``max_views`` below 1.
        CheckpointWriteError: the page could not be written (disk full, read-only folder).
    """
    exp_dir = Path(exp_dir)
    if not exp_dir.is_dir():
        raise DataError(f"{exp_dir}: no such folder (expected a run's experiment folder)")
    if max_side < 1 or max_views < 1:
        raise ConfigError(f"report: max_side and max_views must be >= 1, got {max_side} and {max_views}")
    run = collect(exp_dir)
    renders = exp_dir / "renders" / "test"
    views = read_test_views(renders, max_side, max_views) if renders.is_dir() else None
    page = build_page(run, views, max_side).encode("utf-8")  # as its <meta charset> says, whatever the locale
    path = exp_dir / REPORT_NAME
    atomic_write(path, lambda f: f.write(page))
    return path


def build_page(run: RunData, views: ShownViews | None, max_side: int) -> str:
    """The whole HTML document."""
    name = run.exp_dir.resolve().name
    log_steps = max((p.step for s in run.log.series.values() for p in s), default=None) if run.log else None
    written = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    sections = [
        ("summary", "Summary", _missing(run, "metrics") + summary_table(run.metrics, log_steps)),
        ("curves", "Curves", _missing(run, "log") if run.log is None else curves_section(run.log, run.log_name)),
        ("views", "Test views", _views_section(run, views, max_side)),
        ("per-view", "Per-view scores", per_view_table(run.metrics) if run.metrics else _missing(run, "metrics")),
        ("phases", "Time", _phases_section(run)),
        ("config", "Config", _config_section(run)),
    ]
    body = "\n".join(
        f'<section id="{sid}">\n<h2>{title}</h2>\n{content}\n</section>' for sid, title, content in sections
    )
    return (
        '<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">\n'
        f"<title>{escape(name)}: run report</title>\n<style>{STYLE}</style>\n</head>\n<body>\n"
        f"<h1>{escape(name)}</h1>\n"
        f'<p class="note">{escape(str(run.exp_dir.resolve()))}, report written {escape(written)}</p>\n'
        f"{body}\n</body>\n</html>\n"
    )


def _missing(run: RunData, part: str) -> str:
    text = run.missing.get(part)
    return f'<p class="missing">{escape(text)}</p>\n' if text else ""


def _phases_section(run: RunData) -> str:
    table = phase_table(run.metrics) if run.metrics else None
    if table is not None:
        return table
    return _missing(run, "metrics") or '<p class="missing">metrics.json records no phase times.</p>'


def _config_section(run: RunData) -> str:
    if run.config_text is None:
        return _missing(run, "config")
    lines = run.config_text.count("\n") + 1
    return (
        f"{_missing(run, 'config')}<details><summary>config.yaml ({lines} lines)</summary>"
        f"<pre>{escape(run.config_text)}</pre></details>"
    )


def _views_section(run: RunData, views: ShownViews | None, max_side: int) -> str:
    if views is None or views.total == 0:
        why = (
            "trainer.save_test_renders is false"
            if option(run.config, "trainer.save_test_renders") is False
            else "the run has not reached its test, or it saved no renders"
        )
        return f'<p class="missing">No test renders: renders/test/ has no PNGs ({escape(why)}).</p>'
    scale = error_scale(views.error_histogram)
    intro = [f'<p class="note">{escape(_views_note(views, max_side, scale))}</p>']
    if scale is not None:
        intro.append(_colour_bar(scale))
    parts: list[str] = []
    per_view = (run.metrics or {}).get("per_view")
    per_view = per_view if isinstance(per_view, dict) else {}
    # file -> view: a name made safe for a file (a_b-3f1c29e0.png for "a b") is not the view's name
    files = (run.metrics or {}).get("render_files")
    view_of = {f: str(n) for n, f in files.items() if isinstance(f, str)} if isinstance(files, dict) else {}
    for view in views.views:
        name = view_of.get(f"{view.name}.png", view.name)
        error = None if view.error is None or scale is None else colour_index(view.error, scale)
        images = [
            f'<img data-kind="{kind}" alt="{escape(name)} {label}" width="{image.shape[1]}" '
            f'height="{image.shape[0]}" src="{png_data_uri(image, palette)}">'
            for kind, label, image, palette in (
                ("render", "render", view.render, None),
                ("gt", "ground truth", view.gt, None),
                ("error", "error map", error, COLOURS),
                ("normal", "normals", view.maps.get("normal"), None),
                ("depth", "depth", view.maps.get("depth"), None),
                ("median_depth", "median depth", view.maps.get("median_depth"), None),
            )
            if image is not None
        ]
        scores = per_view.get(name) if isinstance(per_view.get(name), dict) else {}
        caption = " · ".join([name] + [f"{n.upper()} {format_metric(n, v)}" for n, v in scores.items()])
        if view.size:
            caption += f" · {view.size[0]}x{view.size[1]}"
        if name != view.name:  # the file is not named as the view: say which it is
            caption += f" · file {view.name}.png"
        problems = "".join(f'<p class="missing">{escape(name)}: {escape(p)}</p>' for p in view.problems)
        parts.append(
            f'<figure class="view" data-view="{escape(name)}"><div class="row">{"".join(images)}</div>'
            f"<figcaption>{escape(caption)}</figcaption>{problems}</figure>"
        )
    return "\n".join(intro) + '\n<div class="views">\n' + "\n".join(parts) + "\n</div>"


def _views_note(views: ShownViews, max_side: int, scale: float | None) -> str:
    text = "Each row: render, ground truth"
    if scale is not None:
        text += (
            f", and the error |render - ground truth| averaged over RGB, from 0 (black) to {scale:g} or more "
            "(pale yellow; the 99th percentile of the shown views' pixel errors, rounded up)"
        )
    text += f". Images are shown at most {max_side} px on the long side"
    text += f" ({views.downscaled} of {len(views.views)} views box-filtered down to it)." if views.downscaled else "."
    if views.total > len(views.views):
        text += f" {len(views.views)} of the {views.total} test views are shown, evenly spread; the table lists all."
    return text


def _colour_bar(scale: float) -> str:
    """The error maps' colour scale, as an SVG gradient through the colour map's anchors."""
    stops = "".join(
        f'<stop offset="{i / (len(ANCHORS) - 1):.2f}" stop-color="rgb({r:.0f},{g:.0f},{b:.0f})"/>'
        for i, (r, g, b) in enumerate(ANCHORS)
    )
    return (
        f'<svg class="colour-bar" data-scale="{scale!r}" width="330" height="34" xmlns="http://www.w3.org/2000/svg">'
        f'<defs><linearGradient id="error-colours">{stops}</linearGradient></defs>'
        '<rect x="40" y="4" width="250" height="12" fill="url(#error-colours)"/>'
        '<text x="40" y="30" font-size="11" text-anchor="middle">0</text>'
        f'<text x="290" y="30" font-size="11" text-anchor="middle">{scale:g}</text>'
        '<text x="0" y="14" font-size="11">error</text></svg>'
    )
