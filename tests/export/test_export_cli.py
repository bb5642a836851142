"""scripts/export.py: sources (experiment folder + checkpoint, PLY), what it prints, bad input."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import yaml
from plyfile import PlyData, PlyElement

from pointrix_lite.cli.export import main
from pointrix_lite.engine.checkpoint import CHECKPOINT_DIR, FORMAT_VERSION, save_checkpoint_file, write_latest_pointer
from pointrix_lite.io.ply import save_ply

from .readers import read_compressed_ply, read_splat, separable_params


def _experiment(root, params, steps=(100, 200)):
    """An experiment folder as train.py leaves it: config.yaml, checkpoints, latest.txt."""
    exp = root / "exp"
    (exp / CHECKPOINT_DIR).mkdir(parents=True)
    (exp / "config.yaml").write_text(yaml.safe_dump({"model": {"type": "GaussianModel"}}))
    for i, step in enumerate(steps):
        state = {f"params.{k}": v[: len(v) - 10 * (len(steps) - 1 - i)] for k, v in params.items()}  # earlier: fewer
        ckpt = {"format": FORMAT_VERSION, "step": step, "model": state, "config": {"model": {"type": "GaussianModel"}}}
        save_checkpoint_file(ckpt, exp / CHECKPOINT_DIR / f"step_{step:06d}.pth")
    write_latest_pointer(exp / CHECKPOINT_DIR, f"step_{steps[-1]:06d}.pth")
    return exp


@pytest.fixture
def params():
    p = separable_params(300, sh_degree=1, seed=21)
    p["opacities"] = p["opacities"].abs() + 0.5
    return p


def test_exp_dir_latest_checkpoint_to_compressed_ply(tmp_path, params, capsys):
    exp = _experiment(tmp_path, params)
    assert main(["--exp-dir", str(exp), "--format", "ply_compressed"]) == 0
    out = capsys.readouterr().out
    path = exp / "point_cloud.compressed.ply"
    size = path.stat().st_size
    assert f"source: {exp / CHECKPOINT_DIR / 'step_000200.pth'}" in out
    assert f"wrote {path} (ply_compressed): {size / 1e6:.2f} MB, 300 Gaussians, SH degree 1" in out
    assert "ply_compressed drops opacity <= 1/255: 0" in out
    full = 300 * 4 * (14 + 3 + 9) + len(b"ply\nformat binary_little_endian 1.0\nelement vertex 300\nend_header\n")
    full += sum(
        len(f"property float {n}\n")
        for n in ["x", "y", "z", "nx", "ny", "nz", "opacity"]
        + [f"f_dc_{i}" for i in range(3)]
        + [f"f_rest_{i}" for i in range(9)]
        + [f"scale_{i}" for i in range(3)]
        + [f"rot_{i}" for i in range(4)]
    )
    assert f"{full / size:.2f}x smaller than the full PLY" in out
    assert len(read_compressed_ply(path)["means"]) == 300


def test_exp_dir_named_checkpoint(tmp_path, params, capsys):
    exp = _experiment(tmp_path, params)
    ckpt = exp / CHECKPOINT_DIR / "step_000100.pth"
    assert main(["--exp-dir", str(exp), "--checkpoint", str(ckpt), "--format", "splat"]) == 0
    assert len(read_splat(exp / "point_cloud_step_000100.splat")["means"]) == 290  # that checkpoint's model
    assert "290 Gaussians" in capsys.readouterr().out


def test_ply_source_with_filters_and_out(tmp_path, params, capsys):
    src = save_ply(params, tmp_path / "scene.ply")
    out = tmp_path / "sub" / "shared.splat"
    code = main(
        [
            "--ply",
            str(src),
            "--format",
            "splat",
            "--out",
            str(out),
            "--sphere",
            "0",
            "0",
            "0",
            "2",
            "--min-opacity",
            "0.75",
        ]
    )
    assert code == 0
    m = params["means"].numpy()
    alpha = torch.sigmoid(params["opacities"]).numpy()
    keep = (alpha >= 0.75) & (np.linalg.norm(m.astype(np.float64), axis=1) <= 2)
    assert len(read_splat(out)["means"]) == keep.sum()
    text = capsys.readouterr().out
    assert f"opacity < 0.75: {(alpha < 0.75).sum()}" in text
    assert f"outside sphere 0 0 0 2: {((alpha >= 0.75) & ~keep).sum()}" in text


def test_ply_source_default_names_beside_the_input(tmp_path, params):
    src = save_ply(params, tmp_path / "scene.ply")
    for fmt, name in (
        ("splat", "scene.splat"),
        ("ply_compressed", "scene.compressed.ply"),
        ("ply", "scene_export.ply"),
    ):
        assert main(["--ply", str(src), "--format", fmt, "--sh-degree", "0"]) == 0
        assert (tmp_path / name).is_file()
    vertex = PlyData.read(str(tmp_path / "scene_export.ply"))["vertex"]
    assert not any(p.name.startswith("f_rest_") for p in vertex.properties)
    np.testing.assert_array_equal(vertex["x"], params["means"][:, 0].numpy())


def test_out_folder_gets_the_default_name(tmp_path, params):
    src = save_ply(params, tmp_path / "scene.ply")
    (tmp_path / "web").mkdir()
    assert main(["--ply", str(src), "--format", "splat", "--out", str(tmp_path / "web")]) == 0
    assert (tmp_path / "web" / "scene.splat").stat().st_size == 300 * 32


def _mesh_ply(path):
    vertex = np.array(
        [(0.0, 0.0, 0.0), (1.0, 0.0, 0.0), (0.0, 1.0, 0.0)], dtype=[("x", "f4"), ("y", "f4"), ("z", "f4")]
    )
    face = np.array([([0, 1, 2],)], dtype=[("vertex_indices", "i4", (3,))])
    PlyData([PlyElement.describe(vertex, "vertex"), PlyElement.describe(face, "face")]).write(str(path))
    return path


def _bad_cases(tmp_path, params):
    src = save_ply(params, tmp_path / "scene.ply")
    exp = _experiment(tmp_path, params)
    (tmp_path / "taken.splat").write_bytes(b"keep me")
    (tmp_path / "no_ckpt").mkdir()
    (tmp_path / "no_ckpt" / "config.yaml").write_text("{}")
    notes = tmp_path / "notes.txt"
    notes.write_text("not a ply")
    return [
        (
            ["--ply", str(src), "--format", "gltf"],
            "--format: unknown export format 'gltf' (known: ply, splat, ply_compressed, spz, sog, glb)",
        ),
        (
            ["--ply", str(_mesh_ply(tmp_path / "mesh.ply")), "--format", "splat"],
            "mesh.ply: 3D Gaussian PLY lacks properties",
        ),
        (["--ply", str(notes), "--format", "splat"], "notes.txt: cannot read as PLY"),
        (["--ply", str(tmp_path / "missing.ply"), "--format", "splat"], "--ply: file not found"),
        (
            ["--ply", str(src), "--format", "splat", "--out", str(tmp_path / "taken.splat")],
            "taken.splat: file exists; pass --overwrite",
        ),
        (["--ply", str(src), "--format", "ply", "--out", str(src), "--overwrite"], "is the input PLY"),
        (
            ["--ply", str(src), "--format", "splat", "--box", "10", "10", "10", "11", "11", "11"],
            "no Gaussians left to export out of 300",
        ),
        (["--ply", str(src), "--format", "splat", "--min-opacity", "2"], "--min-opacity: must be in [0, 1]"),
        (["--exp-dir", str(tmp_path / "nowhere"), "--format", "splat"], "no config.yaml"),
        (["--exp-dir", str(tmp_path / "no_ckpt"), "--format", "splat"], "no checkpoint in"),
        (
            ["--exp-dir", str(exp), "--checkpoint", str(tmp_path / "gone.pth"), "--format", "splat"],
            "--checkpoint: file not found",
        ),
        (
            ["--ply", str(src), "--checkpoint", str(tmp_path / "gone.pth"), "--format", "splat"],
            "--checkpoint goes with --exp-dir",
        ),
        (["--ply", str(src)], "the following arguments are required: --format"),
    ]


def test_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path, params, capsys):
    for argv, message in _bad_cases(tmp_path, params):
        before = sorted(p.name for p in tmp_path.rglob("*"))
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse's own errors
            code = exc.code
        err = capsys.readouterr().err
        assert code == 2, (argv, err)
        assert err.startswith("error: ") and err.count("\n") == 1 and message in err, (argv, err)
        assert sorted(p.name for p in tmp_path.rglob("*")) == before, argv
    assert (tmp_path / "taken.splat").read_bytes() == b"keep me"


def test_checkpoint_without_gaussians(tmp_path, capsys):
    exp = tmp_path / "exp"
    (exp / CHECKPOINT_DIR).mkdir(parents=True)
    (exp / "config.yaml").write_text("{}")
    ckpt = {
        "format": FORMAT_VERSION,
        "step": 1,
        "model": {"weight": torch.zeros(2)},
        "config": {"model": {"type": "MyNet"}},
    }
    save_checkpoint_file(ckpt, exp / CHECKPOINT_DIR / "step_000001.pth")
    assert main(["--exp-dir", str(exp), "--format", "ply"]) == 2
    assert "model MyNet has no Gaussian parameter(s) means" in capsys.readouterr().err
