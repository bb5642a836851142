"""Fixed seeded scenes for the rasterizer benchmarks (``rasterizer``, ``viewer``), one dict of tensors each.

``small`` / ``large``: Gaussians filling a cube in front of one camera (the scenes every figure in
docs/native.md since issue 4 was measured on).

``photo540`` / ``photo1080``: what a trained real capture looks like to the rasterizer, at the sizes
people train at (960x540 landscape, 1080x1920 portrait phone video), 300k / 500k Gaussians, SH 3.
How they were chosen (from what trained 3DGS captures are known to contain, not fitted to one):

- Gaussians lie on surfaces, not in a volume: 45% on a ground plane (2 to 14 units ahead), 35% on
  twelve objects (spheres of radius 0.4-1.6 at depth 3-9), 20% on a distant background dome (radius
  30), which is where trained captures put their large, low-detail Gaussians.
- Sizes: flat surfels (third axis 0.2x) whose two tangent scales are the surface's point spacing
  times a log-normal factor (sigma 0.7), so neighbours overlap and a few Gaussians are several
  times larger than their spacing, as after densification; random orientation in the plane.
- Opacities bimodal as trained ones are: 65% in [0.6, 1.0], 35% in [0.02, 0.4].
- SH degree 3: a random base colour, higher bands 0.05 (view-dependent detail is small).
- Pinhole camera at the origin looking along +z, focal 0.85 x width (a ~60 degree horizontal field
  of view, a phone's main camera), slightly above the ground.

The resulting depth complexity (evaluations per pixel, printed by the benchmark) is set by the
opaque surfaces: most pixels stop after a few layers, as in a real capture.

``ply:PLY@COLMAP[#I]``: a model you trained, seen from a view of its dataset. On issue 23's trained
model (200k Gaussians, 800x800 views) nearly every (Gaussian, tile) pair is needed: 12 of a 4x4
block's 16 pixels blend at each step of the forward and few pixels run out of transmittance, where
the photo scenes above stop most pixels after a few layers. Measure speed work on both kinds.
"""

from __future__ import annotations

import math
from pathlib import Path

# name: (width, height, n_gaussians, sh_degree)
SCENES = {
    "small": (160, 160, 20_000, 3),
    "large": (400, 300, 200_000, 3),
    "photo540": (960, 540, 300_000, 3),
    "photo1080": (1080, 1920, 500_000, 3),
}


def make_scene(width: int, height: int, n: int, sh_degree: int, seed: int = 0) -> dict:
    """Gaussians filling a cube in front of one camera, sized like a trained scene's (a few px)."""
    import torch

    g = torch.Generator().manual_seed(seed)
    means = (torch.rand(n, 3, generator=g) * 2 - 1) * torch.tensor([1.2, 1.2, 1.0])
    spacing = (8.0 / n) ** (1 / 3)
    scales = torch.exp(torch.randn(n, 3, generator=g) * 0.4) * spacing * 0.5
    f = 1.0 * width
    viewmat = torch.eye(4)
    viewmat[2, 3] = 3.0  # camera 3 units behind the cube centre, looking along +z
    return dict(
        means=means,
        quats=torch.randn(n, 4, generator=g),
        scales=scales,
        opacities=torch.rand(n, generator=g) * 0.9 + 0.05,
        colors=torch.randn(n, (sh_degree + 1) ** 2, 3, generator=g) * 0.3,
        viewmats=viewmat[None],
        Ks=torch.tensor([[[f, 0, width / 2], [0, f, height / 2], [0, 0, 1]]]),
        width=width,
        height=height,
        sh_degree=sh_degree,
    )


