"""Per-view metric dicts -> one mean per metric (what ``metrics.json`` reports)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch


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


def metric_float(value: Any) -> float | None:
    """One metric as a plain float for ``metrics.json`` (``None``: unavailable, e.g. LPIPS without weights)."""
    if value is None:
        return None
    if isinstance(value, torch.Tensor):
        return float(value.detach().item())
    return float(value)
