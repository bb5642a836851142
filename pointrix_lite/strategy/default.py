"""The 3DGS paper's adaptive density control (gsplat 1.5.3 ``DefaultStrategy``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import torch
from torch import Tensor

from .. import distributed
from ..config import OptionError
from ..registry import STRATEGIES
from .base import GSPLAT_DEFAULT_MAX_STEPS, Strategy
from .error_scores import ERROR_KEYS, ErrorScoreOptions, accumulate_error_scores, normalised
from .ops import duplicate, remove, reset_opa, split


@STRATEGIES.register()
class DefaultStrategy(Strategy):
    """Clone small and split large Gaussians with high screen-space gradients, prune transparent
    and oversized ones, and periodically reset opacities.

    Screen-space gradients come from ``render_out["means2d"].grad`` ``[C,N,2]``, rescaled to NDC
    units (x by width/2, y by height/2) and by the number of cameras (the loss averages over
    them), accumulated over the steps where ``radii > 0``, and averaged per Gaussian.

    One deliberate difference from gsplat 1.5.3: its opacity-reset test
    ``step % reset_every == 0 & step > 0`` never fires (``&`` binds before ``==``; gsplat PR
    #776). Here the reset happens every ``reset_every`` steps, as in INRIA 3DGS.
    """

    @dataclass
    class Config(ErrorScoreOptions, Strategy.Config):
        prune_opa: float = 0.005  # prune below this opacity; opacity resets go to twice this
        grow_grad2d: float = 0.0002  # mean NDC gradient above which a Gaussian grows
        grow_scale3d: float = 0.01  # clone if max scale <= this * scene_extent, else split
        grow_scale2d: float = 0.05  # split if screen radius (fraction of image) exceeds this
        prune_scale3d: float = 0.1  # prune (after the first reset) if max scale > this * scene_extent
        prune_scale2d: float = 0.15  # prune if screen radius exceeds this (while scale2d refinement is on)
        refine_scale2d_stop_iter: int = 0  # > 0 enables the screen-size rules until this step
        refine_start_iter: int = 500
        refine_stop_iter: int = 15_000
        reset_every: int = 3000
        refine_every: int = 100
        pause_refine_after_reset: int = 0
        absgrad: bool = False  # AbsGS: needs a renderer that fills means2d.absgrad
        revised_opacity: bool = False  # split opacity 1 - sqrt(1 - o) (arXiv:2404.06109)
        # Gaussian budget (0 = none, gsplat's behaviour). Growth never takes the count past the
        # budget of the current step, which rises linearly from the initial count at refine_start_iter
        # to cap_max at the last refinement (Taming-3DGS): the count reaches the cap near the end of
        # densification instead of early. When more candidates pass grow_grad2d than there is
        # room for, those with the highest mean gradient grow first.
        cap_max: int = 0
        # Multi-view error scores (error_scores.py; need error_every > 0). FastGS's densification:
        # a candidate grows only if the mean, over the views scored since the last refinement, of its
        # blend-weighted share of high-error pixels exceeds this (0 = no such test).
        min_error_hits: float = 0.0
        # Which candidates grow first when the budget (cap_max) is short: the highest mean gradient,
        # or the highest error mass (blend weight times L1 error, summed over the scored views;
        # Taming-3DGS's kind of score).
        rank_by: Literal["grad", "error"] = "grad"
        # FastGS's pruning: also prune, at refinements, Gaussians whose view-loss-weighted share of
        # high-error pixels, min-max normalised, exceeds this (0 = no such test; FastGS: 0.9).
        prune_error: float = 0.0

        def __post_init__(self) -> None:
            super().__post_init__()
            uses_scores = [k for k in ("min_error_hits", "prune_error") if getattr(self, k) > 0]
            uses_scores += ["rank_by"] if self.rank_by == "error" else []
            if uses_scores and self.error_every == 0:
                raise OptionError(uses_scores[0], "needs multi-view error scores: set error_every >= 1", "strategy")
            if self.rank_by == "error" and self.cap_max == 0:
                raise OptionError("rank_by", "ranks candidates only under a budget: set cap_max > 0", "strategy")
            if not 0.0 <= self.prune_error < 1.0:
                raise OptionError("prune_error", f"must be in [0, 1) (0 = off), got {self.prune_error}", "strategy")
            if self.cap_max < 0:
                raise OptionError("cap_max", f"must be >= 0 (0 = no budget), got {self.cap_max}", "strategy")
            if not 0.0 <= self.prune_opa < 1.0:
                raise OptionError("prune_opa", f"must be in [0, 1), got {self.prune_opa}", "strategy")

    def __init__(self, config: Config, scene_extent: float = 1.0, max_steps: int = GSPLAT_DEFAULT_MAX_STEPS) -> None:
        super().__init__(config, scene_extent, max_steps)
        self.refine_start_iter = self.scaled(config.refine_start_iter)
        self.refine_stop_iter = self.scaled(config.refine_stop_iter)
        self.refine_every = self.scaled(config.refine_every, at_least_one=True)
        self.reset_every = self.scaled(config.reset_every, at_least_one=True)
        self.check_error_period()
        # Per-Gaussian running statistics since the last refinement, [N] each (None until used).
        self.state: dict[str, Tensor | None] = {"grad2d": None, "count": None, "radii": None}
        if config.error_every > 0:
            self.state.update(dict.fromkeys(ERROR_KEYS))
        self.error_views = 0  # views in the err_* sums since the last refinement (checkpointed)
        self.n_start: int | None = None  # Gaussian count when the budget ramp starts (checkpointed)

    def step_pre_backward(self, model: Any, optimizer: torch.optim.Optimizer, step: int, render_out: dict) -> None:
        means2d = render_out["means2d"]
        if means2d.requires_grad:
            means2d.retain_grad()  # means2d is not a leaf; without this its .grad is freed

    def step_post_backward(self, model: Any, optimizer: torch.optim.Optimizer, step: int, render_out: dict) -> None:
        cfg = self.config
        if step >= self.refine_stop_iter:
            return
        self._update_state(model.num_gaussians, render_out)
        if self.scores_error(step):
            self.error_views += accumulate_error_scores(self.state, self.renderer, model, render_out, cfg.high_error)
        if self.n_start is None:
            self.n_start = model.num_gaussians
        self.last_stats = {}
        if (
            step > self.refine_start_iter
            and step % self.refine_every == 0
            and step % self.reset_every >= cfg.pause_refine_after_reset
        ):
            n_dupli, n_split = self._grow(model, optimizer, step)
            n_prune = self._prune(model, optimizer, step)
            self.last_stats = {"duplicated": n_dupli, "split": n_split, "pruned": n_prune} | self.last_stats
            for value in self.state.values():
                if value is not None:
                    value.zero_()
            self.error_views = 0
        if step > 0 and step % self.reset_every == 0:
            reset_opa(model.params, optimizer, self.state, value=cfg.prune_opa * 2.0)
            self.last_stats["opacity_reset"] = 1

    def _update_state(self, n: int, render_out: dict) -> None:
        means2d = render_out["means2d"]
        grads = means2d.absgrad if self.config.absgrad else means2d.grad
        if grads is None:
            kind = "absgrad" if self.config.absgrad else "grad"
            raise RuntimeError(
                f"render_out['means2d'].{kind} is missing: call step_pre_backward before loss.backward()"
            )
        grads = grads.detach().clone()  # [C, N, 2]
        grads[..., 0] *= render_out["width"] / 2.0 * render_out["n_cameras"]
        grads[..., 1] *= render_out["height"] / 2.0 * render_out["n_cameras"]
        device = grads.device
        for key in ("grad2d", "count") + (("radii",) if self.config.refine_scale2d_stop_iter > 0 else ()):
            if self.state[key] is None:
                self.state[key] = torch.zeros(n, device=device)
            elif self.state[key].shape[0] != n:
                raise RuntimeError(f"{key} statistics cover {self.state[key].shape[0]} Gaussians, the model has {n}")
            self.state[key] = self.state[key].to(device)

        radii = render_out["radii"]  # [C, N, 2]
        visible = (radii > 0).all(dim=-1)  # [C, N]
        gs_ids = torch.where(visible)[1]
        if not distributed.is_distributed():
            self.state["grad2d"].index_add_(0, gs_ids, grads[visible].norm(dim=-1))
            self.state["count"].index_add_(0, gs_ids, torch.ones_like(gs_ids, dtype=torch.float32))
        else:
            # Each rank saw different cameras: sum this step's statistics over ranks so every rank
            # makes the same grow/prune decisions (as one process rendering all cameras would).
            grad_inc = torch.zeros(n, device=device).index_add_(0, gs_ids, grads[visible].norm(dim=-1))
            count_inc = torch.zeros(n, device=device).index_add_(
                0, gs_ids, torch.ones_like(gs_ids, dtype=torch.float32)
            )
            distributed.all_reduce_sum_(grad_inc, count_inc)
            self.state["grad2d"] += grad_inc
            self.state["count"] += count_inc
        if self.config.refine_scale2d_stop_iter > 0:
            r = radii[visible].max(dim=-1).values.float() / float(max(render_out["width"], render_out["height"]))
            r_max = torch.zeros(n, device=device).index_reduce_(0, gs_ids, r, "amax")
            distributed.all_reduce_max_(r_max)
            self.state["radii"] = torch.maximum(self.state["radii"], r_max)

    @torch.no_grad()
    def _grow(self, model: Any, optimizer: torch.optim.Optimizer, step: int) -> tuple[int, int]:
        cfg, params = self.config, model.params
        grads = self.state["grad2d"] / self.state["count"].clamp_min(1)
        is_grad_high = grads > cfg.grow_grad2d
        is_small = torch.exp(params["scales"]).max(dim=-1).values <= cfg.grow_scale3d * self.scene_extent
        is_dupli = is_grad_high & is_small
        is_split = is_grad_high & ~is_small
        if step < cfg.refine_scale2d_stop_iter:
            is_split |= self.state["radii"] > cfg.grow_scale2d
        if cfg.min_error_hits > 0:
            in_error = self._error_score("err_hits") / max(self.error_views, 1) > cfg.min_error_hits
            is_dupli, is_split = is_dupli & in_error, is_split & in_error
        if cfg.cap_max > 0:
            rank = grads if cfg.rank_by == "grad" else self._error_score("err_mass")
            is_dupli, is_split = self._within_budget(rank, is_dupli, is_split, self.budget(step) - model.num_gaussians)
        n_dupli, n_split = int(is_dupli.sum()), int(is_split.sum())
        if n_dupli > 0:
            duplicate(params, optimizer, self.state, is_dupli)
        # Clones are appended at the end and are not split in the same round.
        is_split = torch.cat([is_split, torch.zeros(n_dupli, dtype=torch.bool, device=is_split.device)])
        if n_split > 0:
            split(params, optimizer, self.state, is_split, revised_opacity=cfg.revised_opacity)
        return n_dupli, n_split

    def _error_score(self, key: str) -> Tensor:
        value = self.state.get(key)
        if value is None:  # no view scored yet (e.g. a refinement at the first scored step's interval)
            return torch.zeros(self.state["grad2d"].shape[0], device=self.state["grad2d"].device)
        return value

    def budget(self, step: int) -> int:
        """Most Gaussians allowed after growing at ``step`` (``cap_max`` once the ramp ends)."""
        cap = self.config.cap_max
        start = min(self.n_start if self.n_start is not None else cap, cap)
        # The ramp ends at the last refinement before refine_stop_iter, so the cap is reachable.
        span = max(self.refine_stop_iter - self.refine_every - self.refine_start_iter, 1)
        t = min(max(step - self.refine_start_iter, 0) / span, 1.0)
        return min(cap, start + int((cap - start) * t))

    @staticmethod
    def _within_budget(score: Tensor, is_dupli: Tensor, is_split: Tensor, room: int) -> tuple[Tensor, Tensor]:
        """Keep the ``room`` highest-``score`` candidates (each clone or split adds one Gaussian)."""
        candidates = is_dupli | is_split
        if int(candidates.sum()) <= room:
            return is_dupli, is_split
        keep = torch.zeros_like(candidates)
        if room > 0:
            keep[torch.topk(score.masked_fill(~candidates, -torch.inf), room).indices] = True
        return is_dupli & keep, is_split & keep

    @torch.no_grad()
    def _prune(self, model: Any, optimizer: torch.optim.Optimizer, step: int) -> int:
        cfg, params = self.config, model.params
        is_prune = torch.sigmoid(params["opacities"].flatten()) < cfg.prune_opa
        if step > self.reset_every:
            is_too_big = torch.exp(params["scales"]).max(dim=-1).values > cfg.prune_scale3d * self.scene_extent
            # INRIA's screen-size pruning never ran (graphdeco-inria/gaussian-splatting#123), hence off by default.
            if step < cfg.refine_scale2d_stop_iter:
                is_too_big |= self.state["radii"] > cfg.prune_scale2d
            is_prune |= is_too_big
        if cfg.prune_error > 0 and self.error_views > 0:
            is_prune |= normalised(self._error_score("err_loss")) > cfg.prune_error
        unseen = self.too_few_views(params["means"], step)
        if unseen is not None:
            self.last_stats["unseen"] = int(unseen.sum())
            is_prune |= unseen
        n_prune = int(is_prune.sum())
        if n_prune > 0:
            remove(params, optimizer, self.state, is_prune)
        return n_prune

    def state_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {k: None if v is None else v.detach().cpu().clone() for k, v in self.state.items()}
        out["n_start"] = self.n_start
        out["error_views"] = self.error_views
        return out

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.state = {k: None if state.get(k) is None else state[k].clone() for k in self.state}
        self.n_start = state.get("n_start")
        self.error_views = int(state.get("error_views", 0))
