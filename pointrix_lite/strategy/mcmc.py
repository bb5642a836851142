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
    class Config(Strategy.Config):
        cap_max: int = 1_000_000  # never grow beyond this many Gaussians
        noise_lr: float = 5e5  # noise scale per unit of the current means learning rate
        refine_start_iter: int = 500
        refine_stop_iter: int = 25_000
        refine_every: int = 100
        min_opacity: float = 0.005  # Gaussians at or below this opacity are relocated
        growth_rate: float = 0.05  # fraction added per refinement (gsplat: 1.05x)
        opacity_reg: float = 0.01  # weight of mean(sigmoid(opacities))
        scale_reg: float = 0.01  # weight of mean(exp(scales))

        def __post_init__(self) -> None:
            super().__post_init__()
            at_least(self, 1, "cap_max", home="strategy")
            at_least(self, 0.0, "noise_lr", "growth_rate", "opacity_reg", "scale_reg", home="strategy")
            if not 0.0 <= self.min_opacity < 1.0:
                raise OptionError("min_opacity", f"must be in [0, 1), got {self.min_opacity}", "strategy")

    def __init__(self, config: Config, scene_extent: float = 1.0, max_steps: int = GSPLAT_DEFAULT_MAX_STEPS) -> None:
        super().__init__(config, scene_extent, max_steps)
        self.binoms = binomial_table()
        self.refine_start_iter = self.scaled(config.refine_start_iter)
        self.refine_stop_iter = self.scaled(config.refine_stop_iter)
        self.refine_every = self.scaled(config.refine_every, at_least_one=True)

    def step_post_backward(self, model: Any, optimizer: torch.optim.Optimizer, step: int, render_out: dict) -> None:
        params = model.params
        self.binoms = self.binoms.to(params["means"].device)
        self.last_stats = {}
        if self.refine_start_iter < step < self.refine_stop_iter and step % self.refine_every == 0:
            self.last_stats = {
                "relocated": self._relocate(params, optimizer),
                "added": self._add(params, optimizer),
            }
        means_lr = group_by_name(optimizer, "means")["lr"]
        inject_noise_to_position(params, scaler=means_lr * self.config.noise_lr)

    @torch.no_grad()
    def _relocate(self, params: Any, optimizer: torch.optim.Optimizer) -> int:
        dead = torch.sigmoid(params["opacities"].flatten()) <= self.config.min_opacity
        n_dead = int(dead.sum())
        if n_dead > 0:
            relocate(params, optimizer, None, dead, self.binoms, self.config.min_opacity)
        return n_dead

    @torch.no_grad()
    def _add(self, params: Any, optimizer: torch.optim.Optimizer) -> int:
        n = params["means"].shape[0]
        n_new = max(0, min(self.config.cap_max, int((1.0 + self.config.growth_rate) * n)) - n)
        if n_new > 0:
            sample_add(params, optimizer, None, n_new, self.binoms, self.config.min_opacity)
        return n_new

    def extra_loss(self, model: Any, step: int) -> dict[str, Tensor]:
        params, out = model.params, {}
        if self.config.opacity_reg > 0:
            out["opacity_reg"] = self.config.opacity_reg * torch.sigmoid(params["opacities"]).abs().mean()
        if self.config.scale_reg > 0:
            out["scale_reg"] = self.config.scale_reg * torch.exp(params["scales"]).abs().mean()
        return out
