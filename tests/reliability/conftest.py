"""Fixtures of the reliability tests: one tiny scene per session, the rasterizer backend to use."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from pointrix_lite.components import import_all

from .scene import write_tiny_scene

import_all()  # the real components (GaussianModel, GaussianRenderer, DefaultStrategy, datasets)


@pytest.fixture(scope="session")
def tiny_scene(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_scene(tmp_path_factory.mktemp("tiny_scene"))


def _native_grads(scene: Path) -> dict[str, torch.Tensor]:
    from pointrix_lite.data.nerf_synthetic import NerfSyntheticDataset
    from pointrix_lite.model.gaussian_model import GaussianModel
    from pointrix_lite.renderer.renderer import GaussianRenderer

    dataset = NerfSyntheticDataset(NerfSyntheticDataset.Config(data_path=str(scene), random_init_points=300))
    model = GaussianModel(GaussianModel.Config(sh_degree=1), dataset=dataset)
    out = GaussianRenderer(GaussianRenderer.Config(backend="native"))(
        model, [v.camera for v in dataset.train_views[:2]], dataset.background
    )
    (out["rgb"] * torch.linspace(0, 1, out["rgb"].numel()).reshape(out["rgb"].shape)).sum().backward()
    return {k: p.grad.clone() for k, p in model.params.items()}


@pytest.fixture(scope="session")
def backend(tiny_scene: Path) -> str:
    """``native`` when the C++ rasterizer is built and bit-reproducible here, else ``torch``.

    Exact resume compares runs bit for bit, so the backend must give identical gradients for
    identical inputs (an OpenMP reduction in a varying order would not). Checked, not assumed:
    two backward passes on the same input must agree exactly. The native backend is ~10x faster.
    """
    from pointrix_lite.renderer import native

    if not native.is_available():
        return "torch"
    a, b = _native_grads(tiny_scene), _native_grads(tiny_scene)
    return "native" if all(torch.equal(a[k], b[k]) for k in a) else "torch"
