"""Exported .splat and compressed PLY files, decoded by the independent readers in readers.py and
compared with the source Gaussians within each format's quantisation.

Tolerances (why):
- .splat: positions and scales are float32 (exact; scales are exp(log scale) in float32, rel 1e-6).
  Colour and alpha are ``uint8(clamp(v * 255))``, a truncation: decoded b/255 lies in
  (v - 1/255, v]. Rotation is ``uint8(clamp(q * 128 + 128))`` of the unit quaternion: decoded
  (b - 128)/128 lies in (q - 1/128, q] (q = 1 clamps to 127/128, error 1/128).
- compressed PLY: values rounded to the nearest of 2^bits - 1 steps between the chunk's min and max:
  error <= half a step, i.e. (max - min) / (2 * 2047) for x, z and log scale x, z (11 bits),
  (max - min) / (2 * 1023) for y (10 bits), (max - min) / (2 * 255) for colour; alpha is 8 bits of
  [0, 1]: 1/510. Rotation: three components in 10 bits of [-1/sqrt2, 1/sqrt2] (step sqrt2/1023,
  error 7e-4); the largest, rebuilt as sqrt(1 - a^2 - b^2 - c^2) >= 1/2, gets <= 2e-3. SH: 8 bits
  of [-4, 4), truncated and decoded at the bin centre: 1/64 inside, 1/32 in the end bins.
All comparisons add 1e-6 for float32 rounding of the decoder's arithmetic.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pointrix_lite.export import export_gaussians, get_format
from pointrix_lite.export.filters import Selection

from .readers import SH_C0, match_rows, read_compressed_ply, read_ply_elements, read_splat, separable_params

EPS = 1e-6


def _np(params):
    return {k: v.double().numpy() for k, v in params.items()}


def _unit_quats(q: np.ndarray) -> np.ndarray:
    return q / np.linalg.norm(q, axis=1, keepdims=True)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-x))


# ------------------------------------------------------------------ .splat
def test_splat_records_decode_to_the_model(tmp_path):
    params = separable_params(600, sh_degree=1)
    report = export_gaussians(params, get_format("splat"), tmp_path / "m.splat")
    d = read_splat(tmp_path / "m.splat")
    p = _np(params)
    assert report.num_out == 600 and report.size == 600 * 32 and len(d["means"]) == 600
    idx = match_rows(d["means"], p["means"], tol=0.0)  # positions are stored exactly
    np.testing.assert_array_equal(d["means"], params["means"].numpy()[idx])
    np.testing.assert_allclose(d["scales"], np.exp(p["scales"][idx]), rtol=1e-6)
    colour = np.clip(0.5 + SH_C0 * p["sh0"][idx, 0], 0, 1)
    alpha = _sigmoid(p["opacities"][idx])
    decoded = d["rgba_u8"] / 255.0
    err = np.concatenate([colour, alpha[:, None]], 1) - decoded
    assert err.min() >= -EPS and err.max() < 1 / 255 + EPS  # truncation: never above, < 1 step below
    qerr = _unit_quats(p["quats"][idx]) - d["quats"]
    assert qerr.min() >= -EPS and qerr.max() <= 1 / 128 + EPS
    assert report.sh_degree == 0  # .splat stores colour only


def test_splat_is_ordered_by_volume_times_alpha(tmp_path):
    params = separable_params(500, sh_degree=0, seed=3)
    export_gaussians(params, get_format("splat"), tmp_path / "m.splat")
    d = read_splat(tmp_path / "m.splat")
    key = d["scales"].astype(np.float64).prod(1) * d["rgba_u8"][:, 3]
    assert np.all(np.diff(key) <= 0)  # antimatter15's convert.py order: most visible first
    assert key[0] > key[-1]


# ------------------------------------------------------------------ compressed PLY
def _expected_header_ok(elements, n, sh_columns):
    """The shape PlayCanvas' isCompressedPly accepts: chunk (18 floats), vertex (4 uint32), and an
    sh element only with 9, 24 or 45 uint8 columns; ceil(n / 256) chunks."""
    names = [e[0] for e in elements]
    assert names == (["chunk", "vertex", "sh"] if sh_columns else ["chunk", "vertex"])
    chunk, vertex = elements[0], elements[1]
    assert chunk[1] == -(-n // 256) and all(t == "<f4" for _, t in chunk[2]) and len(chunk[2]) == 18
    assert vertex[1] == n and [p for p, _ in vertex[2]] == [
        "packed_position",
        "packed_rotation",
        "packed_scale",
        "packed_color",
    ]
    assert all(t == "<u4" for _, t in vertex[2])
    if sh_columns:
        assert elements[2][1] == n and [p for p, _ in elements[2][2]] == [f"f_rest_{i}" for i in range(sh_columns)]
        assert all(t == "u1" for _, t in elements[2][2])


@pytest.mark.parametrize("sh_degree", [0, 1, 3, 4])
def test_compressed_ply_decodes_to_the_model(tmp_path, sh_degree):
    params = separable_params(600, sh_degree=sh_degree, seed=sh_degree)
    path = tmp_path / "m.compressed.ply"
    report = export_gaussians(params, get_format("ply_compressed"), path)
    p = _np(params)
    visible = _sigmoid(p["opacities"]) > 1 / 255
    assert report.num_out == visible.sum() < 600  # the format's own cut, reported
    assert report.removed[-1] == ("ply_compressed drops opacity <= 1/255", int((~visible).sum()))
    stored = min(sh_degree, 3)  # PlayCanvas loads 9 / 24 / 45 SH columns: degree 4 is cut to 3
    assert report.sh_degree == stored
    elements, _ = read_ply_elements(path)
    _expected_header_ok(elements, report.num_out, 3 * ((stored + 1) ** 2 - 1))

    d = read_compressed_ply(path)
    idx = match_rows(d["means"], p["means"], tol=0.01)
    assert visible[idx].all()
    ci = np.arange(len(idx)) // 256
    ch = d["chunk"]
    # Chunk bounds are the min / max of the source Gaussians in that chunk (grouping + bounds).
    for c in range(len(ch)):
        rows = idx[ci == c]
        for a, axis in enumerate("xyz"):
            assert ch[f"min_{axis}"][c] == np.float32(p["means"][rows, a].min())
            assert ch[f"max_{axis}"][c] == np.float32(p["means"][rows, a].max())
            assert ch[f"min_scale_{axis}"][c] == np.float32(p["scales"][rows, a].min())
    steps = np.array([2047, 1023, 2047])

    def span(prefix):
        return np.stack([ch[f"max_{prefix}{a}"][ci] - ch[f"min_{prefix}{a}"][ci] for a in "xyz"], 1).astype(np.float64)

    assert np.all(np.abs(d["means"] - p["means"][idx]) <= span("") / steps / 2 + EPS)
    assert np.all(np.abs(d["scales"] - p["scales"][idx]) <= span("scale_") / steps / 2 + EPS)
    colour = 0.5 + SH_C0 * p["sh0"][idx, 0]
    cspan = np.stack([ch[f"max_{a}"][ci] - ch[f"min_{a}"][ci] for a in "rgb"], 1)
    assert np.all(np.abs(d["colours"] - colour) <= cspan / 255 / 2 + EPS)
    assert np.all(np.abs(d["alpha"] - _sigmoid(p["opacities"][idx])) <= 1 / 510 + EPS)
    q = _unit_quats(p["quats"][idx])
    q *= np.sign((q * d["quats"]).sum(1, keepdims=True))  # q and -q are the same rotation
    assert np.abs(q - d["quats"]).max() <= 2e-3
    k = (stored + 1) ** 2 - 1
    assert d["shN"].shape == (len(idx), k, 3)
    assert np.all(np.abs(d["shN"] - p["shN"][idx, :k]) <= 1 / 32 + EPS)
    inner = np.abs(p["shN"][idx, :k]) < 4 - 1 / 32
    assert np.all(np.abs(d["shN"] - p["shN"][idx, :k])[inner] <= 1 / 64 + EPS)


def _morton(cells: np.ndarray) -> np.ndarray:
    code = np.zeros(len(cells), dtype=np.int64)
    for bit in range(10):
        for axis in range(3):  # x in the lowest bit of each triple, then y, then z
            code |= ((cells[:, axis] >> bit) & 1) << (3 * bit + axis)
    return code


def test_compressed_ply_is_in_morton_order(tmp_path):
    """gsplat sorts by a 30-bit Morton code of the centres on a 1024^3 grid over their bounding box.
    Its scaling maps a centre exactly on the box's max face to cell 1024, which wraps to 0 in 10
    bits: those few Gaussians (one per axis at most) are left out of the order check."""
    params = separable_params(1000, sh_degree=0, seed=5)
    params["opacities"] = params["opacities"].abs() + 1  # all visible: file order = every Gaussian
    path = tmp_path / "m.compressed.ply"
    export_gaussians(params, get_format("ply_compressed"), path)
    d = read_compressed_ply(path)
    means = params["means"].numpy()
    idx = match_rows(d["means"], means.astype(np.float64), tol=0.01)
    lo, hi = means.min(0), means.max(0)
    cells = np.floor((means - lo) / (hi - lo) * 1024).astype(np.int64)
    on_max_face = (cells >= 1024).any(1)
    assert 1 <= on_max_face.sum() <= 3
    codes = _morton(cells)[idx][~on_max_face[idx]]
    assert np.all(np.diff(codes) >= 0)


def test_compressed_ply_flat_axis_and_single_gaussian_chunk_decode_exactly(tmp_path):
    """A chunk whose values are all equal on an axis has max == min: gsplat divides 0 by 0 there,
    which must still decode to that value (the packed bits come out 0 -> min)."""
    params = separable_params(257, sh_degree=1, seed=7)  # 257: the last chunk holds one Gaussian
    params["means"][:, 2] = 0.25  # a flat scene
    params["scales"][:, 1] = -3.0  # one scale shared by all
    params["opacities"] = params["opacities"].abs() + 1
    path = tmp_path / "m.compressed.ply"
    export_gaussians(params, get_format("ply_compressed"), path)
    d = read_compressed_ply(path)
    assert len(d["means"]) == 257
    np.testing.assert_array_equal(d["means"][:, 2], np.float32(0.25))
    np.testing.assert_array_equal(d["scales"][:, 1], np.float32(-3.0))
    last = match_rows(d["means"][-1:], params["means"].double().numpy(), tol=1e-6)[0]
    np.testing.assert_allclose(d["scales"][-1], params["scales"][last].numpy(), rtol=0, atol=1e-6)


def test_non_finite_gaussians_are_dropped_and_reported(tmp_path):
    """gsplat's own NaN check reduces opacities to one flag and would drop every Gaussian (or none)."""
    params = separable_params(300, sh_degree=1, seed=2)
    params["opacities"] = params["opacities"].abs() + 1
    params["opacities"][5] = float("nan")
    params["means"][7, 0] = float("inf")
    params["quats"][9] = 0.0
    for fmt, name in (("splat", "m.splat"), ("ply_compressed", "m.compressed.ply")):
        report = export_gaussians(params, get_format(fmt), tmp_path / name)
        assert report.removed[0] == ("invalid (non-finite or zero rotation)", 3)
        assert report.num_out == 297
    assert len(read_splat(tmp_path / "m.splat")["means"]) == 297
    assert len(read_compressed_ply(tmp_path / "m.compressed.ply")["means"]) == 297


