"""A bad option of any component family fails while the config loads, before the dataset is read.

Each case runs the real command line on a config whose dataset is a tripwire: loading it would
record the call and fail with an AssertionError. A check left in a component's ``__init__`` fails
these tests (the trainer builds the dataset first, so the tripwire fires); a check in the
component's ``Config.__post_init__`` refuses the value inside ``load_experiment``, and the error
names the key where the user wrote it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from pointrix_lite.cli.train import main
from pointrix_lite.config import OptionError
from pointrix_lite.data.base import SceneDataset
from pointrix_lite.engine.hooks import CheckPointHook
from pointrix_lite.registry import DATASETS
from tests.engine.engine_helpers import TOY_PLUGIN, toy_raw_config

LOADED: list[object] = []


class TripwireDataset:
    """A dataset that must never be built by these tests."""

    @dataclass
    class Config:
        pass

    def __init__(self, config: Config) -> None:
        LOADED.append(config)
        raise AssertionError("the dataset was loaded before the bad option was refused")


@pytest.fixture
def tripwire(monkeypatch):
    """Registers TripwireDataset for one test and trips on every real dataset's first step too."""
    monkeypatch.setattr(DATASETS, "_table", {**DATASETS._table, "TripwireDataset": TripwireDataset})

    def open_tripped(self, config):
        LOADED.append(config)
        raise AssertionError("the dataset started loading before the bad option was refused")

    monkeypatch.setattr(SceneDataset, "_open", open_tripped)
    LOADED.clear()
    return LOADED


# family -> (what replaces the toy config's section, the expected one-line error)
CASES = {
    "hooks (list form)": (
        {"hooks": [{"type": "LogHook", "interval": 4}, {"type": "CheckPointHook", "max_keep": 0}]},
        "hooks[1].max_keep: must be >= 1 or null, got 0",
    ),
    "hooks (mapping form)": (
        {"hooks": {"ResolutionScheduleHook": {"full_res_at": 1.5}}},
        "hooks.ResolutionScheduleHook.full_res_at: must be in (0, 1], got 1.5",
    ),
    "hooks (shorthand into a default hook)": (
        {"hooks": [], "save_ckpt_after_iter": -5},
        "hooks.CheckPointHook.interval: must be >= 0 (0: only at the end), got -5",
    ),
    "writers": (
        {"writers": [{"type": "TensorboardWriter"}, {"type": "JsonlWriter", "filename": "/tmp/log.jsonl"}]},
        "writers[1].filename: must be a path relative to exp_dir, got '/tmp/log.jsonl'",
    ),
    "model": (
        {"model": {"type": "GaussianModel", "lr": {"means": -1.0}}},
        "model.lr.means: must be >= 0, got -1.0",
    ),
    "strategy": (
        {"strategy": {"type": "MCMCStrategy", "min_opacity": 1.0}},
        "strategy.min_opacity: must be in [0, 1), got 1.0",
    ),
    "renderer": (
        {"renderer": {"type": "GaussianRenderer", "tile_size": 0}},
        "renderer.tile_size: must be >= 1, got 0",
    ),
    "dataset (colmap)": (
        {"dataset": {"type": "ColmapDataset", "data_path": "scene", "test_every": 0}},
        "dataset.test_every: must be >= 1, got 0",
    ),
    "dataset (nerf synthetic)": (
        {"dataset": {"type": "NerfSyntheticDataset", "data_path": "scene", "scale": -2}},
        "dataset.scale: must be positive or auto, got -2.0",
    ),
}


@pytest.mark.parametrize("family", sorted(CASES))
def test_bad_option_fails_before_the_dataset_loads(family, tmp_path, capsys, tripwire):
    section, message = CASES[family]
    raw = {**toy_raw_config(tmp_path), "dataset": {"type": "TripwireDataset"}, **section}
    if "data_path" in raw["dataset"]:  # a real dataset: its folder exists, so only the option is wrong
        (tmp_path / "scene").mkdir()
        raw["dataset"]["data_path"] = str(tmp_path / "scene")
    config = tmp_path / "bad.yaml"
    config.write_text(yaml.safe_dump(raw))
    rc = main(["--config", str(config), "--plugin", str(TOY_PLUGIN)])
    err = capsys.readouterr().err
    assert (rc, err) == (2, f"error: {message}\n")
    assert tripwire == []  # no dataset was built or opened
    assert not (tmp_path / "outputs").exists()  # nor an experiment folder made


def test_the_same_config_with_a_good_value_reaches_the_dataset(tmp_path, capsys, tripwire):
    """The tripwire does fire once the options are fine: the cases above fail for their value alone."""
    raw = {**toy_raw_config(tmp_path), "dataset": {"type": "TripwireDataset"}}
    raw["hooks"] = [{"type": "CheckPointHook", "max_keep": 1}]
    config = tmp_path / "good.yaml"
    config.write_text(yaml.safe_dump(raw))
    with pytest.raises(AssertionError, match="the dataset was loaded"):
        main(["--config", str(config), "--plugin", str(TOY_PLUGIN)])
    assert len(tripwire) == 1


def test_a_config_built_in_python_names_its_usual_place():
    """Without a key path (a Config built directly) the error still says where the option lives."""
    with pytest.raises(OptionError, match=r"^hooks\.CheckPointHook\.max_keep: must be >= 1 or null, got 0$"):
        CheckPointHook.Config(max_keep=0)


def test_option_errors_survive_pickling():
    """Errors cross process boundaries (torchrun ranks, the viewer worker) with their message intact."""
    import pickle

    err = pickle.loads(pickle.dumps(OptionError("max_keep", "must be >= 1 or null, got 0", "hooks[1]")))
    assert str(err) == "hooks[1].max_keep: must be >= 1 or null, got 0" and err.key == "max_keep"


def test_exp_dir_is_untouched_by_a_refused_config(tmp_path: Path, capsys, tripwire):
    """--resume style runs pass an existing exp_dir: a refused option must not write into it either."""
    exp_dir = tmp_path / "exp"
    exp_dir.mkdir()
    raw = {**toy_raw_config(tmp_path), "dataset": {"type": "TripwireDataset"}, "exp_dir": str(exp_dir)}
    raw["renderer"] = {"type": "GaussianRenderer", "near_plane": 2.0, "far_plane": 1.0}
    config = tmp_path / "bad.yaml"
    config.write_text(yaml.safe_dump(raw))
    assert main(["--config", str(config), "--plugin", str(TOY_PLUGIN)]) == 2
    assert "renderer.near_plane / far_plane: must satisfy 0 < near < far, got 2.0 / 1.0" in capsys.readouterr().err
    assert list(exp_dir.iterdir()) == []
