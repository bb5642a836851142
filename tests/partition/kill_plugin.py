"""``--plugin`` for the block tests: SIGKILL one block's training after a step, once (a node lost mid-run)."""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass

from pointrix_lite.engine.hooks import Hook
from pointrix_lite.registry import HOOKS


@HOOKS.register()
class KillBlockHook(Hook):
    @dataclass
    class Config:
        block: str = ""  # the run whose exp_dir has this name dies; the others train on
        step: int = 1
        once_file: str = ""  # fire only while this file is missing (created on firing)

    def after_train_iter(self, batch_idx, batch):
        cfg = self.config
        if (
            self.trainer.exp_dir.name == cfg.block
            and self.trainer.global_step == cfg.step
            and not os.path.exists(cfg.once_file)
        ):
            open(cfg.once_file, "w").close()
            os.kill(os.getpid(), signal.SIGKILL)  # no checkpoint, no cleanup: what a lost node leaves
