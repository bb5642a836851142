"""Line charts as inline SVG: no script, no font or style sheet from outside the page.

Each series is one ``<polyline data-series=NAME>`` whose points map (x, y) affinely onto the plot
box (y up), plus a dot per point when there are few (a single test PSNR is a dot, not a line).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape

WIDTH, HEIGHT = 440, 250
LEFT, RIGHT, TOP, BOTTOM = 58, 12, 26, 40  # margins around the plot box: tick labels and axis titles
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b")
CHAR_WIDTH = 6.2  # px per character of the 11 px legend, to lay legend entries side by side
DOTS_UP_TO = 40  # points per series drawn as dots too


@dataclass
class Series:
    name: str
    xs: list[float]
    ys: list[float]


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """About ``count`` round values (1, 2 or 5 times a power of ten apart) covering [low, high]."""
    if not high > low:
        return [low]
    raw = (high - low) / max(count - 1, 1)
    power = 10.0 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    first = math.floor(low / step + 1e-9) * step
    ticks = [first]
    while ticks[-1] < high - 1e-9 * step and len(ticks) <= 2 * count + 2:  # bounded: float steps may stall
        ticks.append(first + len(ticks) * step)
    return ticks


def _label(value: float, step: float) -> str:
    decimals = max(0, -math.floor(math.log10(step))) if step > 0 else 0
    return f"{value:.{decimals}f}" if abs(value) < 1e6 else f"{value:.3g}"


def _span(values: list[float]) -> tuple[float, float]:
    low, high = min(values), max(values)
    # One value (or equal ones up to float noise, whose ticks would not advance): a band around it.
    if high - low <= 1e-9 * max(abs(low), abs(high)):
        pad = abs(low) * 0.05 or 1.0
        return low - pad, high + pad
    return low, high


def line_chart(series: list[Series], title: str, x_label: str, y_label: str) -> str:
    """An ``<svg>`` element plotting ``series`` (each at least one point) on shared, ticked axes."""
    xs = [x for s in series for x in s.xs]
    ys = [y for s in series for y in s.ys]
    x_ticks, y_ticks = nice_ticks(*_span(xs)), nice_ticks(*_span(ys))
    x0, x1 = min(x_ticks[0], *xs), max(x_ticks[-1], *xs)
    y0, y1 = min(y_ticks[0], *ys), max(y_ticks[-1], *ys)
    x0, x1 = (x0, x1) if x1 > x0 else (x0 - 1, x1 + 1)
    y0, y1 = (y0, y1) if y1 > y0 else (y0 - 1, y1 + 1)
    box_w, box_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def px(x: float) -> float:
        return LEFT + (x - x0) / (x1 - x0) * box_w

    def py(y: float) -> float:
        return TOP + (y1 - y) / (y1 - y0) * box_h

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{escape(title)}">',
        f'<text x="{LEFT}" y="16" class="title">{escape(title)}</text>',
        f'<rect x="{LEFT}" y="{TOP}" width="{box_w}" height="{box_h}" class="box"/>',
    ]
    x_step = x_ticks[1] - x_ticks[0] if len(x_ticks) > 1 else 0.0
    y_step = y_ticks[1] - y_ticks[0] if len(y_ticks) > 1 else 0.0
    for t in x_ticks:
        if x0 <= t <= x1:
            parts.append(f'<line x1="{px(t):.1f}" x2="{px(t):.1f}" y1="{TOP}" y2="{TOP + box_h}" class="grid"/>')
            parts.append(
                f'<text x="{px(t):.1f}" y="{TOP + box_h + 14}" class="tick" '
                f'text-anchor="middle">{_label(t, x_step)}</text>'
            )
    for t in y_ticks:
        if y0 <= t <= y1:
            parts.append(f'<line x1="{LEFT}" x2="{LEFT + box_w}" y1="{py(t):.1f}" y2="{py(t):.1f}" class="grid"/>')
            parts.append(
                f'<text x="{LEFT - 5}" y="{py(t) + 4:.1f}" class="tick" text-anchor="end">{_label(t, y_step)}</text>'
            )
    parts.append(
        f'<text x="{LEFT + box_w / 2:.1f}" y="{HEIGHT - 6}" class="axis" text-anchor="middle">{escape(x_label)}</text>'
    )
    parts.append(
        f'<text x="14" y="{TOP + box_h / 2:.1f}" class="axis" text-anchor="middle" '
        f'transform="rotate(-90 14 {TOP + box_h / 2:.1f})">{escape(y_label)}</text>'
    )
    for i, s in enumerate(series):
        colour = PALETTE[i % len(PALETTE)]
        points = " ".join(f"{px(x):.2f},{py(y):.2f}" for x, y in zip(s.xs, s.ys))
        parts.append(
            f'<polyline data-series="{escape(s.name)}" points="{points}" fill="none" '
            f'stroke="{colour}" stroke-width="1.5"/>'
        )
        if len(s.xs) <= DOTS_UP_TO:
            parts += [
                f'<circle cx="{px(x):.2f}" cy="{py(y):.2f}" r="2.5" fill="{colour}"/>' for x, y in zip(s.xs, s.ys)
            ]
    # The legend sits in the top margin, right-aligned, so it never covers a curve.
    right = WIDTH - RIGHT
    for i, s in reversed(list(enumerate(series))):
        parts.append(
            f'<text x="{right}" y="16" class="legend" text-anchor="end" '
            f'fill="{PALETTE[i % len(PALETTE)]}">{escape(s.name)}</text>'
        )
        right -= CHAR_WIDTH * len(s.name) + 12
    parts.append("</svg>")
    return "\n".join(parts)
