"""What the hooks that learn one row of numbers per training view share (PoseOptHook, AppearanceOptHook)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from ..errors import CheckpointError, DataError


def check_view_rows(hook: str, what: str, n_rows: int, batch: list) -> None:
    """Raise :class:`DataError` when a batch view's ``index`` has no row among ``n_rows``."""
    bad = [v.name for v in batch if not 0 <= v.index < n_rows]
    if bad:
        raise DataError(f"{hook}: training view(s) {', '.join(bad)} have no {what} (only {n_rows} views)")


def per_view_state(delta: torch.Tensor, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    """Checkpoint state of a ``[views, k]`` parameter and its own optimizer."""
    return {"delta": delta.detach().clone(), "optimizer": optimizer.state_dict()}


def load_per_view_state(
    hook: str, what: str, delta: torch.Tensor, optimizer: torch.optim.Optimizer, state: dict
) -> None:
    """Restore :func:`per_view_state`; a checkpoint from another number of views is a :class:`CheckpointError`."""
    saved = state["delta"]
    if tuple(saved.shape) != tuple(delta.shape):
        raise CheckpointError(
            f"{hook}: checkpoint has {what} for {saved.shape[0]} views, this dataset has {delta.shape[0]} training views"
        )
    with torch.no_grad():
        delta.copy_(saved)
    optimizer.load_state_dict(state["optimizer"])


def index_rows(view_index: torch.Tensor, indices: Sequence[int]) -> torch.Tensor:
    """``[C]`` view indices as slices of ``view_index`` (``arange(V)`` kept where the per-view rows are).

    A ``torch.tensor(indices, device=cuda)`` per step is a blocking copy from pageable memory: the CPU
    waits for the GPU's queue to drain (docs/rasterizer.md, "Third run on a GPU"); a slice of a tensor
    already there, or one ``cat`` of slices, queues like any other kernel."""
    if len(indices) == 1:
        return view_index[indices[0] : indices[0] + 1]
    return torch.cat([view_index[i : i + 1] for i in indices])
