"""MCMC's position noise in the native extension against strategy/ops.py's torch code, per build variant.

The draws are the same (``eps`` is passed in), so the two differ only by float rounding: the
native pass forms ``M (M^T eps)`` where torch builds ``Sigma`` and multiplies, and flushes
subnormal products to zero (the torch reference keeps them; both are far below a mean's ulp).
"""

from __future__ import annotations

import numpy as np
import torch

from pointrix_lite.renderer.native import _build
from pointrix_lite.strategy import ops

from .native_required import require_native
from .variants import native_variant  # noqa: F401 (autouse: every test runs once per build variant)

require_native(allow_module_level=True)  # compiles on first use

N = 40_013  # three 16384-row chunks (two threads take them), the last one partial


def _params(logits: torch.Tensor) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(3)
    n = logits.shape[0]
    return {
        "means": torch.randn(n, 3, generator=g) * 2,
        "quats": torch.randn(n, 4, generator=g),
        "scales": torch.randn(n, 3, generator=g) * 0.5 - 2,
        "opacities": logits.reshape(n, 1).clone(),
    }


def _reference(params: dict[str, torch.Tensor], eps: torch.Tensor, scaler: float) -> torch.Tensor:
    gate = torch.sigmoid(100.0 * ((1.0 - torch.sigmoid(params["opacities"].flatten())) - 0.995))
    covars = ops.covariance(params["quats"], torch.exp(params["scales"]))
    return params["means"] + torch.einsum("bij,bj->bi", covars, eps * gate[:, None] * scaler)


def test_native_noise_equals_the_torch_code() -> None:
    g = torch.Generator().manual_seed(4)
    # Opacities from transparent (the gate open) through the band where the gate is subnormal (~0.83
    # to ~0.9) to opaque (the gate 0), and a zero quaternion (F.normalize's eps keeps it finite).
    logits = torch.cat([torch.randn(N - 3000, generator=g) * 3 - 2, torch.linspace(1.4, 2.4, 3000)])
    params = _params(logits)
    params["quats"][7] = 0.0
    eps = torch.randn(N, 3, generator=g)
    ref = _reference(params, eps, 80.0)
    moved = (ref - params["means"]).abs()
    assert float(moved.max()) > 1.0 and int((moved[: N - 3000] > 1e-3).sum()) > 1000  # the gate opened
    out = params["means"].clone()
    _build.load_extension().add_position_noise(out, params["quats"], params["scales"], params["opacities"], eps, 80.0)
    # The steps themselves agree to float rounding of the largest one (the means add their own ulp).
    delta, ref_delta = out - params["means"], ref - params["means"]
    torch.testing.assert_close(delta, ref_delta, rtol=1e-4, atol=2e-6 * float(moved.max()))
    assert torch.equal(out[-1000:], params["means"][-1000:])  # opacity > 0.9: the gate is 0 on both


def test_strategy_takes_the_native_pass_and_restores_the_fpu_mode(monkeypatch) -> None:
    g = torch.Generator().manual_seed(5)
    params = _params(torch.randn(N, generator=g) * 3 - 4)
    before = params["means"].clone()
    torch.manual_seed(9)
    eps = torch.randn_like(before)  # the draw inject_noise_to_position makes after the same seed
    calls = []
    real = _build.load_extension()

    class Spy:
        def add_position_noise(self, *args):
            calls.append(len(args))
            return real.add_position_noise(*args)

    monkeypatch.setattr(_build, "load_extension", lambda: Spy())
    torch.manual_seed(9)
    ops.inject_noise_to_position(params, scaler=7.0)
    assert calls == [6]
    torch.testing.assert_close(params["means"], _reference({**params, "means": before}, eps, 7.0), rtol=1e-6, atol=1e-6)
    # The caller's thread still computes subnormals (the flush is undone when the call returns).
    tiny = np.float32(1e-38)
    assert np.float32(tiny * np.float32(0.25)) > 0 and float(torch.tensor(1e-38) * 0.25) > 0


def test_strategy_keeps_torch_where_the_native_pass_cannot_take_the_tensors() -> None:
    params = {k: v.double() for k, v in _params(torch.randn(64, generator=torch.Generator().manual_seed(6))).items()}
    before = params["means"].clone()
    torch.manual_seed(1)
    eps = torch.randn_like(before)
    torch.manual_seed(1)
    ops.inject_noise_to_position(params, scaler=3.0)  # float64: the torch code, no error
    torch.testing.assert_close(params["means"], _reference({**params, "means": before}, eps, 3.0))
