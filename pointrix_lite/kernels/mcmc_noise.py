"""MCMC's exploration noise on the means in one Triton kernel (``strategy/ops.py``'s torch code
is the reference and the CPU path).

``means += Sigma @ (eps * gate * scaler)`` with ``Sigma = R S S^T R^T``: torch builds every
covariance (normalise, ~25 elementwise ops for the rotation matrix, a stack) and multiplies them
with two batched 3x3 matrix products, a cuBLAS GEMM of ~1.8 ms per step at 1M Gaussians on an
H100. Here each Gaussian's ``M = R S`` stays in registers and ``Sigma eps = M (M^T eps)``. The
noise ``eps`` is drawn by torch (``randn_like``) before the call, so a run consumes the same random
numbers on either path.
"""

from __future__ import annotations

import triton
import triton.language as tl
from torch import Tensor

from . import jit

BLOCK = 512


def _add_noise(
    means_ptr,
    quats_ptr,
    log_scales_ptr,
    logits_ptr,
    eps_ptr,
    n,
    scaler,
    sm,
    sq,
    ss,
    so,
    se,
    BLOCK: tl.constexpr,
):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    qw = tl.load(quats_ptr + i * sq, mask=m, other=1.0)
    qx = tl.load(quats_ptr + i * sq + 1, mask=m, other=0.0)
    qy = tl.load(quats_ptr + i * sq + 2, mask=m, other=0.0)
    qz = tl.load(quats_ptr + i * sq + 3, mask=m, other=0.0)
    norm = tl.maximum(tl.sqrt(qw * qw + qx * qx + qy * qy + qz * qz), 1e-12)  # F.normalize's eps
    w, x, y, z = qw / norm, qx / norm, qy / norm, qz / norm
    s0 = tl.exp(tl.load(log_scales_ptr + i * ss, mask=m, other=0.0))
    s1 = tl.exp(tl.load(log_scales_ptr + i * ss + 1, mask=m, other=0.0))
    s2 = tl.exp(tl.load(log_scales_ptr + i * ss + 2, mask=m, other=0.0))
    # M = R diag(s): column j of the rotation times s_j
    m00 = (1.0 - 2.0 * (y * y + z * z)) * s0
    m01 = 2.0 * (x * y - w * z) * s1
    m02 = 2.0 * (x * z + w * y) * s2
    m10 = 2.0 * (x * y + w * z) * s0
    m11 = (1.0 - 2.0 * (x * x + z * z)) * s1
    m12 = 2.0 * (y * z - w * x) * s2
    m20 = 2.0 * (x * z - w * y) * s0
    m21 = 2.0 * (y * z + w * x) * s1
    m22 = (1.0 - 2.0 * (x * x + y * y)) * s2
    opacity = tl.sigmoid(tl.load(logits_ptr + i * so, mask=m, other=0.0))
    gate = tl.sigmoid(100.0 * ((1.0 - opacity) - 0.995)) * scaler
    e0 = tl.load(eps_ptr + i * se, mask=m, other=0.0) * gate
    e1 = tl.load(eps_ptr + i * se + 1, mask=m, other=0.0) * gate
    e2 = tl.load(eps_ptr + i * se + 2, mask=m, other=0.0) * gate
    v0 = m00 * e0 + m10 * e1 + m20 * e2  # M^T eps
    v1 = m01 * e0 + m11 * e1 + m21 * e2
    v2 = m02 * e0 + m12 * e1 + m22 * e2
    p = means_ptr + i * sm
    tl.store(p, tl.load(p, mask=m, other=0.0) + (m00 * v0 + m01 * v1 + m02 * v2), mask=m)
    tl.store(p + 1, tl.load(p + 1, mask=m, other=0.0) + (m10 * v0 + m11 * v1 + m12 * v2), mask=m)
    tl.store(p + 2, tl.load(p + 2, mask=m, other=0.0) + (m20 * v0 + m21 * v1 + m22 * v2), mask=m)


def add_position_noise(
    means: Tensor, quats: Tensor, log_scales: Tensor, logits: Tensor, eps: Tensor, scaler: float
) -> None:
    """``means [N,3] += Sigma_i (eps_i * gate_i * scaler)`` in place, ``gate = sigmoid(100 (1 - o - 0.995))``,
    ``o = sigmoid(logits [N])``, ``Sigma`` from raw ``quats [N,4]`` (wxyz) and ``log_scales [N,3]``,
    ``eps [N,3]`` standard normal. Rows must be contiguous (stride 1 within a row)."""
    n = means.shape[0]
    for name, t in (("means", means), ("quats", quats), ("scales", log_scales), ("eps", eps)):
        if t.stride(-1) != 1:
            raise ValueError(f"add_position_noise: {name} rows must be contiguous, got strides {tuple(t.stride())}")
    logits = logits.reshape(n)
    jit(_add_noise)[(triton.cdiv(n, BLOCK),)](
        means,
        quats,
        log_scales,
        logits,
        eps,
        n,
        float(scaler),
        means.stride(0),
        quats.stride(0),
        log_scales.stride(0),
        logits.stride(0),
        eps.stride(0),
        BLOCK=BLOCK,
    )
