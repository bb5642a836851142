"""Shared stand-ins and independent references for the model-side tests."""

from __future__ import annotations

from types import SimpleNamespace

import torch
import torch.nn.functional as F

from pointrix_lite.data.cameras import Camera, View
from pointrix_lite.data.pointcloud import PointCloud
from pointrix_lite.model import GaussianModel


def make_dataset(n: int = 50, extent: float = 2.0, seed: int = 0) -> SimpleNamespace:
    """Minimal object with the Dataset attributes the model reads."""
    g = torch.Generator().manual_seed(seed)
    cloud = PointCloud(xyz=torch.rand(n, 3, generator=g) * 2 - 1, rgb=torch.rand(n, 3, generator=g))
    return SimpleNamespace(point_cloud=cloud, scene_extent=extent)


def make_model(n: int = 50, sh_degree: int = 3, extent: float = 2.0, **cfg) -> GaussianModel:
    return GaussianModel(GaussianModel.Config(sh_degree=sh_degree, **cfg), make_dataset(n, extent))


def make_view(image: torch.Tensor, index: int = 0) -> View:
    """View around a uint8 ``[H,W,3]`` image with a simple pinhole camera at the origin."""
    h, w = image.shape[:2]
    cam = Camera(fx=float(w), fy=float(w), cx=w / 2, cy=h / 2, width=w, height=h, viewmat=torch.eye(4))
    return View(camera=cam, image=image, name=f"v{index}", index=index)


def inria_ssim(img1: torch.Tensor, img2: torch.Tensor, window_size: int = 11, sigma: float = 1.5) -> torch.Tensor:
    """INRIA 3DGS ``utils/loss_utils.py`` SSIM: 2-D window, zero padding window//2, mean of the map.

    Written with a full 2-D kernel (not separable) so it checks the separable implementation.
    Inputs ``[B,H,W,C]``.
    """
    x = img1.permute(0, 3, 1, 2).double()
    y = img2.permute(0, 3, 1, 2).double()
    c = x.shape[1]
    coords = torch.arange(window_size, dtype=torch.float64) - window_size // 2
    g = torch.exp(-(coords**2) / (2 * sigma**2))
    g = g / g.sum()
    window = (g[:, None] @ g[None, :]).expand(c, 1, window_size, window_size).contiguous()

    def conv(t: torch.Tensor) -> torch.Tensor:
        return F.conv2d(t, window, padding=window_size // 2, groups=c)

    mu1, mu2 = conv(x), conv(y)
    s11 = conv(x * x) - mu1**2
    s22 = conv(y * y) - mu2**2
    s12 = conv(x * y) - mu1 * mu2
    c1, c2 = 0.01**2, 0.03**2
    ssim_map = ((2 * mu1 * mu2 + c1) * (2 * s12 + c2)) / ((mu1**2 + mu2**2 + c1) * (s11 + s22 + c2))
    return ssim_map.mean()


def adam_rows_match(model: GaussianModel, optimizer: torch.optim.Optimizer) -> None:
    """Assert every group holds the model's parameter and its moments have the parameter's shape."""
    for group in optimizer.param_groups:
        (p,) = group["params"]
        assert p is model.params[group["name"]]
        state = optimizer.state.get(p, {})
        for key in ("exp_avg", "exp_avg_sq"):
            if key in state:
                assert state[key].shape == p.shape, (group["name"], key, state[key].shape, p.shape)


def take_adam_step(model: GaussianModel, optimizer: torch.optim.Optimizer, seed: int = 0) -> None:
    """One Adam step with random gradients so every row has non-zero moments."""
    g = torch.Generator().manual_seed(seed)
    for p in model.params.values():
        p.grad = torch.randn(p.shape, generator=g)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
