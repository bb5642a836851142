"""Depth and normal maps (geometry/maps.py) against analytic surfaces."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pointrix_lite.data.cameras import Camera, look_at
from pointrix_lite.geometry.maps import gaussian_normals, normals_from_depth, view_maps
from pointrix_lite.renderer import GaussianRenderer

SIZE = 64


def camera(eye) -> Camera:
    viewmat = torch.from_numpy(look_at(np.asarray(eye, float), np.zeros(3))).float()
    return Camera(60.0, 60.0, SIZE / 2, SIZE / 2, SIZE, SIZE, viewmat, "cam")


class FlatPlane:
    """Flat, nearly opaque Gaussians tiling the plane z = 0 over [-2, 2]^2, each tilted a different way
    about its own normal (the shortest axis must still come out as the plane's normal)."""

    def __init__(self) -> None:
        xs = torch.linspace(-2, 2, 81)
        gx, gy = torch.meshgrid(xs, xs, indexing="ij")
        n = gx.numel()
        self.means = torch.stack([gx.ravel(), gy.ravel(), torch.zeros(n)], -1)
        yaw = torch.rand(n, generator=torch.Generator().manual_seed(0)) * np.pi  # a turn about z
        self.quats = torch.stack([torch.cos(yaw / 2), torch.zeros(n), torch.zeros(n), torch.sin(yaw / 2)], -1)
        self.scales = torch.tensor([0.06, 0.05, 0.001]).expand(n, 3).clone()

    def render_params(self) -> dict:
        n = len(self.means)
        colors = torch.full((n, 1, 3), 0.5)
        return {"means": self.means, "quats": self.quats, "scales": self.scales,
                "opacities": torch.full((n,), 0.99), "colors": colors, "sh_degree": 0}  # fmt: skip


def plane_depth(cam: Camera) -> np.ndarray:
    """z-depth of the plane z = 0 through each pixel centre of ``cam``."""
    vm = cam.viewmat.double().numpy()
    R, t = vm[:3, :3], vm[:3, 3]
    eye = -R.T @ t
    v, u = np.meshgrid(np.arange(SIZE) + 0.5, np.arange(SIZE) + 0.5, indexing="ij")
    rays_cam = np.stack([(u - cam.cx) / cam.fx, (v - cam.cy) / cam.fy, np.ones_like(u)], -1)
    rays = rays_cam @ R  # world directions, z-component per unit camera depth
    return -eye[2] / rays[..., 2]


def test_gaussian_normals_are_the_shortest_axis():
    plane = FlatPlane()
    n = gaussian_normals(plane.quats, plane.scales)
    torch.testing.assert_close(n.abs(), torch.tensor([0.0, 0.0, 1.0]).expand_as(n), atol=1e-6, rtol=0)


def test_normals_from_depth_of_a_plane():
    cam = camera([2.0, -1.0, 2.5])
    depth = torch.from_numpy(plane_depth(cam)).float()
    n = normals_from_depth(depth, cam.K)
    expected = cam.viewmat[:3, :3] @ torch.tensor([0.0, 0.0, 1.0])  # the plane's normal, towards the camera (above)
    inner = n[1:-1, 1:-1].reshape(-1, 3)
    torch.testing.assert_close(inner, expected.expand_as(inner), atol=2e-3, rtol=0)
    assert (n[0] == 0).all() and (n[:, -1] == 0).all()  # no neighbours on the border


# Expected depth blends the Gaussians' centre depths (gsplat's ED), not where the ray meets each disc: seen
# obliquely, the nearer discs' centres cover a pixel first, up to a disc's footprint nearer than the plane.
@pytest.mark.parametrize("eye, depth_tol", [([0.3, -0.2, 3.0], 0.01), ([2.0, -1.0, 2.0], 0.04)])
def test_view_maps_of_a_flat_plane(eye, depth_tol):
    cam = camera(eye)
    maps = view_maps(FlatPlane(), GaussianRenderer(GaussianRenderer.Config(backend="torch")), cam, (1.0, 1.0, 1.0))
    alpha = maps["alpha"]
    inside = alpha > 0.99
    assert inside.float().mean() > 0.5
    truth = torch.from_numpy(plane_depth(cam)).float()
    rel = ((maps["depth"] - truth).abs() / truth)[inside]
    assert rel.max() < depth_tol, rel.max()
    expected = cam.viewmat[:3, :3] @ torch.tensor([0.0, 0.0, 1.0])
    for key in ("normal_gaussians", "normal_depth"):
        got = maps[key][inside]
        got = got[got.norm(dim=-1) > 0]
        cos = got @ expected
        assert cos.min() > 0.99, (key, cos.min())
