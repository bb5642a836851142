"""Settings and fixtures for the whole test session.

No test downloads: LPIPS fetches its ~0.5 GB backbone on first use, so the switch is off for this
process and every command line a test starts (they inherit the environment). The download itself
is tested against a local server (tests/metrics/test_lpips_download.py), which sets the switch back on.

``toy_config`` lives here, not beside the engine tests, because the tests of the hooks that train
through the engine (pose, appearance, writers, registry) sit in their own packages' folders.
"""

from __future__ import annotations

import os
from pathlib import Path

os.environ["POINTRIX_LPIPS_DOWNLOAD"] = "0"

import pytest  # noqa: E402  (after the switch: nothing imported may read it first)

from pointrix_lite.engine.experiment import ExperimentConfig, load_experiment  # noqa: E402
from tests.engine.engine_helpers import merge, toy_raw_config  # noqa: E402


@pytest.fixture
def toy_config(tmp_path: Path):
    """``toy_config(extra_dict, overrides=[...]) -> ExperimentConfig`` (resolved, exp_dir under tmp_path)."""

    def make(extra: dict | None = None, overrides: list[str] = ()) -> ExperimentConfig:
        return load_experiment(None, list(overrides), data=merge(toy_raw_config(tmp_path), extra or {}))

    return make