def test_sizes_against_the_full_ply(tmp_path):
    params = separable_params(1024, sh_degree=3, seed=1)
    params["opacities"] = params["opacities"].abs() + 1
    full = export_gaussians(params, get_format("ply"), tmp_path / "m.ply")
    comp = export_gaussians(params, get_format("ply_compressed"), tmp_path / "m.compressed.ply")
    splat = export_gaussians(params, get_format("splat"), tmp_path / "m.splat")
    assert full.size == full.full_ply_size == (tmp_path / "m.ply").stat().st_size  # the estimate is the real size
    assert splat.size == 1024 * 32
    # 16 bytes of packed vertex + 45 SH bytes per Gaussian, 72 bytes per 256 of chunk bounds.
    assert comp.size - 1024 * (16 + 45) - 4 * 72 < 2048  # the rest is the header
    assert 3.5 < full.size / comp.size < 4.0 and full.size / splat.size > 7
    sh0 = export_gaussians(params, get_format("ply_compressed"), tmp_path / "d0.compressed.ply", Selection(sh_degree=0))
    assert sh0.full_ply_size / sh0.size > 14  # without SH the packed vertex is 16 of the 248 bytes


def test_project_decoders_agree_with_the_test_readers(tmp_path):
    """pointrix_lite.export.decode (used to measure the rendered quality loss) against readers.py."""
    from pointrix_lite.export.decode import read_compressed_ply as decode_compressed
    from pointrix_lite.export.decode import read_splat as decode_splat

    params = separable_params(700, sh_degree=2, seed=4)
    params["opacities"] = params["opacities"].clamp(-4, 4)
    export_gaussians(params, get_format("splat"), tmp_path / "m.splat")
    export_gaussians(params, get_format("ply_compressed"), tmp_path / "m.compressed.ply")
    mine, ref = decode_splat(tmp_path / "m.splat"), read_splat(tmp_path / "m.splat")
    np.testing.assert_array_equal(mine["means"].numpy(), ref["means"])
    np.testing.assert_allclose(mine["scales"].exp().numpy(), ref["scales"], rtol=1e-6)
    np.testing.assert_allclose(mine["quats"].numpy(), ref["quats"], atol=1e-7)
    rgba = np.concatenate(
        [0.5 + SH_C0 * mine["sh0"][:, 0].double().numpy(), torch.sigmoid(mine["opacities"].double()).numpy()[:, None]],
        1,
    )
    np.testing.assert_allclose(rgba, ref["rgba_u8"] / 255, atol=1e-6)
    assert mine["shN"].shape == (700, 0, 3)

    mine, ref = decode_compressed(tmp_path / "m.compressed.ply"), read_compressed_ply(tmp_path / "m.compressed.ply")
    for key in ("means", "scales", "quats", "shN"):
        np.testing.assert_allclose(mine[key].numpy(), ref[key], atol=1e-6, err_msg=key)
    np.testing.assert_allclose(0.5 + SH_C0 * mine["sh0"][:, 0].double().numpy(), ref["colours"], atol=1e-6)
    np.testing.assert_allclose(
        torch.sigmoid(mine["opacities"].double()).numpy(), np.clip(ref["alpha"], 1e-6, 1 - 1e-6), atol=1e-6
    )
