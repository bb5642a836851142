"""SPZ (v3) and glTF (KHR_gaussian_splatting) exports, decoded by the independent readers in
readers.py and compared with the source Gaussians in the file's frame: positions times ``S``,
rotations ``S R S``, SH coefficients times the parity readers.py derives by evaluating the basis at
flipped directions (S = I for SPZ's default RDF, diag(1, -1, -1) for SPZ's RUB with
``--spz-frame rub``, diag(-1, -1, 1) for glTF's LUF).

Stated precision (why):
- SPZ: centres round to 2^-12 (error <= 2^-13); alpha, colour and log scale round to their u8
  steps (1/255, 1/(0.15 * 255) of f_dc, 1/16): error <= half a step inside the range. Rotation:
  three components as 9-bit magnitudes of [0, sqrt(1/2)] (half step h = 6.9e-4, |e| <= sqrt(3) h),
  the largest (>= 1/2) rebuilt from unit length, which at most doubles the error: angle
  2 |q - q'| <= 4 sqrt(3) h = 4.8e-3 rad (0.28 degrees). SH: round(128 x) (+-0.5/128), snapped to buckets of 8 (degree 1)
  or 16 (above) steps: <= 4.5/128 and 8.5/128 of the value clamped to [-1, 127/128].
- glTF: float32. Centres, f_dc and SH are the trained floats with signs flipped (exact); scale,
  rotation, opacity are exp / normalise / sigmoid rounded once to float32.
"""

from __future__ import annotations

import gzip
import re
import struct
from pathlib import Path

import numpy as np
import pytest
import torch

from pointrix_lite.cli.export import main
from pointrix_lite.export import export_gaussians, get_format
from pointrix_lite.export.filters import Selection
from pointrix_lite.export.formats import spz_format
from pointrix_lite.io.ply import save_ply

from .readers import LUF, RDF, RUB, SH_C0, read_glb, read_spz, rotation_matrices, separable_params, sh_flip_factors

EPS = 1e-6
KHR = "KHR_gaussian_splatting"


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-x))


def _expected(params, signs):
    """The source Gaussians in the frame ``diag(signs)``: (means, rotation matrices, shN)."""
    p = {k: v.double().numpy() for k, v in params.items()}
    s = np.diag(signs)
    k = p["shN"].shape[1]
    return (
        p,
        p["means"] * signs,
        s @ rotation_matrices(p["quats"]) @ s,
        p["shN"] * sh_flip_factors(tuple(signs))[:k, None],
    )


