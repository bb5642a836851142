"""Fault injection for the reliability tests, loaded with ``--plugin`` (or ``load_plugin`` in-process).

Faults are hooks chosen from the YAML, so a subprocess running the real ``scripts/train.py`` gets
exactly the fault a test asks for and nothing else:

- ``SigintAtHook``: the process sends itself a real SIGINT after step ``step``, in the export
  or after a test view (a user's Ctrl-C, at a reproducible place).
- ``CorruptParamHook``: before step ``step`` runs, fills ``count`` rows of a parameter with NaN
  (``count: 0`` = every row) -- a diverging optimizer, at a reproducible step.
- ``DiskFaultHook``: from construction on (before the CLI's free-space check), pretends the disk
  has ``free_bytes`` free, makes the ``enospc_on_save``-th ``torch.save`` fail with ENOSPC after
  writing part of the file, and/or slows every ``torch.save`` down to ``chunk_delay`` seconds per
  4 KiB written (creating the file ``writing_marker`` while the ``slow_from_save``-th save is half
  written), so a test can SIGKILL the process in the middle of a save.
"""

from __future__ import annotations

import errno
import os
import shutil
import signal
import time
from dataclasses import dataclass

import torch

from pointrix_lite.engine.hooks import Hook
from pointrix_lite.registry import HOOKS


@HOOKS.register()
class SigintAtHook(Hook):
    @dataclass
    class Config:
        step: int = 1
        # "after_train_iter" (after step ``step``), "after_train" (the export phase: with
        # ``priority`` between PlyExportHook's and CheckPointHook's, after the PLY and before the
        # last checkpoint) or "after_test_iter" (after test view ``view``, 0-based)
        site: str = "after_train_iter"
        view: int = 0
        once_file: str | None = None  # fire only while this file is missing (created on firing)

    def _fire(self) -> None:
        if self.config.once_file is not None:
            if os.path.exists(self.config.once_file):
                return
            open(self.config.once_file, "w").close()
        os.kill(os.getpid(), signal.SIGINT)

    def after_train_iter(self, batch_idx, batch):
        if self.config.site == "after_train_iter" and self.trainer.global_step == self.config.step:
            self._fire()

    def after_train(self):
        if self.config.site == "after_train":
            self._fire()

    def after_test_iter(self, batch_idx, batch):
        if self.config.site == "after_test_iter" and batch_idx == self.config.view:
            self._fire()


@HOOKS.register()
class CorruptParamHook(Hook):
    @dataclass
    class Config:
        step: int = 1  # 1-based number of the first step that sees the corrupted parameter
        param: str = "sh0"
        count: int = 0  # rows set to NaN; 0 = all

    def before_train_iter(self, batch_idx, batch):
        if self.trainer.global_step + 1 == self.config.step:
            with torch.no_grad():
                p = self.trainer.model.params[self.config.param]
                p[: self.config.count or p.shape[0]] = float("nan")


class _SlowFile:
    """Forwards writes to ``f`` in 4 KiB pieces with a pause after each (a slow network disk)."""

    def __init__(self, f, delay: float, marker: str | None) -> None:
        self.f, self.delay, self.marker, self.written = f, delay, marker, 0

    def write(self, data) -> int:
        view = memoryview(data).cast("B")
        for i in range(0, len(view), 4096):
            self.written += self.f.write(view[i : i + 4096])
            if self.marker and self.written > 8192:
                open(self.marker, "w").close()  # we are well inside the file now
                self.marker = None
            time.sleep(self.delay)
        return len(view)

    def flush(self) -> None:
        self.f.flush()


@HOOKS.register()
class DiskFaultHook(Hook):
    @dataclass
    class Config:
        free_bytes: int | None = None  # what shutil.disk_usage reports as free
        enospc_on_save: int = 0  # this torch.save call (1-based) fails with ENOSPC; 0 = never
        chunk_delay: float = 0.0  # seconds slept per 4 KiB written by torch.save
        slow_from_save: int = 1  # saves before this one are written at full speed
        writing_marker: str | None = None  # created while that save is half written

    def __init__(self, config: Config) -> None:
        super().__init__(config)
        cfg, real_save, real_usage = config, torch.save, shutil.disk_usage
        calls = [0]

        def save(obj, f, *args, **kwargs):
            calls[0] += 1
            if calls[0] == cfg.enospc_on_save:
                f.write(b"PK\x03\x04 partial data")  # a real full disk fails mid-file
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            if cfg.chunk_delay > 0 and calls[0] >= cfg.slow_from_save:
                marker = cfg.writing_marker if calls[0] == cfg.slow_from_save else None
                f = _SlowFile(f, cfg.chunk_delay, marker)
            return real_save(obj, f, *args, **kwargs)

        def disk_usage(path):
            usage = real_usage(path)
            return usage._replace(free=cfg.free_bytes) if cfg.free_bytes is not None else usage

        torch.save, shutil.disk_usage = save, disk_usage
