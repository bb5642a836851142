"""Every choice of a CPU-only implementation is made by device (pointrix_lite/device_policy.py).

The decisions take a ``torch.device``, so the CUDA ones are checked here without a GPU; that the
torch paths chosen for CUDA compute what the CPU kernels compute is tested where each lives
(tests/model/test_adam.py, tests/metrics/test_ssim_native.py, tests/renderer/test_gsplat_on_cpu.py).
"""

from __future__ import annotations

import importlib
import warnings
from pathlib import Path

import pytest
import torch

from pointrix_lite import device_policy as policy

CUDA, CPU, MPS = torch.device("cuda"), torch.device("cpu"), torch.device("mps")


def _never() -> bool:
    raise AssertionError("asked whether the native extension is available for a non-CPU device (it may compile)")


def test_rasterizer_backend_by_device() -> None:
    assert policy.rasterizer_backend(CUDA, _never) == "gsplat"
    assert policy.rasterizer_backend("cuda:1", _never) == "gsplat"
    assert policy.rasterizer_backend(CPU, lambda: True) == "native"
    assert policy.rasterizer_backend(CPU, lambda: False) == "torch"
    assert policy.rasterizer_backend(MPS, _never) == "torch"  # the native kernels read host memory


def test_auto_backend_sends_non_cpu_tensors_past_the_native_extension(monkeypatch) -> None:
    entry = importlib.import_module("pointrix_lite.renderer.rasterization")  # the module, not the function
    monkeypatch.setattr(entry, "_native_available", _never)
    monkeypatch.setattr(entry, "_warned_torch_fallback", False)
    means = torch.empty(4, 3, device="meta")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the slow-CPU-fallback warning is for CPU tensors only
        assert entry._resolve_backend("auto", means) == "torch"
    assert entry._resolve_backend("native", means) == "native"  # an explicit choice is kept


def test_ssim_backend_by_device(monkeypatch) -> None:
    assert policy.ssim_backend(CUDA, lambda: True) == "triton"  # the fused kernels (kernels/ssim.py)
    assert policy.ssim_backend(CPU, lambda: True) == "native"
    assert policy.ssim_backend(CPU, lambda: False) == "torch"  # a loss never starts a compile
    assert policy.ssim_backend(MPS, lambda: True) == "torch"
    assert policy.position_noise_backend(CUDA, lambda: True) == "triton"
    assert policy.position_noise_backend(CPU, lambda: True) == "native"
    assert policy.position_noise_backend(CPU, lambda: False) == "torch"  # a strategy never starts a compile
    assert policy.position_noise_backend(MPS, lambda: True) == "torch"
    monkeypatch.setattr(policy.kernels, "available", lambda: False)  # a CUDA torch without triton
    assert policy.ssim_backend(CUDA, lambda: True) == "torch"
    assert policy.position_noise_backend(CUDA, lambda: True) == "torch"


def test_ssim_auto_takes_the_policys_choice(monkeypatch) -> None:
    from pointrix_lite.metrics import ssim_native

    img = torch.rand(1, 16, 16, 3)
    monkeypatch.setattr("pointrix_lite.renderer.native._build.is_loaded", lambda: True)
    assert ssim_native.native_applies(img, img, 11)
    monkeypatch.setattr(policy, "ssim_backend", lambda device, loaded: "torch")
    assert not ssim_native.native_applies(img, img, 11)
    meta = torch.empty(1, 16, 16, 3, device="meta")
    monkeypatch.undo()
    assert not ssim_native.native_applies(meta, meta, 11)


def test_fused_adam_by_device() -> None:
    assert policy.fused_adam([CPU, "cpu"]) is True
    assert policy.fused_adam([CUDA, "cuda:0"]) is True  # one pass per tensor instead of one per op
    assert policy.fused_adam([CPU, CUDA]) is None
    assert policy.fused_adam([MPS]) is None
    from pointrix_lite.model.optimizer import build_adam

    params = {"means": torch.nn.Parameter(torch.zeros(3, 3)), "scales": torch.nn.Parameter(torch.zeros(3, 3))}
    opt = build_adam(params, {"means": 1e-3, "scales": 1e-3})
    assert all(group["fused"] is True for group in opt.param_groups)


def test_pinning_by_device_and_the_trainer_asks_the_policy(monkeypatch, tmp_path) -> None:
    assert policy.pin_host_images(CUDA) and not policy.pin_host_images(CPU)

    from pointrix_lite.data import cameras

    pinned = []
    monkeypatch.setattr(cameras, "pin_images", lambda views: pinned.append(len(views)))
    trainer = _tiny_trainer(tmp_path / "cpu")
    assert pinned == [] and not trainer.dataset.train_views[0].image.is_pinned()
    monkeypatch.setattr(policy, "pin_host_images", lambda device: True)
    trainer = _tiny_trainer(tmp_path / "pinned")
    assert pinned == [len(trainer.dataset.train_views)] and pinned[0] > 0


def test_pin_images_pins_host_images_once(monkeypatch) -> None:
    from pointrix_lite.data.cameras import View, pin_images

    calls = []

    def fake_pin(self: torch.Tensor) -> torch.Tensor:  # pin_memory() itself needs a CUDA runtime
        calls.append(self.shape)
        return self.clone()

    monkeypatch.setattr(torch.Tensor, "pin_memory", fake_pin)
    views = [View(camera=None, image=torch.zeros(4, 5, 3, dtype=torch.uint8), name=f"v{i}", index=i) for i in range(3)]
    views.append(View(camera=None, image=torch.zeros(4, 5, 3, dtype=torch.uint8, device="meta"), name="gpu", index=3))
    pin_images(views)
    assert calls == [(4, 5, 3)] * 3  # the image already off the host is left alone


def test_float_image_travels_as_stored_and_converts_where_it_lands() -> None:
    from pointrix_lite.data.cameras import View

    img = torch.arange(60, dtype=torch.uint8).reshape(4, 5, 3)
    view = View(camera=None, image=img, name="v", index=0)
    assert torch.equal(view.float_image("cpu"), img.float() / 255.0)
    moved = view.float_image("meta")  # any non-CPU device: converted there, not before the copy
    assert moved.device.type == "meta" and moved.dtype == torch.float32 and moved.shape == (4, 5, 3)


def _tiny_trainer(exp_dir):
    from pointrix_lite.components import import_all
    from pointrix_lite.engine.experiment import load_experiment
    from pointrix_lite.engine.trainer import DefaultTrainer

    import_all()
    cfg = load_experiment(
        Path(__file__).resolve().parents[1] / "configs" / "demo.yaml",
        [f"exp_dir={exp_dir}", "trainer.max_steps=1", "writers=[]", "dataset.scale=8"],
    )
    return DefaultTrainer(cfg, exp_dir, "cpu")


@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_gsplat_runs_on_cuda_only(device: str) -> None:
    assert not policy.gsplat_runs_on(device)
    assert policy.gsplat_runs_on("cuda") and policy.gsplat_runs_on(torch.device("cuda", 0))
