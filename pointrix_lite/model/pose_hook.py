"""PoseOptHook: refine the training cameras' poses together with the Gaussians (opt-in).

gsplat simple_trainer's ``pose_opt``: every training view gets a learnable SE(3) correction
(:class:`~pointrix_lite.model.pose.PoseCorrection`) with its own Adam, learning rate and weight
decay. Validation and test views keep their poses (they are not trained on; see docs/data.md), and
``metrics.json``'s ``mean`` always scores test views on them (INRIA's protocol). With
``test_align_steps`` > 0 each test view is scored a second time, as nerfstudio's evaluation can,
after fitting its pose to its image with the Gaussians frozen (Gauss-Newton on the rendered image,
:mod:`~pointrix_lite.model.pose_align`, or Adam steps on a correction of its own):
``mean_aligned`` / ``per_view_aligned`` measure the scene apart from how far the refined training
frame drifted from the given poses. Both are reported; neither replaces the other.

It works through the hook sites alone, so the trainer needs no pose-specific code: before each
training step the batch's views are swapped for copies whose ``viewmat`` is the corrected (and
differentiable) matrix; after the step (the loss has been back-propagated into the corrections)
its optimizer steps. Its state (corrections and Adam moments) goes into every checkpoint, so a
resumed run continues exactly.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

import torch

from .. import distributed, progress
from ..config import OptionError
from ..errors import ConfigError
from ..hook import Hook, Priority
from ..metrics.aggregate import mean_metrics, metric_float
from ..registry import HOOKS
from .per_view import check_view_rows, load_per_view_state, per_view_state
from .pose import PoseCorrection, remove_common_motion
from .pose_align import align_pose

# Test-time alignment (see PoseOptHook._aligned_viewmat).
HOME = "hooks.PoseOptHook"  # where a config built in Python says its errors are
ALIGN_MIN_GAIN = 1e-4  # a step "improves" when it lowers the best loss so far by this fraction
ALIGN_PATIENCE = 20  # Adam steps without improvement that end the fit


@HOOKS.register()
class PoseOptHook(Hook):
    """Learnable per-training-view camera pose corrections (see module docstring).

    HIGH priority: its ``after_train_iter`` steps the corrections before CheckPointHook
    (VERY_LOW) saves, so a checkpoint of step ``k`` holds the corrections after step ``k``.
    """

    priority = Priority.HIGH

    @dataclass
    class Config:
        # Adam lr of the corrections (gsplat's pose_opt_lr; grows with sqrt(batch) like the model's). Adam moves
        # each number by about lr per step: 1e-4 over 400 steps turned the demo's cameras by ~2 degrees and
        # cost 2 dB on test views (which keep their poses); 1e-5 stayed within noise of no refinement.
        lr: float = 1e-5
        # false: the training cameras keep their given poses and the hook only fits the test views' poses
        # (test_align_steps), for the aligned second figure. Measured on SfM poses (docs/data.md "Refinement
        # off"): refinement at lr 1e-5 cost 0.9-1.05 dB of the test score on given poses; it raised the aligned
        # one by 1 dB only where SfM's poses were poor.
        refine: bool = True
        weight_decay: float = 1e-6  # pulls the corrections towards the identity (gsplat: pose_opt_reg)
        test_align_steps: int = (
            0  # > 0: fit each test view's pose (Gaussians frozen) before it is scored; at most this many renders
        )
        # gauss_newton: one forward render per iteration, converged in ~5-15 (docs/data.md); adam: the slower
        # first fit (render + backward per step, ~30-60 steps), kept to compare with
        test_align_method: Literal["gauss_newton", "adam"] = "gauss_newton"
        test_align_lr: float = 1e-3  # Adam lr of the fit (test_align_method: adam)
        # mean: after every step take the training cameras' common motion (turn, shift, scale of the whole set)
        # out of the corrections, so that the set cannot drift away from the test cameras' frame; none: Adam's
        # corrections as they are (gsplat)
        gauge: Literal["mean", "none"] = "none"

        def __post_init__(self) -> None:
            if not self.lr > 0.0:
                raise OptionError("lr", f"must be > 0, got {self.lr}", HOME)
            if not self.weight_decay >= 0.0:
                raise OptionError("weight_decay", f"must be >= 0, got {self.weight_decay}", HOME)
            if self.test_align_steps < 0:
                raise OptionError("test_align_steps", f"must be >= 0, got {self.test_align_steps}", HOME)
            if not self.test_align_lr > 0.0:
                raise OptionError("test_align_lr", f"must be > 0, got {self.test_align_lr}", HOME)

    def __init__(self, config: Config | None = None) -> None:
        super().__init__(config or self.Config())
        self.correction: PoseCorrection | None = None
        self.given: torch.Tensor | None = None  # [V, 4, 4] the training views' given poses, row = View.index
        self.optimizer: torch.optim.Adam | None = None
        self.per_view_aligned: dict[str, dict[str, float | None]] = {}  # test views scored on fitted poses

    def before_run(self) -> None:
        if not self.config.refine:
            return
        trainer = self.trainer
        n_views = len(trainer.dataset.train_views)
        self.correction = PoseCorrection(n_views).to(trainer.device)
        if self.config.gauge == "mean":
            views = trainer.dataset.train_views
            check_view_rows("PoseOptHook", "pose correction", n_views, views)
            self.given = torch.eye(4, dtype=torch.float64).repeat(n_views, 1, 1)
            for v in views:
                self.given[v.index] = torch.as_tensor(v.camera.viewmat, dtype=torch.float64).cpu()
        lr = self.config.lr * math.sqrt(trainer.effective_batch_size)
        self.optimizer = torch.optim.Adam(self.correction.parameters(), lr=lr, weight_decay=self.config.weight_decay)

    def before_train_iter(self, batch_idx: int, batch: list) -> None:
        if self.correction is None:
            return
        check_view_rows("PoseOptHook", "pose correction", self.correction.delta.shape[0], batch)
        ids = self.correction.ids([v.index for v in batch])
        viewmats = torch.stack([torch.as_tensor(v.camera.viewmat) for v in batch])
        corrected = self.correction(viewmats, ids)
        # The trainer renders the very list it passed us: replace its items, not the list.
        for i, view in enumerate(batch):
            batch[i] = replace(view, camera=replace(view.camera, viewmat=corrected[i]))

    def after_train_iter(self, batch_idx: int, batch: list) -> None:
        if self.optimizer is None or self.correction is None:
            return
        distributed.all_reduce_gradients(self.correction.parameters())
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        if self.given is not None:
            self._hold_gauge()

    def _hold_gauge(self) -> None:
        """Take the common motion of all training cameras out of the corrections (``gauge: mean``)."""
        assert self.correction is not None and self.given is not None
        with torch.no_grad():
            ids = torch.arange(self.given.shape[0], device=self.correction.delta.device)
            corrected = self.correction.transforms(ids).double().cpu() @ self.given
            fixed = remove_common_motion(corrected, self.given)
            self.correction.set_transforms(fixed @ torch.linalg.inv(self.given))

    def before_test_epoch(self) -> None:
        self.per_view_aligned = {}

    def after_test_iter(self, batch_idx: int, batch: list) -> None:
        """Score the view again on its fitted pose (the trainer has scored it on its given one)."""
        steps = self.config.test_align_steps
        if steps <= 0:
            return
        trainer = self.trainer
        # The trainer has just rendered this one view on its given pose: the fit starts from that render.
        given = trainer.render_out if len(batch) == 1 else None
        for view in batch:
            with progress.phase("test alignment", show=False):  # the test phase's bar advances per view
                viewmat, out = self._aligned_viewmat(trainer, view, steps, given)
            aligned = replace(view, camera=replace(view.camera, viewmat=viewmat))
            with torch.no_grad():
                if out is None:  # the fit kept no render of the pose it returns
                    out = trainer.renderer(trainer.model, [aligned.camera], trainer.dataset.background)
                metrics = trainer.model.get_metric_dict(out, [aligned])
            self.per_view_aligned[view.name] = {k: metric_float(v) for k, v in metrics.items()}

    def after_test_epoch(self, metrics: dict) -> None:
        if self.config.test_align_steps > 0:
            self.trainer.test_report["mean_aligned"] = mean_metrics(self.per_view_aligned)
            self.trainer.test_report["per_view_aligned"] = self.per_view_aligned

    def _aligned_viewmat(
        self, trainer: Any, view: Any, steps: int, given_render: Mapping[str, Any] | None = None
    ) -> tuple[torch.Tensor, Mapping[str, Any] | None]:
        """[4, 4] pose of test ``view`` that best explains its image under the frozen model, and its
        render where the fit kept one (Gauss-Newton; ``given_render``, the render of the given pose,
        saves it one render).

        Either way the fit returns the best pose it evaluated, the given one included, so the fitted
        pose never explains the image worse than the given one (squared error for Gauss-Newton, L1
        for Adam), and it runs at full size: a downscaled first stage was measured to pull the pose
        towards a biased optimum (docs/data.md).
        """
        if self.config.test_align_method == "adam":
            return self._adam_aligned_viewmat(trainer, view, steps), None
        camera = view.camera
        mask = view.mask_on(trainer.device)

        def checked(out: Mapping[str, Any]) -> Mapping[str, Any]:
            if "depth" not in out or "alpha" not in out:
                raise ConfigError(
                    f"{HOME}.test_align_method: gauss_newton needs the renderer's 'depth' and 'alpha' outputs, "
                    f"{type(trainer.renderer).__name__} gives {sorted(out)}; use test_align_method: adam"
                )
            return out

        def render(viewmat: torch.Tensor) -> Mapping[str, Any]:
            return checked(
                trainer.renderer(trainer.model, [replace(camera, viewmat=viewmat)], trainer.dataset.background)
            )

        with torch.no_grad():
            fit = align_pose(
                render,
                torch.as_tensor(camera.viewmat),
                torch.as_tensor(camera.K),
                view.float_image(trainer.device),
                steps,
                mask=None if mask is None else mask[..., None].float(),
                min_gain=ALIGN_MIN_GAIN,
                given_render=None if given_render is None else checked(given_render),
            )
        return fit.viewmat, fit.render_out

    def _adam_aligned_viewmat(self, trainer: Any, view: Any, steps: int) -> torch.Tensor:
        """Adam on an SE(3) correction (L1), stopped once the L1 has not fallen by
        :data:`ALIGN_MIN_GAIN` (relative) for :data:`ALIGN_PATIENCE` steps (32-63 of 100 steps on the
        photo scene, docs/data.md)."""
        correction = PoseCorrection(1).to(trainer.device)
        optimizer = torch.optim.Adam(correction.parameters(), lr=self.config.test_align_lr)
        viewmat = torch.as_tensor(view.camera.viewmat)[None]
        ids = torch.zeros(1, dtype=torch.long, device=trainer.device)
        target = view.float_image(trainer.device)
        best, best_delta, stalled = float("inf"), correction.delta.detach().clone(), 0
        with torch.enable_grad():  # the trainer evaluates under no_grad
            for _ in range(steps):
                camera = replace(view.camera, viewmat=correction(viewmat, ids)[0])
                rgb = trainer.renderer(trainer.model, [camera], trainer.dataset.background)["rgb"][0]
                loss = (rgb - target).abs().mean()
                value = float(loss.detach())
                if value < best:  # the pose just rendered, before this step moves it
                    stalled = stalled + 1 if value >= best * (1.0 - ALIGN_MIN_GAIN) else 0
                    best, best_delta = value, correction.delta.detach().clone()
                else:
                    stalled += 1
                if stalled >= ALIGN_PATIENCE:
                    break
                # Gradients for the correction only: the model's .grad must stay untouched.
                (correction.delta.grad,) = torch.autograd.grad(loss, [correction.delta])
                optimizer.step()
        with torch.no_grad():
            correction.delta.copy_(best_delta)
            return correction(viewmat, ids)[0]

    def state_dict(self) -> dict[str, Any]:
        if self.correction is None or self.optimizer is None:
            return {}
        return per_view_state(self.correction.delta, self.optimizer)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state and not self.config.refine:
            # Dropping them would render the training views on other poses than the run was trained on.
            raise ConfigError(
                f"the checkpoint holds pose corrections, but {HOME}.refine is false; resume with refine: true"
            )
        if not state or self.correction is None or self.optimizer is None:
            return
        load_per_view_state("PoseOptHook", "pose corrections", self.correction.delta, self.optimizer, state)
