"""The scene and file formats of ``native_driver.cpp``, and the same pipeline through the extension.

One camera, a seeded random cloud of Gaussians with SH degree 3 colours and a background, and
random upstream pixel and depth gradients. ``run_extension`` calls the extension's functions in
the driver's order with the same arguments, so both produce the results named in ``OUTPUTS``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from .dense_reference import look_at

WIDTH, HEIGHT, TILE, DEGREE, THREADS = 64, 48, 16, 3, 2
EPS2D, NEAR, FAR, RADIUS_CLIP = 0.3, 0.01, 1e10, 0.0
# the driver's results in its write order: name -> dtype
OUTPUTS = {
    "radii": np.int32,
    "means2d": np.float32,
    "depths": np.float32,
    "conics": np.float32,
    "sh_colors": np.float32,
    "gauss_offsets": np.int32,
    "tile_offsets": np.int32,
    "flatten_ids": np.int32,
    "slot_by_pos": np.int32,
    "colors": np.float32,
    "alphas": np.float32,
    "T_final": np.float32,
    "last_ids": np.int32,
    "contrib": np.int32,
    "n_evaluations": np.int64,
    "v_means2d": np.float32,
    "v_conics": np.float32,
    "v_colors": np.float32,
    "v_opacities": np.float32,
    "v_means2d_abs": np.float32,
    "v_coeffs": np.float32,
    "v_means_sh": np.float32,
    "v_campos": np.float32,
    "v_means": np.float32,
    "v_quats": np.float32,
    "v_scales": np.float32,
    "v_viewmat": np.float32,
}


def make_scene(seed: int = 0, n: int = 2000) -> dict[str, torch.Tensor]:
    """float32 inputs of the driver; the cloud fills the view and saturates some pixels."""
    g = torch.Generator().manual_seed(seed)
    viewmat = look_at([0.2, -0.3, -4.0])
    K = torch.tensor([[60.0, 0, 32.0], [0, 60.0, 24.0], [0, 0, 1]], dtype=torch.float64)
    return {
        "means": torch.randn(n, 3, generator=g) * 0.9,
        "quats": torch.randn(n, 4, generator=g),
        "scales": torch.exp(torch.randn(n, 3, generator=g) * 0.6 - 3.0),
        "opacities": torch.rand(n, generator=g),
        "coeffs": torch.randn(n, (DEGREE + 1) ** 2, 3, generator=g) * 0.3,
        "viewmat": viewmat.float(),
        "K": K.float(),
        "campos": torch.linalg.inv(viewmat)[:3, 3].float(),
        "background": torch.rand(3, generator=g),
        "v_colors_px": torch.randn(HEIGHT, WIDTH, 3, generator=g),
        "v_alphas_px": torch.randn(HEIGHT, WIDTH, generator=g),
        "v_depths": torch.randn(n, generator=g),
    }


def write_input(scene: dict[str, torch.Tensor], path: Path) -> None:
    n = scene["means"].shape[0]
    head = np.array([n, WIDTH, HEIGHT, TILE, DEGREE, THREADS], dtype=np.int32).tobytes()
    order = ("means", "quats", "scales", "opacities", "coeffs", "viewmat", "K", "campos", "background")
    body = b"".join(scene[k].contiguous().numpy().astype(np.float32).tobytes() for k in order)
    clip = np.array([EPS2D, NEAR, FAR, RADIUS_CLIP], dtype=np.float32).tobytes()
    tail = b"".join(scene[k].contiguous().numpy().tobytes() for k in ("v_colors_px", "v_alphas_px", "v_depths"))
    path.write_bytes(head + body + clip + tail)


def read_output(path: Path) -> dict[str, np.ndarray]:
    """The driver's results, flat, by name."""
    data, pos, out = path.read_bytes(), 0, {}
    for name, dtype in OUTPUTS.items():
        size = int(np.frombuffer(data, np.int64, 1, pos)[0])
        out[name] = np.frombuffer(data, dtype, size // np.dtype(dtype).itemsize, pos + 8).copy()
        pos += 8 + size
    assert pos == len(data), f"{path}: {len(data) - pos} bytes after the last result"
    return out


def run_extension(ext: Any, s: dict[str, torch.Tensor]) -> dict[str, np.ndarray]:
    """The driver's pipeline through the extension module ``ext`` (flat results by name)."""
    previous = torch.get_num_threads()
    torch.set_num_threads(THREADS)  # the kernels' thread count (bindings.cpp reads torch's)
    try:
        # the driver's C = 1 camera dimension
        vm, Ks, campos, coeffs = s["viewmat"][None], s["K"][None], s["campos"][None], s["coeffs"][None]
        opac = s["opacities"][None]
        radii, means2d, depths, conics, _ = ext.project_fwd(
            s["means"],
            s["quats"],
            s["scales"],
            s["opacities"],
            vm,
            Ks,
            WIDTH,
            HEIGHT,
            EPS2D,
            NEAR,
            FAR,
            RADIUS_CLIP,
            False,
        )
        sh_colors = ext.sh_fwd(DEGREE, s["means"], campos, coeffs, radii)
        bins = ext.bin_tiles(means2d, radii, depths, conics, opac, WIDTH, HEIGHT, TILE)
        raster = (means2d, conics, sh_colors, opac, s["background"][None], WIDTH, HEIGHT, TILE, bins[0], bins[1])
        colors, alphas, T_final, last_ids, contrib, evals = ext.raster_fwd(*raster)
        v_px = (s["v_colors_px"][None], s["v_alphas_px"][None, ..., None])
        v_raster = ext.raster_bwd(*raster, bins[2], bins[3], T_final, last_ids, contrib, *v_px, True)
        v_sh = ext.sh_bwd(DEGREE, s["means"], campos, coeffs, radii, sh_colors, v_raster[2])
        none = torch.empty(0)
        v_proj = ext.project_bwd(
            s["means"],
            s["quats"],
            s["scales"],
            vm,
            Ks,
            WIDTH,
            HEIGHT,
            EPS2D,
            radii,
            conics,
            none,
            v_raster[0],
            s["v_depths"][None],
            v_raster[1],
            none,
            False,
            True,
        )
    finally:
        torch.set_num_threads(previous)
    results = [
        radii,
        means2d,
        depths,
        conics,
        sh_colors,
        bins[2],
        bins[0],
        bins[1],
        bins[3],
        colors,
        alphas,
        T_final,
        last_ids,
        contrib,
        torch.tensor([evals]),
        *v_raster,
        *v_sh,
        *v_proj,
    ]
    return {name: t.reshape(-1).numpy() for name, t in zip(OUTPUTS, results, strict=True)}
