"""Fixtures of the engine tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from pointrix_lite.engine.experiment import ExperimentConfig, load_experiment

from .engine_helpers import merge, toy_raw_config


@pytest.fixture
def toy_config(tmp_path: Path):
    """``toy_config(extra_dict, overrides=[...]) -> ExperimentConfig`` (resolved, exp_dir under tmp_path)."""

    def make(extra: dict | None = None, overrides: list[str] = ()) -> ExperimentConfig:
        return load_experiment(None, list(overrides), data=merge(toy_raw_config(tmp_path), extra or {}))

    return make
