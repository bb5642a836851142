"""Densification strategy interface (see docs/architecture.md, "Strategy")."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from ..config import OptionError
from .visibility import Frusta, seen_by_too_few

GSPLAT_DEFAULT_MAX_STEPS = 30_000  # the schedule gsplat's step counts were tuned for
REQUIRED_PARAMS = ("means", "scales", "quats", "opacities")


class Strategy:
    """Grows, prunes and moves Gaussians during training; the base class does nothing.

    Args:
        config: Options; every strategy's ``Config`` extends :class:`Strategy.Config`.
        scene_extent: Scene size; 3D size thresholds are relative to it.
        max_steps: Length of the training run (for ``scale_steps_to_max_steps``).
    """

    @dataclass
    class Config:
        # Multiplies the strategy's refine start/stop/every (and reset_every) step counts, as
        # gsplat's simple_trainer `steps_scaler`.
        steps_scaler: float = 1.0
        # Use steps_scaler = max_steps / 30000, so a short run densifies over the same fraction
        # of training as a full 30k-step run.
        scale_steps_to_max_steps: bool = False
        # At refinements, relocate (MCMC) or prune (DefaultStrategy) the Gaussians whose centre fewer
        # than this many training views have in frame (visibility.py): floaters next to the cameras,
        # which no training view constrains and test views look through. 0 = off.
        min_views: int = 0
        # Steps between two such tests (each projects every Gaussian into every training view: 0.15 s at
        # 200k Gaussians and 49 views on 2 cores); a test runs at the first refinement of each period.
        min_views_every: int = 100

        def __post_init__(self) -> None:
            # Subclasses' Configs call this first, then check their own options.
            if self.min_views < 0:
                raise OptionError("min_views", f"must be >= 0 (0 = off), got {self.min_views}", "strategy")
            if self.min_views_every < 1:
                raise OptionError("min_views_every", f"must be >= 1, got {self.min_views_every}", "strategy")
            if self.scale_steps_to_max_steps and self.steps_scaler != 1.0:
                raise OptionError(
                    "steps_scaler", "set either steps_scaler or scale_steps_to_max_steps, not both", "strategy"
                )
            if not self.steps_scaler > 0:
                raise OptionError("steps_scaler", f"must be > 0, got {self.steps_scaler}", "strategy")

    def __init__(self, config: Config, scene_extent: float = 1.0, max_steps: int = GSPLAT_DEFAULT_MAX_STEPS) -> None:
        self.config = config
        self.scene_extent = float(scene_extent)
        self.max_steps = int(max_steps)
        self.steps_scaler = (
            self.max_steps / GSPLAT_DEFAULT_MAX_STEPS if config.scale_steps_to_max_steps else config.steps_scaler
        )
        # Counts of the last refinement (e.g. {"split": 3}), for logging.
        self.last_stats: dict[str, int] = {}
        # The trainer's renderer, for strategies that render probe passes (error scores); see bind_renderer.
        self.renderer: Any = None
        # The training cameras, for min_views; see bind_cameras.
        self.frusta: Frusta | None = None

    @property
    def renders(self) -> bool:
        """Whether this strategy renders probe passes itself and so needs :meth:`bind_renderer`."""
        return int(getattr(self.config, "error_every", 0)) > 0

    def scores_error(self, step: int) -> bool:
        """Whether ``step``'s views go into the multi-view error scores: every ``error_every``-th
        step from one refinement period before the first refinement to the last (``refine_*`` as
        scaled by the subclass); before that the scores would be zeroed unread."""
        every = int(getattr(self.config, "error_every", 0))
        start, stop = getattr(self, "refine_start_iter", 0), getattr(self, "refine_stop_iter", 0)
        period = getattr(self, "refine_every", 1)
        return every > 0 and step % every == 0 and start - period < step < stop

    def check_error_period(self) -> None:
        """Refuse an ``error_every`` longer than the (scaled) ``refine_every``: some refinements would
        find no scored view. Subclasses call it once their periods are scaled.

        Raises:
            OptionError: naming ``strategy.error_every``.
        """
        every = int(getattr(self.config, "error_every", 0))
        if every > self.refine_every:
            raise OptionError(
                "error_every",
                f"{every} leaves refinements every {self.refine_every} steps without scored views",
                "strategy",
            )

    def bind_renderer(self, renderer: Any) -> None:
        """Give the strategy the trainer's renderer (called once after building).

        Raises:
            ValueError: when the strategy renders probe passes and the renderer cannot.
        """
        if self.renders and not callable(getattr(renderer, "blend_weights", None)):
            raise ValueError(
                f"strategy.error_every needs a renderer with blend_weights(); {type(renderer).__name__} has none"
            )
        self.renderer = renderer

    def bind_cameras(self, cameras: Sequence[Any]) -> None:
        """Give the strategy the training views' cameras (called once after building; kept only when
        ``min_views`` needs them). Without them the ``min_views`` test is off."""
        self.frusta = Frusta.from_cameras(cameras) if self.config.min_views > 0 and cameras else None

    def too_few_views(self, means: Tensor, step: int) -> Tensor | None:
        """``[N]`` bool at a refinement ``step``: Gaussians fewer than ``min_views`` training views have
        in frame; None when the test is off (see :func:`.visibility.seen_by_too_few`) or not due: it
        runs at the refinement whose period (``refine_every``, as scaled) holds a multiple of
        ``min_views_every``, a rule of the step alone, so a resumed run tests where a straight one does."""
        every, period = self.config.min_views_every, getattr(self, "refine_every", 1)
        if self.frusta is None or step // every == (step - period) // every:
            return None
        self.frusta = self.frusta.to(means.device)  # moved once, not copied to a GPU at every test
        return seen_by_too_few(means, self.frusta, self.config.min_views)

    def scaled(self, steps: int, at_least_one: bool = False) -> int:
        """``int(steps * steps_scaler)`` as gsplat; periods are kept >= 1 (a 0 period would divide by zero)."""
        value = int(steps * self.steps_scaler)
        return max(value, 1) if at_least_one else value

    def check(self, model: Any, optimizer: torch.optim.Optimizer) -> None:
        """Verify the optimizer has exactly one group per trainable parameter, named after it
        and holding that very tensor, and that the parameters the strategy edits exist.

        Raises:
            ValueError: naming the mismatch.
        """
        params = model.params
        missing = [k for k in REQUIRED_PARAMS if k not in params]
        if missing:
            raise ValueError(f"{type(self).__name__} needs model parameters {', '.join(missing)}")
        trainable = {k for k, p in params.items() if p.requires_grad}
        names = [g.get("name") for g in optimizer.param_groups]
        if set(names) != trainable or len(names) != len(set(names)):
            raise ValueError(f"optimizer groups {names} must be one per trainable parameter {sorted(trainable)}")
        for group in optimizer.param_groups:
            if len(group["params"]) != 1 or group["params"][0] is not params[group["name"]]:
                raise ValueError(f"optimizer group {group['name']!r} must hold exactly model.params[{group['name']!r}]")

    def step_pre_backward(self, model: Any, optimizer: torch.optim.Optimizer, step: int, render_out: dict) -> None:
        """Called after rendering, before ``loss.backward()``."""

    def step_post_backward(self, model: Any, optimizer: torch.optim.Optimizer, step: int, render_out: dict) -> None:
        """Called after ``loss.backward()`` (and the optimizer step); edits ``model.params`` in place."""

    def extra_loss(self, model: Any, step: int) -> dict[str, Tensor]:
        """Regularisers the trainer adds to the loss (name -> scalar tensor)."""
        return {}

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        pass
