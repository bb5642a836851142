"""Zero Gaussians (a run that pruned every one, an empty PLY) into every format: one line naming the
file and the format, through export.py (from a PLY and from a checkpoint) and through PlyExportHook."""

from __future__ import annotations

import types

import pytest
import torch

from pointrix_lite.cli.export import main
from pointrix_lite.export.formats import FORMATS
from pointrix_lite.export.hook import PlyExportHook
from pointrix_lite.io.ply import load_ply, save_ply
from pointrix_lite.model.gaussian_model import GaussianModel

from .readers import separable_params
from .test_export_cli import _experiment


def _empty() -> dict[str, torch.Tensor]:
    return {k: v[:0] for k, v in separable_params(8, sh_degree=1, seed=0).items()}


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_export_py_refuses_zero_gaussians_in_one_line(tmp_path, capsys, fmt):
    ply = save_ply(_empty(), tmp_path / "empty.ply")
    out = tmp_path / f"out{FORMATS[fmt].suffix}"
    assert main(["--ply", str(ply), "--format", fmt, "--out", str(out)]) == 2
    assert capsys.readouterr().err == f"error: {out}: nothing to export as {fmt}: the source holds no Gaussians\n"
    assert not out.exists()

    exp = _experiment(tmp_path, _empty(), steps=(100,))  # the same from a checkpoint
    assert main(["--exp-dir", str(exp), "--format", fmt]) == 2
    written = exp / f"point_cloud{FORMATS[fmt].suffix}"
    assert capsys.readouterr().err == f"error: {written}: nothing to export as {fmt}: the source holds no Gaussians\n"
    assert not written.exists()


class _Trainer:
    def __init__(self, model, exp_dir):
        self.model, self.exp_dir, self.global_step = model, exp_dir, 0
        self.printed: list[str] = []
        self.console = types.SimpleNamespace(print=lambda msg, **_: self.printed.append(msg))


def test_the_hook_says_one_line_per_format_and_the_run_goes_on(tmp_path):
    model = GaussianModel(GaussianModel.Config(sh_degree=1, init_num_points=8))
    for name, value in _empty().items():  # every Gaussian pruned
        model.params[name] = torch.nn.Parameter(value)
    trainer = _Trainer(model, tmp_path)
    hook = PlyExportHook(PlyExportHook.Config(formats=list(FORMATS)))
    hook.trainer = trainer
    hook.after_train()
    ply = tmp_path / "point_cloud.ply"
    assert trainer.printed == [
        f"PlyExportHook: {ply}: the model holds no Gaussians (every one pruned?); the PLY is empty",
        *(
            f"PlyExportHook: {tmp_path / ('point_cloud' + FORMATS[f].suffix)}: nothing to export as {f}: "
            "the source holds no Gaussians"
            for f in FORMATS
            if f != "ply"
        ),
    ]
    assert hook.paths == [ply] and [p.name for p in tmp_path.iterdir()] == ["point_cloud.ply"]
    assert len(load_ply(ply)["means"]) == 0  # the model as trained, readable
