"""Shared fixtures for the data tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from pointrix_lite.registry import DATASETS


@pytest.fixture(scope="session")
def demo_root(tmp_path_factory) -> Path:
    """The demo scene, generated once per session by *loading* it from a path where it is missing.

    This exercises the on-first-use generation a fresh checkout relies on.
    """
    root = tmp_path_factory.mktemp("data") / "demo"
    DATASETS.build({"type": "ColmapDataset", "data_path": str(root / "colmap")}, "dataset")
    return root
