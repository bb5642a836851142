"""The Triton GPU kernels against their torch references: on CUDA as compiled (``-m cuda``), and
in CI, which has no GPU, the same kernel source under Triton's interpreter on CPU tensors (in a
subprocess: the interpreter is chosen when triton is first imported)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pointrix_lite import kernels
from tests.kernels import checks
from tests.renderer.cuda_required import needs_cuda

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(not kernels.available(), reason="triton is not installed")


@pytest.fixture(scope="module")
def interpreted() -> dict[str, dict[str, float]]:
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": path}
    out = subprocess.run(
        [sys.executable, str(REPO / "tests" / "kernels" / "checks.py"), "cpu"],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def _assert_ssim(found: dict[str, float]) -> None:
    assert found["ssim"] < 2e-6 and found["l1"] < 1e-6, found
    assert found["grad_rel"] < 1e-4, found  # of the largest gradient entry


def _assert_noise(found: dict[str, float]) -> None:
    assert found["moved"] > 1e-3, found  # the gate opened: the comparison saw real noise
    assert found["abs"] < 1e-5 * max(1.0, found["moved"]), found


def test_fused_ssim_l1_matches_torch_interpreted(interpreted) -> None:
    _assert_ssim(interpreted["ssim"])
    assert interpreted["ssim_without_grad"] == {"ssim": 0.0, "l1": 0.0}


def _assert_ssim_masked(found: dict) -> None:
    _assert_ssim(found)
    assert found["ignored_grad"] == 0.0, found  # an ignored pixel gets no gradient at all
    assert found["full_vs_plain"] < 1e-6, found  # a mask that keeps everything: the unmasked terms
    assert found["empty"] == [1.0, 0.0, 0.0], found  # nothing kept: SSIM 1, L1 0, no gradient


def test_fused_ssim_l1_masked_matches_torch_interpreted(interpreted) -> None:
    _assert_ssim_masked(interpreted["ssim_masked"])


def test_position_noise_matches_torch_interpreted(interpreted) -> None:
    _assert_noise(interpreted["noise"])


@needs_cuda
def test_fused_ssim_l1_matches_torch_on_cuda() -> None:  # pragma: no cover - no GPU in CI
    _assert_ssim(checks.check_ssim("cuda"))
    assert checks.check_ssim_without_grad("cuda") == {"ssim": 0.0, "l1": 0.0}


@needs_cuda
def test_fused_ssim_l1_masked_matches_torch_on_cuda() -> None:  # pragma: no cover - no GPU in CI
    _assert_ssim_masked(checks.check_ssim_masked("cuda"))
    assert checks.masked_loss_route("cuda") == "FusedSsimL1Backward"  # a masked step takes these kernels


@needs_cuda
def test_position_noise_matches_torch_on_cuda() -> None:  # pragma: no cover - no GPU in CI
    _assert_noise(checks.check_noise("cuda"))
