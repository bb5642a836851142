"""In-place Gaussian edits that keep Adam's moments row-aligned with the parameters.

Same operations and semantics as gsplat 1.5.3 ``strategy/ops.py``, adapted to one Adam with one
named param group per attribute (``group["name"]``), and pure torch so they run on the CPU
(gsplat's relocation and covariance use CUDA kernels).

Every op replaces each parameter in ``params`` by a new ``nn.Parameter``, moves the Adam state
to the new tensor and edits its moment rows the same way: copied/new rows get zero moments,
removed rows drop theirs, surviving rows keep theirs. ``state`` holds a strategy's per-Gaussian
running statistics (``[N, ...]`` tensors or None), which are edited alongside.
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .. import device_policy

Params = MutableMapping[str, nn.Parameter]
RunningState = MutableMapping[str, "Tensor | None"]


def _zeros_like_rows(v: Tensor, n: int) -> Tensor:
    return torch.zeros((n, *v.shape[1:]), dtype=v.dtype, device=v.device)


@torch.no_grad()
def update_param_with_optimizer(
    param_fn: Callable[[str, Tensor], Tensor],
    optimizer_fn: Callable[[str, Tensor], Tensor],
    params: Params,
    optimizer: torch.optim.Optimizer | None,
    names: list[str] | None = None,
) -> None:
    """Replace ``params[name]`` by ``param_fn(name, p)`` and each Adam state tensor ``v`` of it by
    ``optimizer_fn(key, v)`` (Adam's scalar ``step`` is kept)."""
    groups = {g.get("name"): g for g in optimizer.param_groups} if optimizer is not None else {}
    for name in list(params.keys()) if names is None else names:
        old = params[name]
        new = nn.Parameter(param_fn(name, old.detach()), requires_grad=old.requires_grad)
        params[name] = new
        group = groups.get(name)
        if group is None:
            if old.requires_grad and optimizer is not None:
                raise ValueError(f"parameter {name!r} is trainable but the optimizer has no group named {name!r}")
            continue
        group["params"] = [new]
        state = optimizer.state.pop(old, None)
        if state:
            optimizer.state[new] = {k: v if k == "step" else optimizer_fn(k, v) for k, v in state.items()}


def _edit_state(state: RunningState | None, fn: Callable[[Tensor], Tensor]) -> None:
    for key, value in (state or {}).items():
        if isinstance(value, Tensor):
            state[key] = fn(value)


@torch.no_grad()
def duplicate(
    params: Params, optimizer: torch.optim.Optimizer | None, state: RunningState | None, mask: Tensor
) -> None:
    """Append an exact copy of every Gaussian where ``mask [N]`` is set (3DGS "clone")."""
    sel = torch.where(mask)[0]
    update_param_with_optimizer(
        lambda name, p: torch.cat([p, p[sel]]),
        lambda key, v: torch.cat([v, _zeros_like_rows(v, len(sel))]),
        params,
        optimizer,
    )
    _edit_state(state, lambda v: torch.cat([v, v[sel]]))


def normalized_quat_to_rotmat(quats: Tensor) -> Tensor:
    """Rotation matrices ``[...,3,3]`` from unit quaternions ``[...,4]`` (wxyz)."""
    w, x, y, z = quats.unbind(-1)
    mat = torch.stack(
        [
            1 - 2 * (y * y + z * z),
            2 * (x * y - w * z),
            2 * (x * z + w * y),
            2 * (x * y + w * z),
            1 - 2 * (x * x + z * z),
            2 * (y * z - w * x),
            2 * (x * z - w * y),
            2 * (y * z + w * x),
            1 - 2 * (x * x + y * y),
        ],
        dim=-1,
    )
    return mat.reshape(quats.shape[:-1] + (3, 3))


def covariance(quats: Tensor, scales: Tensor) -> Tensor:
    """3D covariances ``R S S^T R^T`` ``[N,3,3]`` from raw quaternions ``[N,4]`` and scales ``[N,3]``."""
    m = normalized_quat_to_rotmat(F.normalize(quats, dim=-1)) * scales[..., None, :]
    return m @ m.transpose(-1, -2)


@torch.no_grad()
def split(
    params: Params,
    optimizer: torch.optim.Optimizer | None,
    state: RunningState | None,
    mask: Tensor,
    revised_opacity: bool = False,
) -> None:
    """Replace every masked Gaussian by two, each at a position drawn from it and with scale / 1.6.

    The new Gaussians go to the end (first all first samples, then all second samples); the
    unmasked ones keep their order and moments.

    Args:
        revised_opacity: New opacity ``1 - sqrt(1 - o)`` (arXiv:2404.06109) instead of a copy.
    """
    sel = torch.where(mask)[0]
    rest = torch.where(~mask)[0]
    scales = torch.exp(params["scales"][sel])
    rotmats = normalized_quat_to_rotmat(F.normalize(params["quats"][sel], dim=-1))
    noise = torch.randn(2, len(sel), 3, device=mask.device)
    samples = torch.einsum("nij,nj,bnj->bni", rotmats, scales, noise)  # [2, M, 3]

    def param_fn(name: str, p: Tensor) -> Tensor:
        repeats = [2] + [1] * (p.dim() - 1)
        if name == "means":
            p_split = (p[sel] + samples).reshape(-1, 3)
        elif name == "scales":
            p_split = torch.log(scales / 1.6).repeat(2, 1)
        elif name == "opacities" and revised_opacity:
            p_split = torch.logit(1.0 - torch.sqrt(1.0 - torch.sigmoid(p[sel]))).repeat(repeats)
        else:
            p_split = p[sel].repeat(repeats)
        return torch.cat([p[rest], p_split])

    update_param_with_optimizer(
        param_fn, lambda key, v: torch.cat([v[rest], _zeros_like_rows(v, 2 * len(sel))]), params, optimizer
    )
    _edit_state(state, lambda v: torch.cat([v[rest], v[sel].repeat([2] + [1] * (v.dim() - 1))]))


@torch.no_grad()
def remove(params: Params, optimizer: torch.optim.Optimizer | None, state: RunningState | None, mask: Tensor) -> None:
    """Delete every Gaussian where ``mask [N]`` is set."""
    keep = torch.where(~mask)[0]
    update_param_with_optimizer(lambda name, p: p[keep], lambda key, v: v[keep], params, optimizer)
    _edit_state(state, lambda v: v[keep])


@torch.no_grad()
def reset_opa(
    params: Params, optimizer: torch.optim.Optimizer | None, state: RunningState | None, value: float
) -> None:
    """Clamp opacities to at most ``value`` (post-sigmoid) and zero their Adam moments."""
    limit = torch.logit(torch.tensor(value)).item()
    update_param_with_optimizer(
        lambda name, p: torch.clamp(p, max=limit),
        lambda key, v: torch.zeros_like(v),
        params,
        optimizer,
        names=["opacities"],
    )


def binomial_table(n_max: int = 51) -> Tensor:
    """``[n_max, n_max]`` table with ``C(n, k)`` at ``[n, k]`` (zero for k > n), as gsplat's MCMC state."""
    table = torch.zeros(n_max, n_max, dtype=torch.float64)
    table[:, 0] = 1.0
    for n in range(1, n_max):
        table[n, 1:] = table[n - 1, 1:] + table[n - 1, :-1]
    return table.float()


def compute_relocation(opacities: Tensor, scales: Tensor, ratios: Tensor, binoms: Tensor) -> tuple[Tensor, Tensor]:
    """Opacity and scale for each of ``n`` copies of a Gaussian so that together they render like
    the original (Eq. 9 of "3D Gaussian Splatting as Markov Chain Monte Carlo"; torch port of
    gsplat's ``relocation_kernel``).

    Args:
        opacities: ``[N]`` post-sigmoid opacities.
        scales: ``[N,3]`` post-exp scales.
        ratios: ``[N]`` number of copies n (clamped to [1, n_max]).
        binoms: ``[n_max, n_max]`` binomial table.

    Returns:
        ``new_opacities [N] = 1 - (1 - o)^(1/n)`` and ``new_scales [N,3] = o / D * scales`` with
        ``D = sum_{i=1..n} sum_{k=0..i-1} C(i-1, k) (-1)^k / sqrt(k+1) * new_o^(k+1)``.
    """
    n_max = binoms.shape[0]
    n = ratios.clamp(1, n_max).long()
    # float64: the alternating sum cancels; the CUDA kernel's float32 loop is accurate only because
    # new_o is small for large n, which we don't want to rely on.
    opa = opacities.double()
    new_opa = 1.0 - (1.0 - opa) ** (1.0 / n.double())
    # Swap the sums: D = sum_k (sum_{i=k+1..n} C(i-1, k)) (-1)^k / sqrt(k+1) new_o^(k+1); the inner
    # sum is a cumulative sum down the table's column k, read at row n-1. One [N] vector per k
    # keeps memory at O(N) for a million relocations.
    col_sums = binoms.double().cumsum(dim=0)[n - 1]  # [N, n_max]
    denom = torch.zeros_like(opa)
    power = new_opa.clone()
    for k in range(n_max):
        denom += col_sums[:, k] * ((-1.0) ** k / (k + 1) ** 0.5) * power
        power = power * new_opa
    new_scales = (opa / denom)[:, None] * scales.double()
    return new_opa.to(opacities.dtype), new_scales.to(scales.dtype)


def multinomial_sample(weights: Tensor, n: int) -> Tensor:
    """``n`` indices drawn with replacement with probability proportional to ``weights [N]``."""
    if weights.numel() <= 2**24:
        return torch.multinomial(weights, n, replacement=True)
    # torch.multinomial refuses more than 2^24 categories; numpy has no such limit.
    p = (weights / weights.sum()).double().cpu().numpy()
    return torch.from_numpy(np.random.choice(len(p), size=n, p=p / p.sum())).to(weights.device)


def _relocated_values(params: Params, sampled: Tensor, binoms: Tensor, min_opacity: float) -> tuple[Tensor, Tensor]:
    """Raw (logit opacity, log scale) for live Gaussians that are sampled as copy sources."""
    opacities = torch.sigmoid(params["opacities"]).flatten()
    new_opa, new_scales = compute_relocation(
        opacities[sampled],
        torch.exp(params["scales"])[sampled],
        torch.bincount(sampled)[sampled] + 1,  # the source itself plus each time it was drawn
        binoms,
    )
    eps = torch.finfo(torch.float32).eps
    return torch.logit(new_opa.clamp(min=min_opacity, max=1.0 - eps)), torch.log(new_scales)


def _with_shared_source_values(name: str, p: Tensor, sampled: Tensor, logit_opa: Tensor, log_scales: Tensor) -> Tensor:
    """Copy of parameter ``p`` whose ``sampled`` source rows get the opacity / scale they will share
    with their copies (other parameters are copied unchanged)."""
    p = p.clone()
    if name == "opacities":
        p[sampled] = logit_opa.reshape(p[sampled].shape)
    elif name == "scales":
        p[sampled] = log_scales
    return p


@torch.no_grad()
def relocate(
    params: Params,
    optimizer: torch.optim.Optimizer | None,
    state: RunningState | None,
    mask: Tensor,
    binoms: Tensor,
    min_opacity: float = 0.005,
    weights: Tensor | None = None,
) -> None:
    """Move every dead Gaussian (``mask``) onto a live one drawn by opacity (or by ``weights [N]``);
    the source and its copies share its opacity and scale so they render as before. N stays the
    same; the Adam moments of the source rows are zeroed (as gsplat; the dead rows' moments are left
    as they were)."""
    dead = mask.nonzero(as_tuple=True)[0]
    alive = (~mask).nonzero(as_tuple=True)[0]
    if len(dead) == 0 or len(alive) == 0:
        return
    if weights is None:
        weights = torch.sigmoid(params["opacities"]).flatten()
    sampled = alive[multinomial_sample(weights[alive], len(dead))]
    logit_opa, log_scales = _relocated_values(params, sampled, binoms, min_opacity)

    def param_fn(name: str, p: Tensor) -> Tensor:
        p = _with_shared_source_values(name, p, sampled, logit_opa, log_scales)
        p[dead] = p[sampled]
        return p

    def optimizer_fn(key: str, v: Tensor) -> Tensor:
        v = v.clone()
        v[sampled] = 0
        return v

    update_param_with_optimizer(param_fn, optimizer_fn, params, optimizer)
    for value in (state or {}).values():
        if isinstance(value, Tensor):
            value[sampled] = 0


@torch.no_grad()
def sample_add(
    params: Params,
    optimizer: torch.optim.Optimizer | None,
    state: RunningState | None,
    n: int,
    binoms: Tensor,
    min_opacity: float = 0.005,
    weights: Tensor | None = None,
) -> None:
    """Append ``n`` copies of Gaussians drawn by opacity (MCMC growth; or by ``weights [N]``),
    sharing opacity and scale with their source as in :func:`relocate`. New rows get zero moments."""
    if weights is None:
        weights = torch.sigmoid(params["opacities"]).flatten()
    sampled = multinomial_sample(weights, n)
    logit_opa, log_scales = _relocated_values(params, sampled, binoms, min_opacity)

    def param_fn(name: str, p: Tensor) -> Tensor:
        p = _with_shared_source_values(name, p, sampled, logit_opa, log_scales)
        return torch.cat([p, p[sampled]])

    update_param_with_optimizer(param_fn, lambda key, v: torch.cat([v, _zeros_like_rows(v, n)]), params, optimizer)
    _edit_state(state, lambda v: torch.cat([v, _zeros_like_rows(v, n)]))


def _native_loaded() -> bool:
    from ..renderer.native._build import is_loaded  # here: the renderer package is not a dependency of ops

    return is_loaded()


@torch.no_grad()
def inject_noise_to_position(params: Params, scaler: float) -> None:
    """MCMC exploration noise: ``means += Sigma @ eps * sigmoid(100 (1 - o - 0.995)) * scaler``.

    The gate is ~1 only for nearly transparent Gaussians, so opaque ones barely move; the noise
    follows each Gaussian's covariance so it moves along its own extent. On CUDA one Triton kernel
    (``kernels/mcmc_noise.py``), on the CPU the native extension's one pass, compute the same from
    the same ``eps`` (``device_policy.position_noise_backend``); the torch code below is the reference.
    """
    means = params["means"]
    eps = torch.randn_like(means)
    backend = device_policy.position_noise_backend(means.device, _native_loaded)
    if backend == "triton":
        from ..kernels.mcmc_noise import add_position_noise

        add_position_noise(means, params["quats"], params["scales"], params["opacities"], eps, scaler)
        return
    if backend == "native" and all(
        params[k].dtype == torch.float32 and params[k].is_contiguous()
        for k in ("means", "quats", "scales", "opacities")
    ):
        from ..renderer.native._build import load_extension

        load_extension().add_position_noise(means, params["quats"], params["scales"], params["opacities"], eps, scaler)
        return
    opacities = torch.sigmoid(params["opacities"].flatten())
    covars = covariance(params["quats"], torch.exp(params["scales"]))
    gate = torch.sigmoid(100.0 * ((1.0 - opacities) - 0.995))
    noise = eps * gate[:, None] * scaler
    means.add_(torch.einsum("bij,bj->bi", covars, noise))
