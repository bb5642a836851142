"""Test plugin (``--plugin``) loaded by every rank of the torchrun tests.

``RankProbeHook`` writes, on *every* rank, one JSON line per training step to
``<exp_dir>/probe/rank<k>.jsonl``: the step, the number of Gaussians, a SHA-256 of all parameters
(equal exactly when the ranks hold bitwise-identical Gaussians), the loss the trainer logged and
the strategy's densification counts. At the end it saves the parameters to
``probe/final_rank<k>.pt``. It can also raise on one rank to test failure propagation.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch

from pointrix_lite.distributed import params_checksum
from pointrix_lite.hook import Hook
from pointrix_lite.registry import HOOKS


@HOOKS.register()
class RankProbeHook(Hook):
    @dataclass
    class Config:
        fail_rank: int = -1  # raise on this rank ...
        fail_step: int = -1  # ... after this step (1-based); -1: never

    def _dir(self) -> Path:
        out = Path(self.trainer.exp_dir) / "probe"
        out.mkdir(parents=True, exist_ok=True)
        return out

    def after_train_iter(self, batch_idx: int, batch: list) -> None:
        t = self.trainer
        record = {
            "step": t.global_step,
            "rank": t.rank,
            "world_size": t.world_size,
            "views": [v.name for v in batch],
            "n": t.model.num_gaussians,
            "sha": params_checksum(dict(t.model.params)),
            "loss": float(t.loss_dict["loss"]),
            "densify": dict(getattr(t.strategy, "last_stats", {}) or {}),
        }
        with open(self._dir() / f"rank{t.rank}.jsonl", "a") as f:
            f.write(json.dumps(record) + "\n")
        if t.rank == self.config.fail_rank and t.global_step == self.config.fail_step:
            raise RuntimeError(f"probe failure injected at step {t.global_step}")

    def after_train(self) -> None:
        t = self.trainer
        params = {k: v.detach().cpu().clone() for k, v in t.model.params.items()}
        torch.save(params, self._dir() / f"final_rank{t.rank}.pt")
