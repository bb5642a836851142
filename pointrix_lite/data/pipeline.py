"""Seeded, resumable batching of training views.

Order: epoch ``e`` visits the training views in ``torch.randperm(n)`` drawn from a generator seeded with
``seed + e``, so any epoch's order can be recomputed from scratch -- resuming needs only
``(epoch, position)``, not a saved RNG state.

Batches: every step consumes one *global* batch of ``batch_size * world_size`` views; rank ``r`` takes
the slice ``[r * batch_size, (r + 1) * batch_size)``, so ranks never share a view within a step.
The last global batch of an epoch is **wrapped**: it is filled up with views from the start of the same
epoch's order, so every step has a full batch and every view is seen at least once per epoch
(``num_batches_per_epoch = ceil(n / (batch_size * world_size))``).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import torch

from ..errors import CheckpointError
from .cameras import View


class DataPipeline:
    """Yields lists of training :class:`View` in a seeded shuffled order, one pass per epoch.

    Args:
        dataset: Anything with ``train_views`` (a registered dataset).
        batch_size: Views per step on this rank.
        seed: Base seed; epoch ``e`` uses ``seed + e``.
        rank, world_size: This process's slice of every global batch.
    """

    def __init__(self, dataset: Any, batch_size: int = 1, seed: int = 0, rank: int = 0, world_size: int = 1) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if world_size < 1 or not 0 <= rank < world_size:
            raise ValueError(f"need 0 <= rank < world_size, got rank={rank}, world_size={world_size}")
        self.views: list[View] = list(dataset.train_views)
        if not self.views:
            raise ValueError("DataPipeline needs at least one training view")
        self.batch_size, self.seed, self.rank, self.world_size = batch_size, seed, rank, world_size
        self.epoch = 0  # the epoch the next batch comes from
        self.position = 0  # batches of that epoch already handed out

    @property
    def num_batches_per_epoch(self) -> int:
        return math.ceil(len(self.views) / (self.batch_size * self.world_size))

    def __len__(self) -> int:
        return self.num_batches_per_epoch

    def order(self, epoch: int) -> list[int]:
        """Indices into the training views in the order epoch ``epoch`` visits them."""
        g = torch.Generator().manual_seed(self.seed + epoch)
        return torch.randperm(len(self.views), generator=g).tolist()

    def batches_for_epoch(self, epoch: int) -> Iterator[list[View]]:
        """Yield this rank's batches of ``epoch``.

        If ``epoch`` is the pipeline's current epoch (e.g. after :meth:`load_state_dict`), batches already
        handed out are skipped. The state advances *before* each batch is yielded, so a checkpoint taken
        while a batch is being trained on resumes with the next one.
        """
        order, n, per_step = self.order(epoch), len(self.views), self.batch_size * self.world_size
        start = self.position if epoch == self.epoch else 0
        lo = self.rank * self.batch_size
        for b in range(start, self.num_batches_per_epoch):
            ids = [order[(b * per_step + j) % n] for j in range(lo, lo + self.batch_size)]
            last = b + 1 == self.num_batches_per_epoch
            self.epoch, self.position = (epoch + 1, 0) if last else (epoch, b + 1)
            yield [self.views[i] for i in ids]

    def __iter__(self) -> Iterator[list[View]]:
        """Endless batches, continuing from the current state across epochs."""
        while True:
            yield from self.batches_for_epoch(self.epoch)

    def state_dict(self) -> dict[str, int]:
        return {"epoch": self.epoch, "position": self.position, "seed": self.seed, "num_views": len(self.views)}

    def load_state_dict(self, state: dict[str, int]) -> None:
        if int(state.get("num_views", len(self.views))) != len(self.views):
            raise CheckpointError(
                f"data_pipeline: checkpoint was taken with {state['num_views']} training views, "
                f"the dataset now has {len(self.views)}"
            )
        if not 0 <= int(state["position"]) < self.num_batches_per_epoch:
            raise CheckpointError(f"data_pipeline.position: {state['position']} is out of range")
        self.epoch, self.position = int(state["epoch"]), int(state["position"])
        self.seed = int(state.get("seed", self.seed))