def _rotation_angle(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    cos = (np.einsum("nij,nij->n", a, b) - 1) / 2  # trace(a^T b) = 1 + 2 cos(angle)
    return np.arccos(np.clip(cos, -1, 1))


# ------------------------------------------------------------------ SPZ
def test_spz_is_gzip_with_a_v3_header(tmp_path):
    params = separable_params(100, sh_degree=2, seed=1)
    report = export_gaussians(params, get_format("spz"), tmp_path / "m.spz")
    data = (tmp_path / "m.spz").read_bytes()
    assert report.size == len(data) and data[:2] == b"\x1f\x8b"  # a gzip member, as spz's loaders expect
    raw = gzip.decompress(data)
    assert struct.unpack_from("<IIIBBBB", raw) == (0x5053474E, 3, 100, 2, 12, 0, 0)
    assert raw[:4] == b"NGSP"
    assert len(raw) == 16 + 100 * (9 + 1 + 3 + 3 + 4 + 8 * 3)  # pos, alpha, colour, scale, rotation, SH


@pytest.mark.parametrize("sh_degree, frame, signs", [(0, None, RDF), (3, None, RDF), (3, "rdf", RDF), (3, "rub", RUB)])
def test_spz_decodes_to_the_model(tmp_path, sh_degree, frame, signs):
    params = separable_params(600, sh_degree=sh_degree, seed=10 + sh_degree)
    fmt = get_format("spz") if frame is None else spz_format(frame)  # None: the default, PLY's RDF
    report = export_gaussians(params, fmt, tmp_path / "m.spz")
    d = read_spz(tmp_path / "m.spz")
    p, means, rots, shN = _expected(params, signs)
    assert report.num_out == d["header"]["n"] == 600 and report.sh_degree == d["header"]["degree"] == sh_degree
    assert np.abs(d["means"] - means).max() <= 2.0**-13 + EPS  # records keep the source order
    assert np.abs(d["alpha"] - _sigmoid(p["opacities"])).max() <= 0.5 / 255 + EPS
    dc = p["sh0"][:, 0]
    inside = np.abs(dc * 0.15) < 0.5 - 1 / 255  # colour bytes clamp at 0 and 255
    assert inside.mean() > 0.9
    assert np.abs(d["f_dc"] - dc)[inside].max() <= 0.5 / (0.15 * 255) + EPS
    assert np.abs(d["scales"] - p["scales"]).max() <= 1 / 32 + EPS
    assert _rotation_angle(rotation_matrices(d["quats"][:, [3, 0, 1, 2]]), rots).max() <= 4.8e-3
    assert d["shN"].shape == shN.shape
    if sh_degree:
        err = np.abs(d["shN"] - np.clip(shN, -1, 127 / 128))
        assert err[:, :3].max() <= 4.5 / 128 + EPS and err[:, 3:].max() <= 8.5 / 128 + EPS
        assert err[:, :3].max() > 3 / 128  # the 5-bit buckets are really used


def test_spz_cuts_sh_and_keeps_every_centre_with_fewer_fractional_bits(tmp_path):
    params = separable_params(400, sh_degree=4, seed=3)  # degree 4 is cut to 3
    params["means"][0, 0] = 2048.0  # x * 2^12 = 2^23: does not fit 24-bit two's complement at 12 bits
    params["opacities"][:2] = 5.0
    report = export_gaussians(params, get_format("spz"), tmp_path / "m.spz", Selection(min_opacity=0.5))
    kept = (torch.sigmoid(params["opacities"]) >= 0.5).numpy()
    d = read_spz(tmp_path / "m.spz")
    assert report.sh_degree == d["header"]["degree"] == 3
    assert report.num_out == d["header"]["n"] == kept.sum() < 400 and kept[0]  # nothing dropped for its position
    assert d["header"]["frac"] == 11  # one bit less: +-4096 fits
    assert np.abs(d["means"] - params["means"].double().numpy()[kept]).max() <= 2.0**-12 + EPS  # RDF: as trained
    assert d["means"][0, 0] == 2048.0
    params["means"][0, 0] = 100.0  # within +-2048 again: spz's own 12 bits
    export_gaussians(params, get_format("spz"), tmp_path / "n.spz")
    assert read_spz(tmp_path / "n.spz")["header"]["frac"] == 12


def test_spz_refuses_centres_beyond_24_bits_naming_count_and_extent(tmp_path):
    from pointrix_lite.errors import DataError

    params = separable_params(10, sh_degree=0, seed=4)
    params["means"][3, 2] = -9.0e6  # beyond 2^23 even with no fractional bit
    with pytest.raises(
        DataError,
        match=r"^spz: 1 Gaussian centre\(s\) lie beyond \+-8388608 scene units \(largest \|coordinate\| 9e\+06\)",
    ):
        export_gaussians(params, get_format("spz"), tmp_path / "far.spz")
    assert not (tmp_path / "far.spz").exists()  # nothing half-written


def _scene_and_a_stray(n: int = 200) -> dict[str, torch.Tensor]:
    """``n`` Gaussians within +-3 units, then one stray at x = 1e5 (as a floater pushed far out)."""
    params = separable_params(n + 1, sh_degree=1, seed=12)
    params["means"][-1] = torch.tensor([1.0e5, 0.5, -0.5])
    return params


def _precision_lines(out: str) -> list[str]:
    return [line for line in out.splitlines() if "precision:" in line]


def test_cli_prints_the_spz_precision_and_the_centre_that_chose_it(tmp_path, capsys):
    from pointrix_lite.export.decode_spz_glb import read_spz as decode_spz

    params = _scene_and_a_stray()
    ply = save_ply(params, tmp_path / "scene.ply")
    assert main(["--ply", str(ply), "--format", "spz", "--out", str(tmp_path / "all.spz")]) == 0
    assert _precision_lines(capsys.readouterr().out) == [
        "  precision: 6 fractional bits, centres rounded to 2^-6 = 0.0156 scene units, 64x coarser than spz's 12 "
        "bits for every centre, because the farthest centre lies at (100000, 0.5, -0.5), 100000 units out on an "
        "axis; if it is a stray, --max-distance D drops centres farther than D from the scene centre first"
    ]
    means = params["means"].double().numpy()
    error = np.abs(decode_spz(tmp_path / "all.spz")["means"].double().numpy() - means)[:-1].max()
    assert 2.0**-10 < error <= 2.0**-7 + EPS  # the whole scene pays for the one stray: 2^-7, not 2^-13

    # the scene alone: spz's own 12 bits, said so
    clean = {k: v[:-1] for k, v in params.items()}
    assert main(["--ply", str(save_ply(clean, tmp_path / "clean.ply")), "--format", "spz"]) == 0
    far = clean["means"][clean["means"].abs().amax(dim=1).argmax()].tolist()
    assert _precision_lines(capsys.readouterr().out) == [
        "  precision: 12 fractional bits, centres rounded to 2^-12 = 0.000244 scene units (spz's own; the farthest "
        f"centre, at ({', '.join(f'{v:.6g}' for v in far)}), is within +-2048)"
    ]

    # with the cut-off the stray goes first: the file is the scene-alone file, byte for byte
    argv = ["--ply", str(ply), "--format", "spz", "--max-distance", "50", "--out", str(tmp_path / "cut.spz")]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "  removed: invalid (non-finite or zero rotation): 0, farther than 50 from the scene centre: 1" in out
    assert _precision_lines(out)[0].startswith("  precision: 12 fractional bits")
    assert (tmp_path / "cut.spz").read_bytes() == (tmp_path / "clean.spz").read_bytes()
    decoded = decode_spz(tmp_path / "cut.spz")["means"].double().numpy()
    assert decoded.shape == (200, 3) and np.abs(decoded - means[:-1]).max() <= 2.0**-13 + EPS


def test_max_distance_is_measured_from_the_median_centre(tmp_path):
    """Any format: the scene 500 units from the origin keeps every Gaussian, the stray goes."""
    params = _scene_and_a_stray()
    params["means"][:-1] += torch.tensor([500.0, 0.0, 0.0])  # a scene away from the origin: its own centre counts
    report = export_gaussians(params, get_format("splat"), tmp_path / "m.splat", Selection(max_distance=50))
    assert report.num_out == 200 and report.removed[-1] == ("farther than 50 from the scene centre", 1)
    assert (tmp_path / "m.splat").stat().st_size == 200 * 32  # 32-byte records: the scene, not the stray


# ------------------------------------------------------------------ glTF
@pytest.mark.parametrize("sh_degree", [0, 1, 3])
def test_glb_decodes_to_the_model(tmp_path, sh_degree):
    params = separable_params(500, sh_degree=sh_degree, seed=20 + sh_degree)
    report = export_gaussians(params, get_format("glb"), tmp_path / "m.glb")
    gltf, a = read_glb(tmp_path / "m.glb")
    p, means, rots, shN = _expected(params, LUF)
    prim = gltf["meshes"][0]["primitives"][0]
    assert gltf["asset"]["version"] == "2.0" and gltf["extensionsUsed"] == [KHR] and "extensionsRequired" not in gltf
    assert prim["mode"] == 0 and prim["extensions"][KHR] == {"kernel": "ellipse", "colorSpace": "srgb_rec709_display"}
    sh_names = [f"{KHR}:SH_DEGREE_{deg}_COEF_{n}" for deg in range(1, sh_degree + 1) for n in range(2 * deg + 1)]
    assert list(a) == [
        "POSITION",
        "COLOR_0",
        f"{KHR}:SCALE",
        f"{KHR}:ROTATION",
        f"{KHR}:OPACITY",
        f"{KHR}:SH_DEGREE_0_COEF_0",
        *sh_names,
    ]
    assert report.num_out == len(a["POSITION"]) == 500 and report.sh_degree == sh_degree
    pos_acc = gltf["accessors"][prim["attributes"]["POSITION"]]
    assert pos_acc["min"] == a["POSITION"].min(0).tolist() and pos_acc["max"] == a["POSITION"].max(0).tolist()

    np.testing.assert_array_equal(a["POSITION"], means.astype(np.float32))
    np.testing.assert_allclose(a[f"{KHR}:SCALE"], np.exp(p["scales"]), rtol=1e-6)
    q = a[f"{KHR}:ROTATION"].astype(np.float64)
    np.testing.assert_allclose(np.linalg.norm(q, axis=1), 1, atol=1e-6)
    np.testing.assert_allclose(rotation_matrices(q[:, [3, 0, 1, 2]]), rots, atol=1e-6)  # stored x, y, z, w
    alpha = _sigmoid(p["opacities"])
    np.testing.assert_allclose(a[f"{KHR}:OPACITY"][:, 0], alpha, atol=1e-7)
    np.testing.assert_array_equal(a[f"{KHR}:SH_DEGREE_0_COEF_0"], p["sh0"][:, 0].astype(np.float32))
    stored = np.stack([a[name] for name in sh_names], 1) if sh_names else np.zeros((500, 0, 3))
    np.testing.assert_array_equal(stored, shN.astype(np.float32))
    srgb = np.clip(0.5 + SH_C0 * p["sh0"][:, 0], 0, 1)
    linear = np.where(srgb <= 0.04045, srgb / 12.92, ((srgb + 0.055) / 1.055) ** 2.4)
    np.testing.assert_allclose(a["COLOR_0"], np.concatenate([linear, alpha[:, None]], 1), atol=1e-6)


def test_glb_filters_apply(tmp_path):
    params = separable_params(300, sh_degree=3, seed=4)
    sel = Selection(sphere=(0.0, 0.0, 0.0, 2.0), sh_degree=1)
    report = export_gaussians(params, get_format("glb"), tmp_path / "m.glb", sel)
    inside = (params["means"].norm(dim=1) <= 2.0).numpy()
    _, a = read_glb(tmp_path / "m.glb")
    assert report.num_out == len(a["POSITION"]) == inside.sum() < 300
    np.testing.assert_array_equal(a["POSITION"], (params["means"].numpy()[inside] * LUF).astype(np.float32))
    assert f"{KHR}:SH_DEGREE_1_COEF_2" in a and f"{KHR}:SH_DEGREE_2_COEF_0" not in a


# ------------------------------------------------------------------ command line (the hook: test_export_hook.py)
def test_cli_writes_spz_and_glb(tmp_path, capsys):
    params = separable_params(200, sh_degree=1, seed=5)
    ply = save_ply(params, tmp_path / "scene.ply")
    assert main(["--ply", str(ply), "--format", "spz"]) == 0
    assert main(["--ply", str(ply), "--format", "glb", "--min-opacity", "0.5"]) == 0
    out = capsys.readouterr().out
    assert f"wrote {tmp_path / 'scene.spz'} (spz)" in out and f"wrote {tmp_path / 'scene.glb'} (glb)" in out
    assert read_spz(tmp_path / "scene.spz")["header"]["n"] == 200
    kept = int((torch.sigmoid(params["opacities"]) >= 0.5).sum())
    assert len(read_glb(tmp_path / "scene.glb")[1]["POSITION"]) == kept < 200
    assert "axes: rdf (PLY's, upright in SuperSplat, Spark and Babylon.js" in out


def test_cli_spz_frame(tmp_path, capsys):
    params = separable_params(200, sh_degree=1, seed=7)
    ply = save_ply(params, tmp_path / "scene.ply")
    assert main(["--ply", str(ply), "--format", "spz", "--out", str(tmp_path / "rdf.spz"), "--spz-frame", "rdf"]) == 0
    assert main(["--ply", str(ply), "--format", "spz", "--out", str(tmp_path / "rub.spz"), "--spz-frame", "rub"]) == 0
    assert "axes: rub (Niantic's documented frame" in capsys.readouterr().out
    rdf, rub = read_spz(tmp_path / "rdf.spz"), read_spz(tmp_path / "rub.spz")
    np.testing.assert_array_equal(rub["means"], rdf["means"] * RUB)  # 180 degrees about x, exact
    assert np.abs(rdf["means"] - params["means"].double().numpy()).max() <= 2.0**-13 + EPS


SPZ_FRAME_ERRORS = [
    (["--format", "spz", "--spz-frame", "ruf"], "--spz-frame: unknown SPZ frame 'ruf' (known: rdf, rub)"),
    (["--format", "sog", "--spz-frame", "rub"], "--spz-frame: applies to --format spz only, got --format sog"),
]


@pytest.mark.parametrize("args, message", SPZ_FRAME_ERRORS)
def test_cli_spz_frame_errors_are_one_line(tmp_path, capsys, args, message):
    ply = save_ply(separable_params(20, sh_degree=0, seed=8), tmp_path / "scene.ply")
    assert main(["--ply", str(ply), *args]) == 2
    assert capsys.readouterr().err == f"error: {message}\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scene.ply"]  # nothing written


