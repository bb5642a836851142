"""Per-view metric dicts -> one mean per metric (what ``metrics.json`` reports)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np


def mean_metrics(per_view: Mapping[str, Mapping[str, float | None]]) -> dict[str, float | None]:
    """Mean of each metric over views; ``None`` if any view lacks it (never a partial mean)."""
    names: list[str] = []
    for metrics in per_view.values():
        names.extend(k for k in metrics if k not in names)
    out: dict[str, float | None] = {}
    for name in names:
        values = [m.get(name) for m in per_view.values()]
        out[name] = None if any(v is None for v in values) else float(np.mean(values))
    return out
