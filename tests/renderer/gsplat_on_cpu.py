"""gsplat's code path on the CPU: ``gsplat.rasterization`` with its CUDA stages swapped for torch.

Test-only. ``renderer.backend: gsplat`` runs ``pointrix_lite/renderer/gsplat_backend.py`` ->
``gsplat.rendering.rasterization`` (argument checks, colour/depth channels, backgrounds, the
``packed=False`` meta) -> five CUDA entry points. :func:`emulate_gsplat_on_cpu` replaces only
those five, in ``gsplat.rendering``'s namespace, by the stand-ins below, so everything of ours and
of gsplat around them runs as it would on a GPU, on CPU tensors:

- projection and SH: gsplat's own torch twins (``gsplat.cuda._torch_impl``), plus the CUDA kernel's
  rules the twin predates (1.5's opacity-aware box and 1/255 cull, ``radius_clip``);
- tile intersection: gsplat's key layout and its CUDA stable radix order (the torch twin loops in
  Python per Gaussian and sorts unstably), vectorised; offsets: gsplat's twin as it is;
- compositing: gsplat's twin calls the CUDA ``rasterize_to_indices_in_range`` and needs nerfacc,
  so the stand-in is pointrix_lite's torch compositing (``torch_backend/rasterize.py``, tested
  against a dense float64 reference) over gsplat's own tile lists, with ``absgrad`` filled as
  gsplat's autograd function fills it.

Where the CUDA kernels leave an output unwritten (``at::empty``: means2d, depths and conics of
culled Gaussians, SH colours of masked ones) the stand-ins write NaN, so a consumer that reads
those entries fails here instead of reading garbage on a GPU.

Use ``with emulate_gsplat_on_cpu(): ...`` in a test, or ``--plugin tests/renderer/gsplat_on_cpu.py``
for a whole training run (``renderer.backend=gsplat device=cpu``).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from typing import Any

import torch
from torch import Tensor

ALPHA_THRESHOLD = 1.0 / 255.0  # gsplat's, as the CUDA projection culls and boxes with it


def _poison(values: Tensor, keep: Tensor) -> Tensor:
    """``values`` where ``keep`` [...], NaN elsewhere (what an unwritten ``at::empty`` may hold)."""
    keep = keep.reshape(keep.shape + (1,) * (values.dim() - keep.dim()))
    return torch.where(keep, values, torch.full_like(values, float("nan")))


def fully_fused_projection(
    means: Tensor,
    covars: Tensor | None,
    quats: Tensor,
    scales: Tensor,
    viewmats: Tensor,
    Ks: Tensor,
    width: int,
    height: int,
    **options: Any,
) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor | None]:
    """``gsplat.cuda._wrapper.fully_fused_projection`` (packed=False, pinhole, quats+scales).

    gsplat's twin ``_fully_fused_projection`` step by step (its ``_world_to_cam``, ``_persp_proj``,
    blur and conic), with ProjectionEWA3DGSFused.cu's culling and box rules in place of the twin's
    fixed 3.33-sigma box. ``options``: the wrapper's keywords, all of which ``rasterization()`` passes.
    """
    from gsplat.cuda._torch_impl import _persp_proj, _quat_scale_to_covar_preci, _world_to_cam

    o = {"eps2d": 0.3, "near_plane": 0.01, "far_plane": 1e10, "radius_clip": 0.0, "opacities": None, **options}
    eps2d, near_plane, far_plane, radius_clip = o["eps2d"], o["near_plane"], o["far_plane"], o["radius_clip"]
    calc_compensations, opacities = o.get("calc_compensations", False), o["opacities"]
    if o.get("packed") or o.get("sparse_grad") or covars is not None or o.get("camera_model", "pinhole") != "pinhole":
        raise NotImplementedError("stand-in covers packed=False, quats/scales, pinhole (what pointrix_lite calls)")
    covars3d, _ = _quat_scale_to_covar_preci(quats, scales, compute_preci=False)
    means_c, covars_c = _world_to_cam(means, covars3d, viewmats)  # [C, N, 3], [C, N, 3, 3]
    depths = means_c[..., 2]
    in_depth = (depths >= near_plane) & (depths <= far_plane)  # the kernel returns before projecting others
    safe_c = torch.where(in_depth[..., None], means_c, torch.ones_like(means_c))
    means2d, cov2d = _persp_proj(safe_c, covars_c, Ks, width, height)
    det_orig = cov2d[..., 0, 0] * cov2d[..., 1, 1] - cov2d[..., 0, 1] * cov2d[..., 1, 0]
    cov2d = cov2d + torch.eye(2, dtype=cov2d.dtype, device=cov2d.device) * eps2d
    det = cov2d[..., 0, 0] * cov2d[..., 1, 1] - cov2d[..., 0, 1] * cov2d[..., 1, 0]
    valid = in_depth & (det > 0)
    det = torch.where(valid, det, torch.ones_like(det))
    conics = torch.stack([cov2d[..., 1, 1] / det, -cov2d[..., 0, 1] / det, cov2d[..., 0, 0] / det], dim=-1)
    comps = None
    if calc_compensations:
        comps = torch.sqrt(torch.clamp(torch.where(valid, det_orig / det, torch.zeros_like(det)), min=0.0))
    with torch.no_grad():
        extend = torch.full_like(depths, 3.33)
        if opacities is not None:
            opac = opacities[..., None, :].expand_as(depths)
            if comps is not None:
                opac = opac * comps
            valid = valid & (opac >= ALPHA_THRESHOLD)
            ratio = torch.where(valid, opac, torch.ones_like(opac)) / ALPHA_THRESHOLD
            extend = torch.minimum(extend, torch.sqrt(2.0 * torch.log(ratio)))
        rx = torch.ceil(extend * torch.sqrt(cov2d[..., 0, 0].clamp(min=0)))
        ry = torch.ceil(extend * torch.sqrt(cov2d[..., 1, 1].clamp(min=0)))
        valid = valid & (~((rx <= radius_clip) & (ry <= radius_clip)))
        mx, my = means2d.unbind(-1)
        valid = valid & (~((mx + rx <= 0) | (mx - rx >= width) | (my + ry <= 0) | (my - ry >= height)))
        radii = torch.where(valid[..., None], torch.stack([rx, ry], -1), torch.zeros_like(means2d)).int()
    if comps is not None:
        comps = torch.where(valid, comps, torch.zeros_like(comps))  # at::zeros in the CUDA launcher
    return radii, _poison(means2d, valid), _poison(depths, valid), _poison(conics, valid), comps


def spherical_harmonics(degrees_to_use: int, dirs: Tensor, coeffs: Tensor, masks: Tensor | None = None) -> Tensor:
    """``gsplat.cuda._wrapper.spherical_harmonics``: gsplat's torch twin; masked entries unwritten."""
    from gsplat.cuda._torch_impl import _spherical_harmonics

    colors = _spherical_harmonics(degrees_to_use, dirs, coeffs)
    return colors if masks is None else _poison(colors, masks)