def test_errors_md_lists_the_export_messages(tmp_path, capsys):
    """docs/errors.md's export.py table, row by row: the message export.py prints for that input
    (``<...>`` stands for a path or a name, as in the table)."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "errors.md").read_text()
    section = text.split("\n## export.py\n", 1)[1].split("\n## ", 1)[0]
    documented = re.findall(r"^\| .+ \| `(.+)` \|$", section, re.M)
    ply = save_ply(separable_params(20, sh_degree=0, seed=8), tmp_path / "scene.ply")
    empty = save_ply({k: v[:0] for k, v in separable_params(8, sh_degree=0).items()}, tmp_path / "empty.ply")
    inputs = [
        *(["--ply", str(ply), *args] for args, _ in SPZ_FRAME_ERRORS),
        ["--ply", str(empty), "--format", "sog"],
        ["--ply", str(ply), "--format", "spz", "--max-distance", "0"],
    ]
    assert len(documented) == len(inputs)
    for argv, template in zip(inputs, documented):
        assert main(argv) == 2
        err = capsys.readouterr().err
        pattern = ".+".join(re.escape(part) for part in re.split(r"<[^<>]+>", template))
        assert re.fullmatch(f"error: {pattern}\n", err), (argv, err)


def test_project_decoders_agree_with_the_test_readers(tmp_path):
    """pointrix_lite.export.decode_spz_glb (the export benchmark's readers, back in RDF) against readers.py."""
    from pointrix_lite.export.decode_spz_glb import read_glb as decode_glb
    from pointrix_lite.export.decode_spz_glb import read_spz as decode_spz

    params = separable_params(300, sh_degree=3, seed=6)
    params["opacities"] = params["opacities"].clamp(-4, 4)
    for fmt in ("spz", "glb"):
        export_gaussians(params, get_format(fmt), tmp_path / f"m.{fmt}")
    export_gaussians(params, spz_format("rub"), tmp_path / "rub.spz")
    mine, ref = decode_spz(tmp_path / "m.spz"), read_spz(tmp_path / "m.spz")
    np.testing.assert_allclose(mine["means"].numpy(), ref["means"], atol=1e-6)  # RDF: stored as trained
    np.testing.assert_allclose(mine["shN"].numpy(), ref["shN"], atol=1e-6)
    mine, ref = decode_spz(tmp_path / "rub.spz", frame="rub"), read_spz(tmp_path / "rub.spz")
    np.testing.assert_allclose(mine["means"].numpy(), ref["means"] * RUB, atol=1e-6)
    np.testing.assert_allclose(mine["scales"].numpy(), ref["scales"], atol=1e-6)
    np.testing.assert_allclose(
        rotation_matrices(mine["quats"].double().numpy()),
        np.diag(RUB) @ rotation_matrices(ref["quats"][:, [3, 0, 1, 2]]) @ np.diag(RUB),
        atol=1e-6,
    )
    np.testing.assert_allclose(
        torch.sigmoid(mine["opacities"].double()).numpy(), np.clip(ref["alpha"], 1e-6, 1 - 1e-6), atol=1e-6
    )
    np.testing.assert_allclose(mine["sh0"][:, 0].numpy(), ref["f_dc"], atol=1e-5)
    np.testing.assert_allclose(mine["shN"].numpy(), ref["shN"] * sh_flip_factors(tuple(RUB))[:, None], atol=1e-6)
    mine = decode_glb(tmp_path / "m.glb")
    for key in ("means", "shN"):  # sign flips only
        np.testing.assert_array_equal(mine[key].numpy(), params[key].numpy(), err_msg=key)
    np.testing.assert_allclose(mine["sh0"].numpy(), params["sh0"].numpy(), atol=1e-6)  # via 0.5 + C0 * f_dc
    np.testing.assert_allclose(mine["scales"].numpy(), params["scales"].numpy(), atol=1e-6)
    np.testing.assert_allclose(mine["opacities"].numpy(), params["opacities"].numpy(), atol=1e-4)
    q = params["quats"] / params["quats"].norm(dim=1, keepdim=True)
    np.testing.assert_allclose(mine["quats"].numpy(), q.numpy(), atol=1e-6)


def test_project_decoders_name_the_file_on_bad_input(tmp_path):
    from pointrix_lite.errors import DataError
    from pointrix_lite.export.decode_spz_glb import read_glb as decode_glb
    from pointrix_lite.export.decode_spz_glb import read_spz as decode_spz

    (tmp_path / "plain.spz").write_bytes(b"not gzip at all")
    (tmp_path / "v4.spz").write_bytes(gzip.compress(struct.pack("<IIIBBBB", 0x5053474E, 4, 1, 0, 12, 0, 0)))
    (tmp_path / "short.spz").write_bytes(gzip.compress(struct.pack("<IIIBBBB", 0x5053474E, 3, 10, 0, 12, 0, 0)))
    (tmp_path / "m.glb").write_bytes(b"PK\x03\x04" + bytes(40))
    for name, message in (
        ("plain.spz", "not a gzip SPZ file"),
        ("v4.spz", "version 4; readable"),
        ("short.spz", "needed for 10 Gaussians"),
    ):
        with pytest.raises(DataError, match=f"{name}: .*{message}"):
            decode_spz(tmp_path / name)
    with pytest.raises(DataError, match="m.glb: not a glTF binary"):
        decode_glb(tmp_path / "m.glb")
