"""Each export filter: the file holds exactly the Gaussians the filter keeps (positions read back
exactly from .splat records; SH read back with plyfile), and the report counts what it removed."""

from __future__ import annotations

import numpy as np
import pytest
from plyfile import PlyData

from pointrix_lite.errors import ConfigError, DataError
from pointrix_lite.export import Selection, export_gaussians, get_format

from .readers import read_splat, separable_params


def _rows(a: np.ndarray) -> set[tuple[float, ...]]:
    return {tuple(r) for r in a.astype(np.float32).tolist()}


def _export_splat(tmp_path, params, selection):
    report = export_gaussians(params, get_format("splat"), tmp_path / "m.splat", selection)
    return report, read_splat(tmp_path / "m.splat")["means"]


@pytest.fixture
def params():
    return separable_params(512, sh_degree=3, seed=11)


def test_min_opacity(tmp_path, params):
    alpha = 1 / (1 + np.exp(-params["opacities"].double().numpy()))
    keep = alpha >= 0.3
    report, means = _export_splat(tmp_path, params, Selection(min_opacity=0.3))
    assert _rows(means) == _rows(params["means"].numpy()[keep])
    assert report.removed == [("invalid (non-finite or zero rotation)", 0), ("opacity < 0.3", int((~keep).sum()))]
    assert report.num_out == keep.sum() and 0 < keep.sum() < 512


def test_box(tmp_path, params):
    m = params["means"].numpy()
    box = (-2.0, -1.5, -3.5, 1.0, 2.0, 0.5)
    keep = np.all((m >= box[:3]) & (m <= box[3:]), axis=1)
    report, means = _export_splat(tmp_path, params, Selection(box=box))
    assert _rows(means) == _rows(m[keep]) and 0 < keep.sum() < 512
    assert report.removed[-1] == ("outside box -2 -1.5 -3.5 1 2 0.5", int((~keep).sum()))


def test_sphere(tmp_path, params):
    m = params["means"].numpy()
    keep = np.linalg.norm(m.astype(np.float64) - [0.5, 0.0, -0.5], axis=1) <= 2.0
    report, means = _export_splat(tmp_path, params, Selection(sphere=(0.5, 0.0, -0.5, 2.0)))
    assert _rows(means) == _rows(m[keep]) and 0 < keep.sum() < 512
    assert report.removed[-1] == ("outside sphere 0.5 0 -0.5 2", int((~keep).sum()))


def test_filters_compose_in_order(tmp_path, params):
    m = params["means"].numpy()
    alpha = 1 / (1 + np.exp(-params["opacities"].double().numpy()))
    a = alpha >= 0.2
    b = a & np.all((m >= -2) & (m <= 2), axis=1)
    c = b & (np.linalg.norm(m.astype(np.float64), axis=1) <= 2.5)
    report, means = _export_splat(
        tmp_path, params, Selection(min_opacity=0.2, box=(-2, -2, -2, 2, 2, 2), sphere=(0, 0, 0, 2.5))
    )
    assert _rows(means) == _rows(m[c])
    assert [n for _, n in report.removed] == [0, int((~a).sum()), int((a & ~b).sum()), int((b & ~c).sum())]


@pytest.mark.parametrize("degree", [0, 1, 2, 3])
def test_sh_degree_cut_keeps_the_low_bands(tmp_path, params, degree):
    report = export_gaussians(params, get_format("ply"), tmp_path / "m.ply", Selection(sh_degree=degree))
    vertex = PlyData.read(str(tmp_path / "m.ply"))["vertex"]
    k = (degree + 1) ** 2 - 1
    rest = sorted((p.name for p in vertex.properties if p.name.startswith("f_rest_")), key=lambda s: int(s[7:]))
    assert rest == [f"f_rest_{i}" for i in range(3 * k)] and report.sh_degree == degree
    shN = params["shN"].numpy()
    for c in range(3):  # channel-major: f_rest_{c*k + j} is band coefficient j of channel c
        for j in range(k):
            np.testing.assert_array_equal(vertex[f"f_rest_{c * k + j}"], shN[:, j, c])
    assert report.full_ply_size > report.size or degree == 3


def test_sh_degree_above_the_models_keeps_all(tmp_path):
    params = separable_params(64, sh_degree=1)
    report = export_gaussians(params, get_format("ply"), tmp_path / "m.ply", Selection(sh_degree=3))
    assert report.sh_degree == 1


def test_empty_selection_is_an_error_and_writes_nothing(tmp_path, params):
    with pytest.raises(DataError, match=r"no Gaussians left to export out of 512 \(removed by outside box"):
        export_gaussians(params, get_format("splat"), tmp_path / "m.splat", Selection(box=(50, 50, 50, 60, 60, 60)))
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize(
    "kwargs, key",
    [
        ({"min_opacity": 1.5}, "--min-opacity"),
        ({"box": (0, 0, 0, -1, 1, 1)}, "--box"),
        ({"box": (0, 0, 0, 1, float("nan"), 1)}, "--box"),
        ({"sphere": (0, 0, 0, 0)}, "--sphere"),
        ({"sh_degree": 4}, "--sh-degree"),
    ],
)
def test_bad_filter_options(kwargs, key):
    with pytest.raises(ConfigError, match=key):
        Selection(**kwargs)
