"""PLY export/import: INRIA layout re-read by plyfile, exact round trip, identical re-render."""

from __future__ import annotations

import numpy as np
import numpy.lib.recfunctions  # noqa: F401  (repack_fields)
import pytest
import torch
from plyfile import PlyData, PlyElement

from pointrix_lite.errors import DataError, PointrixError
from pointrix_lite.export import load_ply, save_ply
from pointrix_lite.model import GaussianModel
from tests.model.helpers import make_model


def _random_model(sh_degree: int = 3, n: int = 64) -> GaussianModel:
    model = make_model(n, sh_degree=sh_degree)
    g = torch.Generator().manual_seed(sh_degree)
    with torch.no_grad():
        for p in model.params.values():
            p.copy_(torch.randn(p.shape, generator=g) * 0.5)
        model.params["scales"].sub_(2.5)  # small Gaussians, so the render has structure
    return model


def test_file_layout_read_back_by_plyfile(tmp_path) -> None:
    model = _random_model(3)
    path = save_ply(model, tmp_path / "point_cloud.ply")
    ply = PlyData.read(str(path))
    assert ply.text is False and ply.byte_order == "<"
    (vertex,) = ply.elements
    assert vertex.name == "vertex" and vertex.count == 64
    names = [prop.name for prop in vertex.properties]
    assert names == (
        ["x", "y", "z", "nx", "ny", "nz", "f_dc_0", "f_dc_1", "f_dc_2"]
        + [f"f_rest_{i}" for i in range(45)]
        + ["opacity", "scale_0", "scale_1", "scale_2", "rot_0", "rot_1", "rot_2", "rot_3"]
    )
    assert all(prop.val_dtype in ("f4", "float32", "float") for prop in vertex.properties)
    assert vertex.data.dtype.itemsize == 4 * len(names)
    p = {k: v.detach().numpy() for k, v in model.params.items()}
    np.testing.assert_array_equal(vertex["y"], p["means"][:, 1])
    np.testing.assert_array_equal(vertex["nz"], np.zeros(64, np.float32))
    np.testing.assert_array_equal(vertex["f_dc_2"], p["sh0"][:, 0, 2])
    # Channel-major: f_rest_{c * 15 + j} is coefficient j + 1 of channel c.
    for c in range(3):
        for j in (0, 7, 14):
            np.testing.assert_array_equal(vertex[f"f_rest_{c * 15 + j}"], p["shN"][:, j, c])
    np.testing.assert_array_equal(vertex["opacity"], p["opacities"])
    np.testing.assert_array_equal(vertex["scale_1"], p["scales"][:, 1])
    np.testing.assert_array_equal(vertex["rot_0"], p["quats"][:, 0])  # w first
    assert not list(tmp_path.glob(".*tmp"))  # the temporary file was renamed away


@pytest.mark.parametrize("sh_degree", [0, 1, 3])
def test_round_trip_is_exact(tmp_path, sh_degree: int) -> None:
    model = _random_model(sh_degree)
    path = save_ply(model.params, tmp_path / "m.ply")
    loaded = load_ply(path)
    assert set(loaded) == set(model.params)
    for name, p in model.params.items():
        assert loaded[name].dtype == torch.float32
        assert torch.equal(loaded[name], p.detach()), name
    again = GaussianModel.from_ply(path)
    assert again.config.sh_degree == sh_degree and again.render_params()["sh_degree"] == sh_degree


def test_reads_gsplat_exported_files(tmp_path) -> None:
    """gsplat's exporter writes the same layout without normals; we read it to the same tensors."""
    from gsplat.exporter import export_splats

    model = _random_model(2)
    p = {k: v.detach() for k, v in model.params.items()}
    path = tmp_path / "gsplat.ply"
    export_splats(p["means"], p["scales"], p["quats"], p["opacities"], p["sh0"], p["shN"], save_to=str(path))
    loaded = load_ply(path)
    for name in p:
        assert torch.equal(loaded[name], p[name]), name


def test_rerender_is_identical(tmp_path) -> None:
    from pointrix_lite.renderer import rasterization

    model = _random_model(3)
    model.step = 10_000  # full SH degree
    save_ply(model, tmp_path / "m.ply")
    loaded = GaussianModel.from_ply(tmp_path / "m.ply")
    viewmats = torch.eye(4)[None].clone()
    viewmats[0, 2, 3] = 4.0  # camera 4 units behind the origin, looking down +z
    Ks = torch.tensor([[[40.0, 0, 16], [0, 40.0, 16], [0, 0, 1]]])
    images = []
    for m in (model, loaded):
        with torch.no_grad():
            rp = m.render_params()
            rgb, alpha, _ = rasterization(
                rp["means"],
                rp["quats"],
                rp["scales"],
                rp["opacities"],
                rp["colors"],
                viewmats,
                Ks,
                32,
                32,
                sh_degree=rp["sh_degree"],
                backend="torch",
            )
        images.append(rgb)
    assert images[0].shape == (1, 32, 32, 3)
    assert images[0].std() > 0.01  # the scene is visible, so equality means something
    assert torch.equal(images[0], images[1])


def test_bad_files_raise_one_line_errors_naming_the_file(tmp_path) -> None:
    not_ply = tmp_path / "notes.ply"
    not_ply.write_text("hello\nworld\n")
    with pytest.raises(DataError, match="notes.ply"):
        load_ply(not_ply)
    with pytest.raises(DataError, match="missing.ply"):
        load_ply(tmp_path / "missing.ply")
    # A point cloud PLY (no Gaussian properties).
    pts = np.zeros(3, dtype=[("x", "f4"), ("y", "f4"), ("z", "f4")])
    PlyData([PlyElement.describe(pts, "vertex")]).write(str(tmp_path / "points.ply"))
    with pytest.raises(DataError, match=r"points.ply.*lacks properties f_dc_0") as info:
        load_ply(tmp_path / "points.ply")
    assert "\n" not in str(info.value)
    # An f_rest count that isn't a whole SH degree.
    model = _random_model(1, n=4)
    save_ply(model, tmp_path / "odd.ply")
    vertex = PlyData.read(str(tmp_path / "odd.ply"))["vertex"]
    names = [n for n in vertex.data.dtype.names if n != "f_rest_8"]
    trimmed = np.lib.recfunctions.repack_fields(vertex.data[names])
    PlyData([PlyElement.describe(trimmed, "vertex")]).write(str(tmp_path / "odd.ply"))
    with pytest.raises(PointrixError, match="odd.ply: 8 f_rest"):
        load_ply(tmp_path / "odd.ply")


def test_save_overwrites_atomically(tmp_path) -> None:
    path = tmp_path / "sub" / "m.ply"
    save_ply(_random_model(0, n=5), path)
    save_ply(_random_model(1, n=7), path)
    assert load_ply(path)["means"].shape == (7, 3)
    assert sorted(p.name for p in path.parent.iterdir()) == ["m.ply"]