def _frame_quats(normals, g):
    """Quaternions (wxyz) of rotations taking +z to ``normals``, then a random spin about it."""
    import torch

    z = torch.tensor([0.0, 0.0, 1.0])
    axis = torch.cross(z.expand_as(normals), normals, dim=-1)
    s = axis.norm(dim=-1, keepdim=True)
    c = (normals * z).sum(-1, keepdim=True)
    half = torch.atan2(s, c) / 2
    axis = torch.where(s > 1e-6, axis / s.clamp_min(1e-12), torch.tensor([1.0, 0.0, 0.0]))
    q_align = torch.cat([torch.cos(half), axis * torch.sin(half)], -1)
    spin = torch.rand(len(normals), 1, generator=g) * math.pi
    q_spin = torch.cat([torch.cos(spin), torch.zeros(len(normals), 2), torch.sin(spin)], -1)  # about z
    w1, v1 = q_align[:, :1], q_align[:, 1:]
    w2, v2 = q_spin[:, :1], q_spin[:, 1:]
    return torch.cat([w1 * w2 - (v1 * v2).sum(-1, keepdim=True), w1 * v2 + w2 * v1 + torch.cross(v1, v2, dim=-1)], -1)


def make_photo_scene(width: int, height: int, n: int, sh_degree: int, seed: int = 0) -> dict:
    """Surfel Gaussians on a ground plane, objects and a background dome (see the module docstring)."""
    import torch

    g = torch.Generator().manual_seed(seed)
    n_ground, n_obj = int(0.45 * n), int(0.35 * n)
    n_dome = n - n_ground - n_obj
    # ground: y = 1.2 below the camera (OpenCV: y down), x in +-8, z in 2..14
    gx = (torch.rand(n_ground, generator=g) * 2 - 1) * 8
    gz = 2 + torch.rand(n_ground, generator=g) * 12
    ground = torch.stack([gx, torch.full_like(gx, 1.2), gz], -1)
    ground_n = torch.tensor([0.0, -1.0, 0.0]).expand(n_ground, 3)
    ground_spacing = math.sqrt(16 * 12 / n_ground)
    # objects: twelve spheres
    k = 12
    centres = torch.stack(
        [
            (torch.rand(k, generator=g) * 2 - 1) * 3,
            torch.rand(k, generator=g) * 1.2 - 0.4,
            3 + torch.rand(k, generator=g) * 6,
        ],
        -1,
    )
    radii = 0.4 + torch.rand(k, generator=g) * 1.2
    which = torch.multinomial(radii**2, n_obj, replacement=True, generator=g)
    dirs = torch.randn(n_obj, 3, generator=g)
    dirs = dirs / dirs.norm(dim=-1, keepdim=True)
    objects = centres[which] + dirs * radii[which, None]
    obj_spacing = (4 * math.pi * (radii**2).sum().item() / n_obj) ** 0.5
    # background dome: the half sphere of radius 30 in front of the camera
    ddirs = torch.randn(n_dome, 3, generator=g)
    ddirs[:, 2] = ddirs[:, 2].abs() + 0.3
    ddirs = ddirs / ddirs.norm(dim=-1, keepdim=True)
    dome = ddirs * 30
    dome_spacing = (2 * math.pi * 30**2 / n_dome) ** 0.5

    means = torch.cat([ground, objects, dome])
    normals = torch.cat([ground_n, dirs, -ddirs])
    spacing = torch.cat(
        [
            torch.full((n_ground,), ground_spacing),
            torch.full((n_obj,), obj_spacing),
            torch.full((n_dome,), dome_spacing),
        ]
    )
    tangent = spacing[:, None] * torch.exp(torch.randn(n, 2, generator=g) * 0.7)
    scales = torch.cat([tangent, 0.2 * tangent.min(-1, keepdim=True).values], -1)
    opaque = torch.rand(n, generator=g) < 0.65
    opacities = torch.where(opaque, 0.6 + 0.4 * torch.rand(n, generator=g), 0.02 + 0.38 * torch.rand(n, generator=g))
    colors = torch.randn(n, (sh_degree + 1) ** 2, 3, generator=g) * 0.05
    colors[:, 0] = torch.rand(n, 3, generator=g) * 2 - 0.5
    f = 0.85 * width
    viewmat = torch.eye(4)
    viewmat[1, 3] = -0.3  # the ground is 0.9 units below the camera
    return dict(
        means=means,
        quats=_frame_quats(normals, g),
        scales=scales,
        opacities=opacities,
        colors=colors,
        viewmats=viewmat[None],
        Ks=torch.tensor([[[f, 0, width / 2], [0, f, height / 2], [0, 0, 1]]]),
        width=width,
        height=height,
        sh_degree=sh_degree,
    )


