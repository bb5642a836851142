"""AppearanceOptHook: learn each training photo's colour response together with the Gaussians (opt-in).

Every training view gets a learnable colour transform
(:class:`~pointrix_lite.model.appearance.AppearanceCorrection`: per-channel gain and bias, a 3x3
affine map, or a bilateral grid of them) with its own Adam, learning rate and a weight decay towards
the identity. The loss compares ``transform(render)`` with the photo, so exposure and white-balance
differences between photos go into the transforms instead of into the Gaussians' colours (or into
floaters that explain one photo's tint). The transformed render is clipped to [0, 1] as the photo
was (under the model's ``bound_clipped`` its loss bounds it where the photo clipped instead), and the
transforms are centred after each step (their average is the identity), which fixes the one thing
the photos cannot: the common level. The model itself keeps the canonical colours: validation and
test views, ``scripts/render.py``, the viewer and every export render it untransformed.

Like PoseOptHook it works through the hook sites alone: before each training step the batch's
views are swapped for copies whose ``color_transform`` applies their view's transform (the
model's loss applies it, see ``GaussianModel._targets``); after the step its optimizer steps. Its
state (transforms and Adam moments) goes into every checkpoint, so a resumed run continues exactly.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace
from typing import Any, Literal

import torch
from torch import Tensor

from .. import device_policy, distributed
from ..config import OptionError
from ..errors import CheckpointError, ConfigError
from ..hook import Hook, Priority
from ..metrics.aggregate import mean_metrics
from ..metrics.psnr import psnr
from ..registry import HOOKS
from .appearance import BILAGRID, MODES, AppearanceCorrection, fit_transform
from .loss import bounds_clipped
from .per_view import check_view_rows, load_per_view_state, per_view_state

HOME = "hooks.AppearanceOptHook"  # where a config built in Python says its errors are


@HOOKS.register()
class AppearanceOptHook(Hook):
    """Learnable per-training-view colour transforms (see module docstring).

    HIGH priority: its ``after_train_iter`` steps the transforms before CheckPointHook (VERY_LOW)
    saves, so a checkpoint of step ``k`` holds the transforms after step ``k``.
    """

    priority = Priority.HIGH

    @dataclass
    class Config:
        # 3 gains + 3 biases a view, a 3x3 matrix + bias, or such a map per cell of a bilateral grid
        mode: Literal["gain_bias", "affine", "bilagrid"] = "gain_bias"
        # Adam lr of the transforms (grows with sqrt(batch) like the model's). Each view's row gets a
        # gradient only in the steps that show it (1 in 42 on the demo): 1e-3 recovered about half of
        # a photo's gain in the demo's 2000 steps, 1e-2 most of it (docs/model.md).
        lr: float = 1e-2
        # The lr decays exponentially to lr * lr_final at max_steps: a photo's gain is found early,
        # while Adam's steps of ~lr on views seen once in ~40 steps keep the transforms jittering by
        # about lr; on clean photos that jitter is what the model pays for (docs/model.md).
        lr_final: float = 0.01
        weight_decay: float = 1e-4  # pulls the transforms towards the identity (zero log-gain and bias)
        start_step: int = 0  # steps before this one train the Gaussians alone (transforms held at identity)
        # Clip the transformed render to [0, 1] as the photo's 8-bit encoding clipped the photo: a gain
        # above 1 turns a white background into 1.0, not 1.3, so the background does not argue against it.
        # With model.bound_clipped the model's loss does this where the photo clipped only, and the hook
        # leaves the render unclipped (a clamp everywhere would stop a render above 1 coming back down).
        clip: bool = True
        # Hold the mean over views of every transform number at 0 after each step (the average
        # transform is the identity): the photos fix only ratios between their colours, and with
        # `clip` even a white background stops fixing gains above 1, so without this the gains can
        # drift up together while the Gaussians darken (demo, clean images: see docs/model.md).
        center: bool = True
        # bilagrid: weight of the total variation of the batch's grids, added to the transforms' loss
        # (gsplat's bilateral-grid example uses 10): without it a cell that few pixels reach follows them.
        tv_weight: float = 10.0
        # bilagrid: luminance bins, rows and columns of a view's grid (gsplat's example: 8, 16, 16). A
        # coarser grid has fewer numbers for the ~40 times a view is seen in a short run to pin down.
        grid: tuple[int, int, int] = BILAGRID
        # Also a radial falloff per view, 1 + k1 r^2 + k2 r^4, 1 at the image centre (lens vignetting; not
        # centred over the views: the centre fixes it). The colour maps, centred, cannot take it out.
        vignetting: bool = False
        # Adam lr of the falloffs (times sqrt(batch), decaying as `lr`): a view's two numbers move by
        # about lr each of the ~40 times a short run shows it, and a corner darkened to 0.7 needs 0.3.
        vignetting_lr: float = 0.1

        def __post_init__(self) -> None:
            if self.mode not in MODES:
                raise OptionError("mode", f"must be one of {', '.join(MODES)}, got {self.mode!r}", HOME)
            if not self.lr > 0.0:
                raise OptionError("lr", f"must be > 0, got {self.lr}", HOME)
            if not 0.0 < self.lr_final <= 1.0:
                raise OptionError("lr_final", f"must be in (0, 1], got {self.lr_final}", HOME)
            if not self.weight_decay >= 0.0:
                raise OptionError("weight_decay", f"must be >= 0, got {self.weight_decay}", HOME)
            if self.start_step < 0:
                raise OptionError("start_step", f"must be >= 0, got {self.start_step}", HOME)
            if not self.tv_weight >= 0.0:
                raise OptionError("tv_weight", f"must be >= 0, got {self.tv_weight}", HOME)
            if not self.vignetting_lr > 0.0:
                raise OptionError("vignetting_lr", f"must be > 0, got {self.vignetting_lr}", HOME)
            if min(self.grid) < 2:
                raise OptionError(
                    "grid", f"needs >= 2 cells on each axis (bins, rows, columns), got {list(self.grid)}", HOME
                )

    def __init__(self, config: Config | None = None) -> None:
        super().__init__(config or self.Config())
        self.correction: AppearanceCorrection | None = None
        self.optimizer: torch.optim.Adam | None = None
        self.base_lr = 0.0  # lr at step 0 (config lr x sqrt(batch)), set in before_run
        self._attached = False  # this step's batch carries our transforms
        self.per_view_half: dict[str, dict[str, float]] = {}
        self._clamp = self.config.clip  # set in before_run: the model's loss may bound clipped pixels itself

    def before_run(self) -> None:
        trainer = self.trainer
        self._clamp = self.config.clip and not bounds_clipped(trainer.model)
        n_views = len(trainer.dataset.train_views)
        cfg = self.config
        self.correction = AppearanceCorrection(n_views, cfg.mode, cfg.grid, cfg.vignetting).to(trainer.device)
        self.base_lr = self.config.lr * math.sqrt(trainer.effective_batch_size)
        # Fused where the model's Adam is (device_policy): a bilateral grid is 1.2M numbers for 49 views,
        # which the default per-op loop takes ~10x longer to step than the rest of the hook costs.
        groups = [{"params": [self.correction.delta], "lr": self.base_lr}]
        if self.correction.falloff is not None:
            groups.append({"params": [self.correction.falloff], "lr": self._falloff_lr(1.0)})
        self.optimizer = torch.optim.Adam(
            groups,
            lr=self.base_lr,
            weight_decay=self.config.weight_decay,
            fused=device_policy.fused_adam([trainer.device]),
        )

    def _falloff_lr(self, decay: float) -> float:
        return self.config.vignetting_lr * self.base_lr / self.config.lr * decay

    def before_train_iter(self, batch_idx: int, batch: list) -> None:
        self._attached = False
        if self.correction is None or self.trainer.global_step < self.config.start_step:
            return
        check_view_rows("AppearanceOptHook", "colour transform", self.correction.delta.shape[0], batch)
        # The trainer hands the very list it passed us to the model's loss: replace its items, not the list.
        for i, view in enumerate(batch):
            batch[i] = replace(view, color_transform=functools.partial(self._transform, index=view.index))
        self._attached = True

    def _transform(self, rgb: torch.Tensor, index: int) -> torch.Tensor:
        assert self.correction is not None
        out = self.correction.apply_one(rgb, index)
        return out.clamp(0.0, 1.0) if self._clamp else out

    def after_train_iter(self, batch_idx: int, batch: list) -> None:
        if not self._attached or self.optimizer is None or self.correction is None:
            return
        if self.correction.delta.grad is None:  # else the transforms would silently stay at the identity
            raise ConfigError(
                f"AppearanceOptHook: model {type(self.trainer.model).__name__}'s loss ignores View.color_transform "
                "(see docs/model.md, per-image appearance); remove the hook or apply the transform in get_loss_dict"
            )
        if self.config.mode == "bilagrid" and self.config.tv_weight > 0.0:
            # The batch's grids only: each grid is held smooth in the steps that train it (over a run,
            # the same sum as every grid every step, /V), and the other 48 of 49 grids cost nothing.
            ids = self.correction.ids([view.index for view in batch])
            (self.config.tv_weight * self.correction.total_variation(ids)).backward()
        distributed.all_reduce_gradients(self.correction.parameters())
        # from the step alone, so a resumed run has the same lr as an uninterrupted one
        t = self.trainer.global_step / max(self.trainer.cfg.trainer.max_steps, 1)
        decay = self.config.lr_final ** min(t, 1.0)
        self.optimizer.param_groups[0]["lr"] = self.base_lr * decay
        if len(self.optimizer.param_groups) > 1:
            self.optimizer.param_groups[1]["lr"] = self._falloff_lr(decay)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        if self.config.center:
            # The gauge, as a projection after the step rather than a centred parametrisation: the
            # latter hands every view -grad/V each step, which Adam's per-number normalisation would
            # scale up towards lr-sized steps for the views not in the batch.
            with torch.no_grad():
                self.correction.delta.sub_(self.correction.delta.mean(0, keepdim=True))

    @property
    def fit_mode(self) -> str:
        """The transform NeRF-W's protocol fits on a test view's left half: the hook's own, but an
        affine map for ``bilagrid`` (a grid fitted on one half would extrapolate into the other)."""
        return "affine" if self.config.mode == "bilagrid" else self.config.mode

    def before_test_epoch(self) -> None:
        self.per_view_half = {}

    def after_test_iter(self, batch_idx: int, batch: list) -> None:
        """NeRF-W's protocol on the view the trainer has just rendered (module docstring)."""
        rgb = self.trainer.render_out["rgb"]
        for view, render in zip(batch, rgb):
            self.per_view_half[view.name] = {
                "psnr": half_fitted_psnr(render, view.float_image(render.device), self.fit_mode, self.config.clip)
            }

    def after_test_epoch(self, metrics: dict) -> None:
        if self.per_view_half:
            self.trainer.test_report["mean_half_fitted"] = mean_metrics(self.per_view_half)
            self.trainer.test_report["per_view_half_fitted"] = self.per_view_half

    def state_dict(self) -> dict[str, Any]:
        if self.correction is None or self.optimizer is None:
            return {}
        falloff = self.correction.falloff
        return {
            "mode": self.correction.mode,
            "grid": list(self.correction.grid),
            "falloff": None if falloff is None else falloff.detach().clone(),
            **per_view_state(self.correction.delta, self.optimizer),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if not state or self.correction is None or self.optimizer is None:
            return
        mode = state["mode"]
        if mode != self.correction.mode:
            raise CheckpointError(
                f"AppearanceOptHook: checkpoint has mode {mode!r} transforms, this config has mode {self.correction.mode!r}"
            )
        grid = tuple(state.get("grid", BILAGRID))  # checkpoints before the option had the default grid
        if mode == "bilagrid" and grid != self.correction.grid:
            raise CheckpointError(
                f"AppearanceOptHook: checkpoint has {list(grid)} bilateral grids, this config has grid: {list(self.correction.grid)}"
            )
        falloff, saved = self.correction.falloff, state.get("falloff")
        if (falloff is None) != (saved is None):
            raise CheckpointError(
                f"AppearanceOptHook: checkpoint has vignetting {'on' if saved is not None else 'off'}, this config has "
                f"vignetting: {'true' if falloff is not None else 'false'}"
            )
        load_per_view_state("AppearanceOptHook", "colour transforms", self.correction.delta, self.optimizer, state)
        if falloff is not None:
            with torch.no_grad():
                falloff.copy_(saved)


def half_fitted_psnr(render: Tensor, photo: Tensor, mode: str = "gain_bias", clip: bool = True) -> float:
    """PSNR on the right half of ``photo [H, W, 3]`` of ``render [H, W, 3]`` under the ``mode`` transform
    fitted on the left half (columns ``< W // 2``)."""
    half = render.shape[1] // 2
    left, right = render[:, :half].reshape(-1, 3), render[:, half:]
    M, b = fit_transform(left.detach(), photo[:, :half].reshape(-1, 3), mode)
    out = (right.double() @ M.T + b).to(render.dtype)
    return float(psnr(out.clamp(0.0, 1.0) if clip else out, photo[:, half:]))
