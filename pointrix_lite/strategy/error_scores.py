"""Multi-view error scores: which Gaussians render the pixels that training views get wrong.

FastGS (arXiv:2511.04283) grows a Gaussian only where several training views agree it is in error
and Taming-3DGS (arXiv:2406.15643) ranks Gaussians by the error-weighted share of the pixels they
render. Both need, per Gaussian, sums over views and pixels of a per-pixel error term times the
Gaussian's blend weight ``alpha * T`` there. FastGS renders ten sampled views again at each
refinement for that; here the views the training steps render anyway are scored as they pass
(every ``error_every`` steps), so the statistics cost one extra forward and backward of a probe
render per scored view and no extra RGB render. The scores come from a view rendered with the
parameters of its step, before that step's optimizer update, and blend weights after it: one Adam
step apart, which a refinement interval (several steps) dwarfs.

Per Gaussian ``i``, summed over the scored views ``v`` since the last refinement:

- ``err_hits``: ``sum_v sum_p [e_vp > high_error] * w_vip`` with ``e_vp`` the view's per-pixel L1
  error min-max normalised over the view (FastGS's high-error pixels, whose count of covered pixels
  becomes a blend-weighted count here); divided by the number of views it is the mean high-error
  pixel share per view (FastGS's ``importance_score``).
- ``err_mass``: ``sum_v sum_p e_vp * w_vip`` with the raw L1 error (a Taming-style score).
- ``err_loss``: ``sum_v L1_v * (sum_p [e_vp > high_error] * w_vip)``, the hits weighted by the
  view's mean L1 (FastGS's pruning score, min-max normalised when used).

The three live in a strategy's ``state`` dict, so the ops (``ops.py``) keep them row-aligned with
the parameters through growth and pruning, and distributed ranks sum them as the gradient
statistics.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from .. import distributed
from ..config import OptionError
from ..model.loss import bound_clipped, bounds_clipped

ERROR_KEYS = ("err_hits", "err_mass", "err_loss")


@dataclass
class ErrorScoreOptions:
    """Options of the multi-view error scores (a mixin of the strategies' ``Config``)."""

    # Score every n-th training step's views (0 = no error scores): 1 scores every view the
    # training renders; each scored view costs one more forward and backward of the rasterizer.
    error_every: int = 0
    # A pixel is a high-error pixel where its L1 error, min-max normalised over its view, exceeds
    # this (FastGS's loss_thresh 0.1).
    high_error: float = 0.1

    def __post_init__(self) -> None:
        super().__post_init__()  # type: ignore[misc]  # the strategy's base Config checks its own options
        if self.error_every < 0:
            raise OptionError("error_every", f"must be >= 0 (0 = off), got {self.error_every}", "strategy")
        if not 0.0 <= self.high_error < 1.0:
            raise OptionError("high_error", f"must be in [0, 1), got {self.high_error}", "strategy")


@torch.no_grad()  # a view's color_transform may hold trainable parameters: no graph for a statistic
def pixel_errors(rgb: Tensor, views: Sequence[Any], high_error: float, bound: bool = False) -> tuple[Tensor, Tensor]:
    """Per-pixel error maps of rendered views against their images.

    Args:
        rgb: ``[C, H, W, 3]`` renders (canonical colours; a view's ``color_transform`` is applied).
        views: The C views (``image``, optional ``mask`` and ``color_transform``).
        high_error: Threshold on the min-max normalised error.
        bound: The model's ``bound_clipped``: the error is the loss's, so a render beyond a photo's
            clipped channel is no error there (else densification would grow Gaussians in highlights
            the loss is content with).

    Returns:
        ``maps [C, H, W, 2]`` (channel 0: 1.0 at high-error pixels, channel 1: the L1 error) and
        ``view_l1 [C]`` (each view's mean L1 over its kept pixels). Pixels a mask drops are 0 in both.
    """
    rgb = rgb.detach()
    maps, view_l1 = [], []
    for view, render in zip(views, rgb):
        if view.color_transform is not None:
            render = view.color_transform(render)
        photo = view.float_image(render.device)
        if bound:
            render = bound_clipped(render, photo)
        err = (render - photo).abs().mean(dim=-1)  # [H, W]
        keep = None if view.mask is None else view.mask.to(err.device)
        if keep is not None:
            err = err * keep
        kept = err if keep is None else err[keep]
        lo, hi = (kept.min(), kept.max()) if kept.numel() else (err.new_zeros(()), err.new_zeros(()))
        high = ((err - lo) > high_error * (hi - lo)) & (hi > lo)
        if keep is not None:
            high &= keep
        maps.append(torch.stack([high.to(err.dtype), err], dim=-1))
        view_l1.append(kept.mean() if kept.numel() else err.new_zeros(()))
    return torch.stack(maps), torch.stack(view_l1)


def accumulate_error_scores(
    state: dict[str, Tensor | None], renderer: Any, model: Any, render_out: dict, high_error: float
) -> int:
    """Add this step's views to ``state``'s ``err_*`` sums (created at zero for N Gaussians).

    Args:
        state: A strategy's per-Gaussian statistics; its ``err_*`` entries are read and replaced.
        renderer: Has ``blend_weights(model, cameras, pixel_weights)`` (``GaussianRenderer``).
        model: The model the step rendered (after its optimizer update).
        render_out: The step's renderer output, with ``"views"`` (the trainer adds them).

    Returns:
        The number of views scored over all ranks.
    """
    views = render_out.get("views")
    if views is None:
        raise RuntimeError("error scores need render_out['views'] (set by DefaultTrainer.train_step)")
    maps, view_l1 = pixel_errors(render_out["rgb"], views, high_error, bounds_clipped(model))
    # One probe render per view: blend weights are per camera, and the loss weight differs per view.
    weights = torch.stack([renderer.blend_weights(model, [v.camera], m[None]) for v, m in zip(views, maps)])  # [C,N,2]
    n = weights.shape[1]
    hits = weights[..., 0]
    inc = [hits.sum(0), weights[..., 1].sum(0), (view_l1.to(hits.device)[:, None] * hits).sum(0)]
    distributed.all_reduce_sum_(*inc)
    for key, value in zip(ERROR_KEYS, inc):
        current = state.get(key)
        if current is None or current.shape[0] != n:
            if current is not None:
                raise RuntimeError(f"{key} statistics cover {current.shape[0]} Gaussians, the model has {n}")
            current = torch.zeros(n, device=value.device)
        state[key] = current.to(value.device) + value
    if not distributed.is_distributed():
        return len(views)  # no read-back: on a GPU it would wait for the step's kernels
    count = torch.tensor([float(len(views))], device=hits.device)
    distributed.all_reduce_sum_(count)
    return int(count.item())


def normalised(score: Tensor) -> Tensor:
    """``score`` min-max normalised to [0, 1] (all zeros when it is constant)."""
    lo, hi = score.min(), score.max()
    return (score - lo) / (hi - lo) if hi > lo else torch.zeros_like(score)