@torch.no_grad()
def isect_tiles(
    means2d: Tensor,
    radii: Tensor,
    depths: Tensor,
    tile_size: int,
    tile_width: int,
    tile_height: int,
    sort: bool = True,
    segmented: bool = False,
    packed: bool = False,
    n_images: int | None = None,
    image_ids: Tensor | None = None,
    gaussian_ids: Tensor | None = None,
) -> tuple[Tensor, Tensor, Tensor]:
    """``gsplat.cuda._wrapper.isect_tiles`` (packed=False): IntersectTile.cu's keys
    ``image | tile | depth bits`` emitted in Gaussian order, then a stable sort (cub's radix sort)."""
    if packed:
        raise NotImplementedError("stand-in covers packed=False")
    image_dims, N = means2d.shape[:-2], means2d.shape[-2]
    I = math.prod(image_dims)  # noqa: E741 (gsplat's name for the image count)
    xy = means2d.reshape(I * N, 2) / tile_size
    r = radii.reshape(I * N, 2).to(xy.dtype) / tile_size
    hi = torch.tensor([tile_width, tile_height], device=xy.device)
    tmin = torch.minimum(torch.floor(xy - r).clamp(min=0).long(), hi)
    tmax = torch.minimum(torch.ceil(xy + r).clamp(min=0).long(), hi)
    visible = (radii.reshape(I * N, 2) > 0).all(-1)
    extent = torch.where(visible[:, None], tmax - tmin, torch.zeros_like(tmax))
    counts = extent[:, 0] * extent[:, 1]
    n_isects = int(counts.sum())
    flat = torch.repeat_interleave(torch.arange(I * N, device=xy.device), counts, output_size=n_isects)
    start = torch.cumsum(counts, 0) - counts
    k = torch.arange(n_isects, device=xy.device) - start[flat]
    tx = tmin[flat, 0] + k % extent[flat, 0].clamp(min=1)
    ty = tmin[flat, 1] + k // extent[flat, 0].clamp(min=1)
    tile_bits = (tile_width * tile_height).bit_length()
    depth_bits = depths.reshape(I * N).contiguous().view(torch.int32)[flat].long() & 0xFFFFFFFF
    isect_ids = ((flat // N) << (tile_bits + 32)) | ((ty * tile_width + tx) << 32) | depth_bits
    flatten_ids = flat.int()
    if sort:
        isect_ids, order = torch.sort(isect_ids, stable=True)
        flatten_ids = flatten_ids[order]
    return counts.reshape(image_dims + (N,)).int(), isect_ids, flatten_ids


def isect_offset_encode(isect_ids: Tensor, n_images: int, tile_width: int, tile_height: int) -> Tensor:
    """``gsplat.cuda._wrapper.isect_offset_encode``: gsplat's torch twin."""
    from gsplat.cuda._torch_impl import _isect_offset_encode

    return _isect_offset_encode(isect_ids, n_images, tile_width, tile_height)


def rasterize_to_pixels(
    means2d: Tensor,
    conics: Tensor,
    colors: Tensor,
    opacities: Tensor,
    image_width: int,
    image_height: int,
    tile_size: int,
    isect_offsets: Tensor,
    flatten_ids: Tensor,
    backgrounds: Tensor | None = None,
    masks: Tensor | None = None,
    packed: bool = False,
    absgrad: bool = False,
) -> tuple[Tensor, Tensor]:
    """``gsplat.cuda._wrapper.rasterize_to_pixels`` (packed=False, no masks) over gsplat's lists."""
    from pointrix_lite.renderer.torch_backend.rasterize import rasterize_tiles
    from pointrix_lite.renderer.torch_backend.tiles import TileLists

    if packed or masks is not None or means2d.dim() != 3:
        raise NotImplementedError("stand-in covers packed=False, no tile masks, no batch dims")
    C, N = means2d.shape[:2]
    th, tw = isect_offsets.shape[-2:]
    offsets = torch.cat([isect_offsets.reshape(-1).long(), isect_offsets.new_tensor([flatten_ids.numel()]).long()])
    tiles = TileLists(tw, th, offsets, flatten_ids.long(), torch.zeros(C, N, dtype=torch.long))
    sink = None
    if absgrad:
        # gsplat's backward sets means2d.absgrad; this buffer is that tensor, filled by backward.
        sink = means2d.new_zeros(C * N, 2)
        means2d.absgrad = sink.view(C, N, 2)
    return rasterize_tiles(
        means2d,
        conics,
        colors,
        opacities,
        tiles,
        image_width,
        image_height,
        tile_size,
        backgrounds=backgrounds,
        absgrad_sink=sink,
    )


STAND_INS = {
    "fully_fused_projection": fully_fused_projection,
    "spherical_harmonics": spherical_harmonics,
    "isect_tiles": isect_tiles,
    "isect_offset_encode": isect_offset_encode,
    "rasterize_to_pixels": rasterize_to_pixels,
}


def enable() -> dict:
    """Swap the stand-ins into ``gsplat.rendering`` and let gsplat take CPU tensors; returns what
    was replaced (for :func:`disable`)."""
    import gsplat.rendering

    from pointrix_lite import device_policy

    saved = {name: getattr(gsplat.rendering, name) for name in STAND_INS}
    saved["gsplat_runs_on"] = device_policy.gsplat_runs_on
    for name, fn in STAND_INS.items():
        setattr(gsplat.rendering, name, fn)
    device_policy.gsplat_runs_on = lambda device: True
    return saved


def disable(saved: dict) -> None:
    import gsplat.rendering

    from pointrix_lite import device_policy

    device_policy.gsplat_runs_on = saved.pop("gsplat_runs_on")
    for name, fn in saved.items():
        setattr(gsplat.rendering, name, fn)


@contextlib.contextmanager
def emulate_gsplat_on_cpu() -> Iterator[None]:
    saved = enable()
    try:
        yield
    finally:
        disable(saved)


if __name__.startswith("pointrix_plugin_"):  # loaded by --plugin (cli/plugins.py names it so)
    enable()
