"""PlyExportHook's formats option: which files it writes, and that each decodes to the model."""

from __future__ import annotations

import types

import numpy as np
import pytest
import torch

from pointrix_lite.errors import ConfigError
from pointrix_lite.export.hook import PlyExportHook
from pointrix_lite.io.ply import load_ply
from pointrix_lite.model.gaussian_model import GaussianModel

from .readers import LUF, match_rows, read_compressed_ply, read_glb, read_sog, read_splat, read_spz


class _Trainer:
    def __init__(self, model, exp_dir, step=0):
        self.model, self.exp_dir, self.global_step = model, exp_dir, step
        self.printed: list[str] = []
        self.console = types.SimpleNamespace(print=lambda msg, **_: self.printed.append(msg))


def _model(n=300):
    model = GaussianModel(GaussianModel.Config(sh_degree=1, init_num_points=n))
    with torch.no_grad():
        model.params["opacities"].fill_(1.0)
    return model


def _exported(trainer: _Trainer, **options) -> PlyExportHook:
    """A PlyExportHook with ``options`` on ``trainer`` after its end-of-training export."""
    hook = PlyExportHook(PlyExportHook.Config(**options))
    hook.trainer = trainer
    hook.after_train()
    return hook


def test_default_writes_only_the_ply(tmp_path):
    _exported(_Trainer(_model(), tmp_path))
    assert [p.name for p in tmp_path.iterdir()] == ["point_cloud.ply"]


def test_all_formats_at_the_end_and_in_snapshots(tmp_path):
    model = _model()
    trainer = _Trainer(model, tmp_path, step=10)
    hook = PlyExportHook(PlyExportHook.Config(every=10, formats=["ply", "splat", "ply_compressed"]))
    hook.trainer = trainer
    hook.after_train_iter(batch_idx=0, batch=[])
    hook.after_train()
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "point_cloud.compressed.ply",
        "point_cloud.ply",
        "point_cloud.splat",
        "point_cloud_step_000010.compressed.ply",
        "point_cloud_step_000010.ply",
        "point_cloud_step_000010.splat",
    ]
    assert hook.paths == [
        tmp_path / "point_cloud.ply",
        tmp_path / "point_cloud.splat",
        tmp_path / "point_cloud.compressed.ply",
    ]
    means = model.params["means"].detach().numpy()
    assert torch.equal(load_ply(tmp_path / "point_cloud.ply")["means"], model.params["means"].detach())
    splat = read_splat(tmp_path / "point_cloud.splat")["means"]
    assert {tuple(r) for r in splat.tolist()} == {tuple(r) for r in means.tolist()}
    comp = read_compressed_ply(tmp_path / "point_cloud.compressed.ply")["means"]
    assert comp.shape == (300, 3)
    assert np.abs(np.sort(comp, 0) - np.sort(means, 0)).max() < (means.max(0) - means.min(0)).max() / 1023


def test_ply_spz_sog_and_glb(tmp_path):
    model = _model()
    hook = _exported(_Trainer(model, tmp_path), formats=["ply", "spz", "sog", "glb"])
    names = ["point_cloud.ply", "point_cloud.spz", "point_cloud.sog", "point_cloud.glb"]
    assert hook.paths == [tmp_path / name for name in names]
    means = model.params["means"].detach().double().numpy()
    assert np.abs(read_spz(hook.paths[1])["means"] - means).max() <= 2.0**-13 + 1e-9  # PLY's frame
    sog = read_sog(hook.paths[2])
    assert sog["meta"]["count"] == 300 and sog["meta"]["shN"]["bands"] == 1
    match_rows(sog["means"], means, tol=1e-3)  # every centre back, in PLY's frame (Morton order)
    np.testing.assert_array_equal(read_glb(hook.paths[3])[1]["POSITION"], (means * LUF).astype(np.float32))


def test_only_web_formats_and_an_empty_model(tmp_path):
    model = _model()
    trainer = _Trainer(model, tmp_path)
    hook = _exported(trainer, formats=["splat"])
    assert hook.path == tmp_path / "point_cloud.splat" and [p.name for p in tmp_path.iterdir()] == ["point_cloud.splat"]
    with torch.no_grad():
        model.params["opacities"].fill_(-10.0)  # alpha 4.5e-5: the compressed format stores none of them
    # a finished run is not failed by an export that has nothing to store
    hook = _exported(trainer, filename="c.ply", formats=["ply_compressed"])
    assert hook.path is None and not (tmp_path / "c.compressed.ply").exists()
    assert "no Gaussians left to export" in trainer.printed[0]


@pytest.mark.parametrize(
    "formats, message", [(["ply", "obj"], "unknown export format 'obj'"), ([], "at least one format")]
)
def test_bad_formats_are_config_errors(formats, message):
    with pytest.raises(ConfigError, match=f"hooks.PlyExportHook.formats: .*{message}"):
        PlyExportHook(PlyExportHook.Config(formats=formats))


def test_spz_precision_lost_to_a_stray_is_printed(tmp_path):
    model = _model()
    trainer = _Trainer(model, tmp_path)
    hook = _exported(trainer, formats=["spz"])
    assert trainer.printed == []  # spz's own 12 bits: nothing to say at the end of a run
    with torch.no_grad():
        model.params["means"][0] = torch.tensor([1.0e5, 0.0, 0.0])
    hook.after_train()
    assert len(trainer.printed) == 1 and trainer.printed[0].startswith(
        "PlyExportHook: point_cloud.spz: precision: 6 fractional bits, centres rounded to 2^-6 = 0.0156 scene units, "
        "64x coarser than spz's 12 bits for every centre, because the farthest centre lies at (100000, 0, 0)"
    )
    assert hook.paths == [tmp_path / "point_cloud.spz"]
