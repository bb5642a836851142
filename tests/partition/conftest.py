"""A small street scene (48 views of 48 x 36, ~3 s to render) and its 2 x 2 partition, once per session."""

from __future__ import annotations

from pathlib import Path

import pytest

from pointrix_lite.partition.split import SplitOptions, split_scene
from pointrix_lite.partition.synthetic import generate_street

N_VIEWS, WIDTH, HEIGHT = 48, 48, 36


@pytest.fixture(scope="session")
def street(tmp_path_factory) -> Path:
    return generate_street(tmp_path_factory.mktemp("street") / "scene", N_VIEWS, WIDTH, HEIGHT)


@pytest.fixture(scope="session")
def partition(street, tmp_path_factory):
    out = tmp_path_factory.mktemp("partition")
    return split_scene(street, out, SplitOptions(grid=(2, 2), margin=0.15), say=lambda line: None)