# A trained model as a scene: "ply:PLY@COLMAP[#I]", PLY a 3DGS PLY (scripts/train.py's
# point_cloud.ply), COLMAP a folder with sparse/ whose I-th image by name (default 1, the first
# training view with test_every 8) gives the camera, at full size. An orientation.json beside PLY
# (dataset.orientation) turns the camera into the model's frame.
PLY_PREFIX = "ply:"


def _split_ply(name: str) -> tuple[Path, Path, int]:
    body = name[len(PLY_PREFIX) :]
    ply, sep, rest = body.partition("@")
    colmap, _, index = rest.partition("#")
    if not sep or not ply or not colmap:
        raise ValueError(f"scene {name!r}: expected ply:PLY@COLMAP[#I]")
    if not index.isdigit() and index:
        raise ValueError(f"scene {name!r}: the image index after '#' must be a number")
    return Path(ply), Path(colmap), int(index or 1)


def check_scene(name: str) -> str | None:
    """None when ``name`` is a known scene, else a one-line reason."""
    if not name.startswith(PLY_PREFIX):
        return None if name in SCENES else f"unknown scene {name!r} (known: {', '.join(SCENES)}, ply:PLY@COLMAP[#I])"
    try:
        ply, colmap, _ = _split_ply(name)
    except ValueError as e:
        return str(e)
    if not ply.is_file():
        return f"{ply}: PLY file not found"
    return None if colmap.is_dir() else f"{colmap}: COLMAP folder not found"


def ply_scene(name: str) -> dict:
    """The scene of a ``ply:PLY@COLMAP[#I]`` name (see PLY_PREFIX)."""
    import json

    import numpy as np
    import torch

    from pointrix_lite.data.cameras import viewmat_from_colmap
    from pointrix_lite.data.colmap import pinhole_intrinsics

    try:  # this runs in the worker of the revision under test: older ones have the COLMAP reader in data/
        from pointrix_lite.io.colmap import find_sparse_dir, read_model
    except ImportError:
        from pointrix_lite.data.colmap_io import find_sparse_dir, read_model
    from pointrix_lite.model.gaussian_model import GaussianModel

    ply, colmap, index = _split_ply(name)
    model = read_model(find_sparse_dir(colmap))
    images = sorted(model.images.values(), key=lambda im: im.name)
    im = images[min(index, len(images) - 1)]
    cam = model.cameras[im.camera_id]
    fx, fy, cx, cy = pinhole_intrinsics(cam, model.files["cameras"])
    w2c = viewmat_from_colmap(im.qvec, im.tvec)
    # data/orientation.py's read_orientation reads this file, but the scene is built in the worker of
    # the revision under test (benchmarks.workers), and revisions before it (9156c00) must turn the camera all the same
    turn = ply.parent / "orientation.json"
    if turn.is_file():  # model point = R @ dataset point
        R = np.asarray(json.loads(turn.read_text())["rotation"], dtype=np.float64)
        to_dataset = np.eye(4)
        to_dataset[:3, :3] = R.T
        w2c = w2c @ to_dataset
    p = GaussianModel.from_ply(ply).render_params()
    return dict(
        **{k: p[k].detach().float().contiguous() for k in ("means", "quats", "scales", "opacities", "colors")},
        viewmats=torch.from_numpy(w2c).float()[None],
        Ks=torch.tensor([[[fx, 0.0, cx], [0.0, fy, cy], [0.0, 0.0, 1.0]]]),
        width=int(cam.width),
        height=int(cam.height),
        sh_degree=int(p["sh_degree"]),
    )


def scene_info(name: str) -> tuple[int, int, int, int]:
    """(width, height, Gaussians, SH degree) of a scene."""
    if not name.startswith(PLY_PREFIX):
        return SCENES[name]
    s = ply_scene(name)
    return s["width"], s["height"], len(s["means"]), s["sh_degree"]


def scene(name: str) -> dict:
    """The named scene of :data:`SCENES`, or a trained model's (``ply:PLY@COLMAP[#I]``)."""
    if name.startswith(PLY_PREFIX):
        return ply_scene(name)
    maker = make_photo_scene if name.startswith("photo") else make_scene
    return maker(*SCENES[name])
