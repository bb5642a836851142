"""What a CUDA run builds before its first step (GaussianRenderer.prepare): gsplat's kernels, with a
line before and after a build, and the Triton kernels; nothing of the CPU path, and vice versa."""

from __future__ import annotations

import sys
import types

import pytest
import torch

from pointrix_lite import kernels
from pointrix_lite.errors import ConfigError
from pointrix_lite.renderer import gsplat_backend
from pointrix_lite.renderer.renderer import GaussianRenderer


def _fake_backend(monkeypatch, c_module) -> None:
    fake = types.ModuleType("gsplat.cuda._backend")
    fake._C = c_module
    monkeypatch.setitem(sys.modules, "gsplat.cuda._backend", fake)


def test_a_pending_build_is_announced_before_and_after(monkeypatch) -> None:
    monkeypatch.setattr(gsplat_backend, "_pending_gsplat_build", lambda: "/cache/gsplat_cuda")
    _fake_backend(monkeypatch, object())
    lines: list[str] = []
    gsplat_backend.prepare_gsplat(lines.append)
    assert len(lines) == 2
    assert (
        lines[0].startswith("building gsplat's CUDA kernels (first run on this machine")
        and "/cache/gsplat_cuda" in lines[0]
    )
    assert lines[1].startswith("built gsplat's CUDA kernels in ")


def test_a_loaded_build_says_nothing_and_a_missing_toolkit_is_one_line(monkeypatch) -> None:
    monkeypatch.setattr(gsplat_backend, "_pending_gsplat_build", lambda: None)
    _fake_backend(monkeypatch, object())
    lines: list[str] = []
    gsplat_backend.prepare_gsplat(lines.append)
    assert lines == []
    _fake_backend(monkeypatch, None)  # gsplat found no nvcc to build with
    with pytest.raises(ConfigError, match=r"^renderer.backend: gsplat's CUDA kernels are not built .*nvcc") as err:
        gsplat_backend.prepare_gsplat(lines.append)
    assert "\n" not in str(err.value)


def test_pending_build_is_the_folder_without_a_library(monkeypatch, tmp_path) -> None:
    import importlib.util

    import torch.utils.cpp_extension as cpp

    monkeypatch.delitem(sys.modules, "gsplat.cuda._backend", raising=False)
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "gsplat.csrc" else real_find_spec(name, *a)
    )
    monkeypatch.setattr(cpp, "_get_build_directory", lambda name, verbose: str(tmp_path / name))
    assert gsplat_backend._pending_gsplat_build() == str(tmp_path / "gsplat_cuda")
    (tmp_path / "gsplat_cuda").mkdir()
    (tmp_path / "gsplat_cuda" / "gsplat_cuda.so").write_bytes(b"")
    assert gsplat_backend._pending_gsplat_build() is None


@pytest.mark.parametrize(
    ("device", "backend", "gsplat", "native"),
    [
        ("cuda", "auto", True, False),
        ("cuda", "gsplat", True, False),
        ("cpu", "auto", False, True),
        ("cpu", "torch", False, False),
    ],
)
def test_prepare_builds_only_what_the_device_needs(monkeypatch, device, backend, gsplat, native) -> None:
    from pointrix_lite.renderer import native as native_pkg

    calls: list[str] = []
    monkeypatch.setattr(gsplat_backend, "prepare_gsplat", lambda announce: calls.append("gsplat"))
    monkeypatch.setattr(native_pkg, "prepare", lambda announce: calls.append("native"))
    monkeypatch.setattr(kernels, "warm_up", lambda dev, announce: calls.append(f"triton:{dev.type}"))
    GaussianRenderer(GaussianRenderer.Config(backend=backend)).prepare(device, announce=print)
    assert ("gsplat" in calls) == gsplat and ("native" in calls) == native
    assert calls[-1] == f"triton:{torch.device(device).type}"  # warm_up itself skips a device it does not run on


def test_warm_up_does_nothing_off_cuda() -> None:
    lines: list[str] = []
    kernels.warm_up(torch.device("cpu"), lines.append)
    assert lines == []


def test_kernels_that_do_not_compile_leave_torch_in_charge(monkeypatch) -> None:
    """A triton that cannot compile on the machine: one line at setup, then the step's torch paths."""
    from pointrix_lite import device_policy

    monkeypatch.setattr(kernels, "_failed", None)
    monkeypatch.setattr(kernels, "runs_on", lambda device: kernels._failed is None)  # as on CUDA
    monkeypatch.setattr("pointrix_lite.kernels.ssim.ssim_l1", _broken_compiler)
    lines: list[str] = []
    kernels.warm_up(torch.device("cpu"), lines.append)
    assert lines == [
        "Triton kernels unavailable (ptxas not found); the CUDA step uses torch's SSIM and MCMC noise instead"
    ]
    monkeypatch.undo()  # the real runs_on, with the failure still recorded
    monkeypatch.setattr(kernels, "_failed", "no ptxas")
    assert not kernels.runs_on(torch.device("cuda"))
    assert device_policy.ssim_backend(torch.device("cuda"), lambda: False) == "torch"


def _broken_compiler(*args, **kwargs):
    raise RuntimeError("ptxas not found")
