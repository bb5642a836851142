"""SOG (PlayCanvas, meta.json version 2) exports, decoded by the independent reader in readers.py and
compared with the source Gaussians, which the file holds in Morton order (matched back by centre).

Stated precision (why):
- centres: 16 bits of t = sign(x) ln(|x| + 1) over t's range per axis: |t' - t| <= span / (2 * 65535).
- rotation: three components stored as round(255 (sqrt(2) q / 2 + 1 / 2)): |e| <= h = 1 / (255 sqrt(2))
  each, the largest rebuilt from unit length at most doubles the error: angle <= 4 sqrt(3) h (1.1 deg).
- opacity: round(255 alpha): <= 0.5 / 255.
- log scales and f_dc: the nearest of 256 float32 codebook entries (any other entry is farther).
- higher SH: each Gaussian's palette entry is the nearest centre up to the codebook's rounding of
  the centres (models this small get exact labels; larger ones: test_codebook.py); with no more
  distinct SH vectors than palette entries they are kept exactly.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from pointrix_lite.export import export_gaussians, get_format
from pointrix_lite.export.filters import Selection
from pointrix_lite.export.sog import palette_size, texture_size

from .readers import match_rows, read_sog, rotation_matrices, separable_params

EPS = 1e-6
QUAT_BOUND = 4 * math.sqrt(3) / (255 * math.sqrt(2))


def _sog(tmp_path, params, selection=None, name="m.sog"):
    report = export_gaussians(params, get_format("sog"), tmp_path / name, selection)
    return report, read_sog(tmp_path / name)


def _log_t(x: np.ndarray) -> np.ndarray:
    return np.sign(x) * np.log1p(np.abs(x))


def _assert_nearest(decoded: np.ndarray, source: np.ndarray, codebook: list[float]) -> None:
    cb = np.float32(codebook).astype(np.float64)
    assert len(cb) == 256 and np.all(np.diff(cb) >= 0)  # ascending, as splat-transform's
    best = np.abs(source[..., None] - cb).min(-1)
    assert np.all(np.abs(source - decoded) <= best + EPS)


def test_sog_archive_layout(tmp_path):
    params = separable_params(1000, sh_degree=2, seed=1)
    report, d = _sog(tmp_path, params)
    meta, images = d["meta"], d["images"]
    assert report.size == (tmp_path / "m.sog").stat().st_size and d["stored"]
    assert meta["count"] == report.num_out == 1000 and report.sh_degree == 2
    assert set(meta) == {"version", "asset", "count", "means", "scales", "quats", "sh0", "shN"}
    width, height = texture_size(1000)
    assert (width, height) == (32, 32)  # 4 ceil(sqrt(N) / 4) wide, a multiple of 4 rows
    for name in ("means_l.webp", "means_u.webp", "quats.webp", "scales.webp", "sh0.webp", "shN_labels.webp"):
        assert images[name].shape == (height, width, 4), name
        assert not images[name].reshape(-1, 4)[1000:].any(), name  # unused texels are zero
    assert meta["shN"]["bands"] == 2 and meta["shN"]["count"] == palette_size(1000) == 512
    assert images["shN_centroids.webp"].shape == (512 // 64, 64 * 8, 4)
    assert set(images["quats.webp"].reshape(-1, 4)[:1000, 3]) <= {252, 253, 254, 255}


@pytest.mark.parametrize("sh_degree", [0, 1, 3])
def test_sog_decodes_to_the_model(tmp_path, sh_degree):
    params = separable_params(600, sh_degree=sh_degree, seed=30 + sh_degree)
    params["shN"] = params["shN"] * 0.2  # trained models' range; the random one's is wider
    _, d = _sog(tmp_path, params)
    p = {k: v.double().numpy() for k, v in params.items()}
    idx = match_rows(d["means"], p["means"], tol=1e-3)
    p = {k: v[idx] for k, v in p.items()}
    t = _log_t(p["means"])
    span = np.array(d["meta"]["means"]["maxs"]) - d["meta"]["means"]["mins"]
    assert np.all(np.abs(_log_t(d["means"]) - t) <= span / (2 * 65535) + EPS)
    cos = (np.einsum("nij,nij->n", rotation_matrices(d["quats"]), rotation_matrices(p["quats"])) - 1) / 2
    assert np.arccos(np.clip(cos, -1, 1)).max() <= QUAT_BOUND
    assert np.abs(d["alpha"] - 1 / (1 + np.exp(-p["opacities"]))).max() <= 0.5 / 255 + EPS
    _assert_nearest(d["scales"], p["scales"], d["meta"]["scales"]["codebook"])
    _assert_nearest(d["f_dc"], p["sh0"][:, 0], d["meta"]["sh0"]["codebook"])
    assert np.abs(d["f_dc"] - p["sh0"][:, 0]).mean() < 0.01  # 256 entries fitted to 1800 values
    assert d["shN"].shape == p["shN"].shape
    if sh_degree:
        flat, pal = p["shN"].reshape(600, -1), d["palette"].reshape(len(d["palette"]), -1)
        dist = np.linalg.norm(flat[:, None] - pal[None], axis=2)
        cb = np.float32(d["meta"]["shN"]["codebook"])
        slack = 2 * np.sqrt(flat.shape[1]) * np.diff(cb).max() / 2  # the centres' rounding, twice
        assert np.all(dist[np.arange(600), d["labels"]] <= dist.min(1) + slack)
        err = np.abs(d["shN"] - p["shN"]).mean()
        assert err < 0.5 * np.abs(p["shN"]).mean()  # 512 entries for 600 Gaussians: most keep their own


def test_sog_keeps_few_distinct_values_exactly(tmp_path):
    """No more distinct values than codebook entries (and SH vectors than palette entries): the
    file holds them exactly."""
    params = separable_params(700, sh_degree=1, seed=2)
    g = torch.Generator().manual_seed(3)
    params["scales"] = torch.randint(-60, -20, (700, 3), generator=g).float() / 10  # 40 values
    params["sh0"] = torch.randint(-100, 100, (700, 1, 3), generator=g).float() / 64  # 200 values
    vectors = torch.randint(-20, 20, (25, 3, 3), generator=g).float() / 64  # 25 vectors, 40 values
    params["shN"] = vectors[torch.randint(0, 25, (700,), generator=g)]
    _, d = _sog(tmp_path, params)
    idx = match_rows(d["means"], params["means"].double().numpy(), tol=1e-3)
    assert d["meta"]["shN"]["count"] == 25
    for key, decoded in (("scales", d["scales"]), ("sh0", d["f_dc"]), ("shN", d["shN"])):
        source = params[key].numpy()[idx].reshape(decoded.shape)
        np.testing.assert_array_equal(decoded, source, err_msg=key)


def test_sog_keeps_the_colour_of_a_transparent_gaussian(tmp_path):
    """sh0.webp's alpha is the opacity: libwebp would drop the colour of alpha-0 texels unless
    told to keep it exactly."""
    params = separable_params(200, sh_degree=0, seed=4)
    params["opacities"][:50] = -30.0  # alpha rounds to 0
    _, d = _sog(tmp_path, params)
    idx = match_rows(d["means"], params["means"].double().numpy(), tol=1e-3)
    clear = idx < 50
    assert (d["alpha"][clear] == 0).all() and clear.sum() == 50
    _assert_nearest(d["f_dc"], params["sh0"][idx, 0].double().numpy(), d["meta"]["sh0"]["codebook"])


def test_sog_cuts_sh_filters_and_repeats_bytes(tmp_path):
    params = separable_params(400, sh_degree=4, seed=5)  # degree 4 is cut to 3
    sel = Selection(sphere=(0.0, 0.0, 0.0, 2.5))
    report, d = _sog(tmp_path, params, sel)
    inside = (params["means"].norm(dim=1) <= 2.5).numpy()
    assert report.num_out == d["meta"]["count"] == inside.sum() < 400
    assert report.sh_degree == d["meta"]["shN"]["bands"] == 3
    match_rows(d["means"], params["means"].double().numpy()[inside], tol=1e-3)
    export_gaussians(params, get_format("sog"), tmp_path / "again.sog", sel)
    assert (tmp_path / "again.sog").read_bytes() == (tmp_path / "m.sog").read_bytes()  # no clock, no randomness


def test_project_decoder_agrees_with_the_test_reader(tmp_path):
    """pointrix_lite.export.decode_sog (the export benchmark's reader) against readers.py."""
    from pointrix_lite.export.decode_sog import read_sog as decode_sog

    params = separable_params(500, sh_degree=3, seed=6)
    params["opacities"] = params["opacities"].clamp(-4, 4)
    _, ref = _sog(tmp_path, params)
    mine = decode_sog(tmp_path / "m.sog")
    np.testing.assert_allclose(mine["means"].numpy(), ref["means"], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(mine["quats"].numpy(), ref["quats"], atol=1e-6)
    np.testing.assert_array_equal(mine["scales"].numpy(), ref["scales"])
    np.testing.assert_allclose(
        torch.sigmoid(mine["opacities"].double()).numpy(), np.clip(ref["alpha"], 1e-6, 1 - 1e-6), atol=1e-6
    )
    np.testing.assert_allclose(mine["sh0"][:, 0].numpy(), ref["f_dc"], atol=1e-5)
    np.testing.assert_array_equal(mine["shN"].numpy(), ref["shN"])


def test_project_decoder_names_the_file_on_bad_input(tmp_path):
    import json
    import zipfile

    from pointrix_lite.errors import DataError
    from pointrix_lite.export.decode_sog import read_sog as decode_sog

    (tmp_path / "plain.sog").write_bytes(b"not a zip")
    with zipfile.ZipFile(tmp_path / "v1.sog", "w") as z:
        z.writestr("meta.json", json.dumps({"means": {}}))  # version 1 has no version key
    with zipfile.ZipFile(tmp_path / "short.sog", "w") as z:
        z.writestr("meta.json", json.dumps({"version": 2, "count": 10, "means": {"mins": [0] * 3, "maxs": [1] * 3}}))
    cases = (
        ("plain.sog", "not a SOG file"),
        ("v1.sog", "SOG meta.json version 1; readable: version 2"),
        ("short.sog", "cannot read means_l.webp"),
    )
    for name, message in cases:
        with pytest.raises(DataError, match=f"{name}: {message}"):
            decode_sog(tmp_path / name)
