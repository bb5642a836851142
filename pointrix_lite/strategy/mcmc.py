"""3D Gaussian Splatting as Markov Chain Monte Carlo (gsplat 1.5.3 ``MCMCStrategy``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from ..config import OptionError, at_least
from ..model.optimizer import group_by_name
from ..registry import STRATEGIES
from .base import GSPLAT_DEFAULT_MAX_STEPS, Strategy
from .error_scores import ERROR_KEYS, ErrorScoreOptions, accumulate_error_scores, normalised
from .ops import binomial_table, inject_noise_to_position, relocate, sample_add


@STRATEGIES.register()
class MCMCStrategy(Strategy):
    """Relocate dead Gaussians onto live ones, grow the count by ``growth_rate`` per refinement
    up to ``cap_max``, and perturb positions with opacity-gated noise every step.

    The paper's opacity and scale regularisers (gsplat simple_trainer's ``opacity_reg`` and
    ``scale_reg``, 0.01 each in its MCMC preset) come from :meth:`extra_loss`. gsplat's preset
    also starts from ``init_opacity: 0.5`` and ``init_scale: 0.1`` (model options).
    """

    @dataclass
    class Config(ErrorScoreOptions, Strategy.Config):
        cap_max: int = 1_000_000  # never grow beyond this many Gaussians
        noise_lr: float = 5e5  # noise scale per unit of the current means learning rate
        refine_start_iter: int = 500
        refine_stop_iter: int = 25_000
        refine_every: int = 100
        min_opacity: float = 0.005  # Gaussians at or below this opacity are relocated
        growth_rate: float = 0.05  # fraction added per refinement (gsplat: 1.05x)
        opacity_reg: float = 0.01  # weight of mean(sigmoid(opacities))
        scale_reg: float = 0.01  # weight of mean(exp(scales))
        # Multi-view error scores (error_scores.py; need error_every > 0). Relocated and added
        # Gaussians copy sources drawn by opacity x (1 - error_weight + error_weight x error mass /
        # its mean): 0 is gsplat's draw by opacity, 1 draws by opacity times the Gaussian's share of
        # the scored views' L1 error, so growth goes where several views agree the render is wrong.
        error_weight: float = 0.0
        # FastGS's pruning, as MCMC does it: also relocate Gaussians whose view-loss-weighted share
        # of high-error pixels, min-max normalised, exceeds this (0 = no such test; FastGS: 0.9).
        relocate_error: float = 0.0

        def __post_init__(self) -> None:
            super().__post_init__()
            at_least(self, 1, "cap_max", home="strategy")
            if not 0.0 <= self.error_weight <= 1.0:
                raise OptionError("error_weight", f"must be in [0, 1], got {self.error_weight}", "strategy")
            if not 0.0 <= self.relocate_error < 1.0:
                raise OptionError(
                    "relocate_error", f"must be in [0, 1) (0 = off), got {self.relocate_error}", "strategy"
                )
            uses_scores = [k for k in ("error_weight", "relocate_error") if getattr(self, k) > 0]
            if uses_scores and self.error_every == 0:
                raise OptionError(uses_scores[0], "needs multi-view error scores: set error_every >= 1", "strategy")
            at_least(self, 0.0, "noise_lr", "growth_rate", "opacity_reg", "scale_reg", home="strategy")
            if not 0.0 <= self.min_opacity < 1.0:
                raise OptionError("min_opacity", f"must be in [0, 1), got {self.min_opacity}", "strategy")

    def __init__(self, config: Config, scene_extent: float = 1.0, max_steps: int = GSPLAT_DEFAULT_MAX_STEPS) -> None:
        super().__init__(config, scene_extent, max_steps)
        self.binoms = binomial_table()
        self.refine_start_iter = self.scaled(config.refine_start_iter)
        self.refine_stop_iter = self.scaled(config.refine_stop_iter)
        self.refine_every = self.scaled(config.refine_every, at_least_one=True)
        self.check_error_period()
        # Multi-view error sums since the last refinement, [N] each, and how many views they hold.
        self.state: dict[str, Tensor | None] = dict.fromkeys(ERROR_KEYS) if config.error_every > 0 else {}
        self.error_views = 0

    def step_post_backward(self, model: Any, optimizer: torch.optim.Optimizer, step: int, render_out: dict) -> None:
        params = model.params
        self.binoms = self.binoms.to(params["means"].device)
        self.last_stats = {}
        if self.scores_error(step):
            self.error_views += accumulate_error_scores(
                self.state, self.renderer, model, render_out, self.config.high_error
            )
        if self.refine_start_iter < step < self.refine_stop_iter and step % self.refine_every == 0:
            weights = self._source_weights(params)
            relocated = self._relocate(params, optimizer, weights, step)  # may note "unseen" in last_stats
            self.last_stats = {"relocated": relocated, "added": self._add(params, optimizer)} | self.last_stats
            for value in self.state.values():
                if value is not None:
                    value.zero_()
            self.error_views = 0
        means_lr = group_by_name(optimizer, "means")["lr"]
        inject_noise_to_position(params, scaler=means_lr * self.config.noise_lr)

    def _error_ready(self) -> bool:
        return self.error_views > 0 and self.state.get("err_mass") is not None

    def _source_weights(self, params: Any) -> Tensor | None:
        """Draw weights of copy sources ``[N]``, or None for gsplat's draw by opacity."""
        lam = self.config.error_weight
        if lam == 0 or not self._error_ready():
            return None
        mass = self.state["err_mass"]
        mean = mass.mean()
        share = mass / mean if mean > 0 else torch.ones_like(mass)
        # The floor keeps every live Gaussian drawable (a draw over all-zero weights would fail).
        return torch.sigmoid(params["opacities"].flatten()) * ((1.0 - lam) + lam * share + 1e-6)

    @torch.no_grad()
    def _relocate(self, params: Any, optimizer: torch.optim.Optimizer, weights: Tensor | None, step: int) -> int:
        dead = torch.sigmoid(params["opacities"].flatten()) <= self.config.min_opacity
        if self.config.relocate_error > 0 and self._error_ready():
            dead |= normalised(self.state["err_loss"]) > self.config.relocate_error
        unseen = self.too_few_views(params["means"], step)
        if unseen is not None:
            self.last_stats["unseen"] = int(unseen.sum())
            dead |= unseen
        n_dead = int(dead.sum())
        if n_dead > 0:
            relocate(params, optimizer, self.state, dead, self.binoms, self.config.min_opacity, weights)
            for value in self.state.values():  # the dead rows are copies now: their old sums would mislead _add
                if value is not None:
                    value[dead] = 0
        return n_dead

    @torch.no_grad()
    def _add(self, params: Any, optimizer: torch.optim.Optimizer) -> int:
        n = params["means"].shape[0]
        n_new = max(0, min(self.config.cap_max, int((1.0 + self.config.growth_rate) * n)) - n)
        if n_new > 0:
            # Weights after relocation: the relocated rows are copies now (their sums were zeroed).
            sample_add(
                params, optimizer, self.state, n_new, self.binoms, self.config.min_opacity, self._source_weights(params)
            )
        return n_new

    def extra_loss(self, model: Any, step: int) -> dict[str, Tensor]:
        params, out = model.params, {}
        if self.config.opacity_reg > 0:
            out["opacity_reg"] = self.config.opacity_reg * torch.sigmoid(params["opacities"]).abs().mean()
        if self.config.scale_reg > 0:
            out["scale_reg"] = self.config.scale_reg * torch.exp(params["scales"]).abs().mean()
        return out

    def state_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {k: None if v is None else v.detach().cpu().clone() for k, v in self.state.items()}
        out["error_views"] = self.error_views
        return out

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.state = {k: None if state.get(k) is None else state[k].clone() for k in self.state}
        self.error_views = int(state.get("error_views", 0))
