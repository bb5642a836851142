"""Rendering a model together with its frozen context Gaussians (``model.context``, ``model/context.py``).

The context is appended after the model's own ``N`` Gaussians, so one rasterization blends both in depth
order exactly as if they were one model, and everything the renderer hands the densification strategy is cut
back to the first ``N`` rows: ``radii``, ``visibility`` and ``means2d``. ``means2d`` is the rasterizer's own
non-leaf output of all rows; its gradient (and gsplat's ``absgrad``) reaches the strategy through a leaf
holding the first ``N`` rows, filled by a hook when the backward pass reaches the full tensor.
"""

from __future__ import annotations

import weakref
from typing import Any

import torch
from torch import Tensor

BLENDED = ("means", "quats", "scales", "opacities", "colors")


def with_context(model: Any, params: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """``params`` (the model's ``render_params()``) followed by its context Gaussians, and the number ``N`` of
    its own; ``params`` itself when the model has no context."""
    n = int(params["means"].shape[0])
    context_params = getattr(model, "context_params", None)
    context = context_params() if callable(context_params) else None
    if context is None or len(context["means"]) == 0:
        return params, n
    joined = dict(params)
    for key in BLENDED:
        joined[key] = torch.cat([params[key], context[key].to(params[key].dtype)])
    return joined, n


def own_means2d(full: Tensor, n: int) -> Tensor:
    """The first ``n`` Gaussians' rows of ``means2d [C, N+M, 2]`` as a leaf whose ``.grad`` (and ``.absgrad``,
    when the backend sets it on ``full``) the backward pass fills, as the strategy reads them."""
    own = full.detach()[:, :n]
    if not full.requires_grad:
        return own
    own.requires_grad_(True)
    # References run one way only, render output -> own -> full -> its graph -> the hook, and the hook holds
    # weak ones: a hook holding either strongly would close a cycle through the autograd graph that Python's
    # collector cannot see, keeping every step's means2d alive. own keeps full alive for the backward, where
    # the native backend sets absgrad on the very tensor object the forward returned.
    own.context_full = full
    own_ref, full_ref = weakref.ref(own), weakref.ref(full)

    def pass_on(grad: Tensor) -> None:
        target = own_ref()
        if target is None:
            return
        target.grad = grad[:, :n] if target.grad is None else target.grad + grad[:, :n]
        absgrad = getattr(full_ref(), "absgrad", None)  # set by the rasterizer's backward before this hook runs
        if absgrad is not None:
            target.absgrad = absgrad[:, :n]

    full.register_hook(pass_on)
    return own
