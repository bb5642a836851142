"""merge_blocks: each Gaussian kept once, by the block whose cell holds it; a readable 3DGS PLY."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from plyfile import PlyData

from pointrix_lite.errors import DataError
from pointrix_lite.io.ply import load_ply, save_ply
from pointrix_lite.partition.cells import grid_cells, margins
from pointrix_lite.partition.manifest import Block, Manifest
from pointrix_lite.partition.merge import merge_blocks
from pointrix_lite.partition.status import BlockStatus, write_status

TURN = np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [1.0, 0.0, 0.0]])  # ground = world (y, z); up = world x


def _gaussians(means: np.ndarray, ids: np.ndarray, sh_rest: int = 3) -> dict[str, torch.Tensor]:
    n = len(means)
    return {
        "means": torch.from_numpy(means).float(),
        "scales": torch.full((n, 3), -3.0),
        "quats": torch.tensor([[1.0, 0, 0, 0]]).repeat(n, 1),
        "opacities": torch.from_numpy(ids).float(),  # the identity of each Gaussian rides in its opacity
        "sh0": torch.zeros(n, 1, 3),
        "shN": torch.zeros(n, sh_rest, 3),
    }


@pytest.fixture
def trained(tmp_path):
    """A 3 x 2 grid; each block's PLY holds every Gaussian of its margin region (so neighbours overlap)."""
    rng = np.random.default_rng(0)
    world = rng.uniform(-10, 10, (6000, 3))
    ground = world @ TURN[:2].T
    cells = grid_cells(ground, 3, 2)
    grown = margins(cells, ground, 0.2)
    blocks = []
    for b, (cell, margin) in enumerate(zip(cells, grown)):
        name = f"block_{b:03d}"
        region = margin.contains(ground)
        save_ply(_gaussians(world[region], np.flatnonzero(region)), tmp_path / "runs" / name / "point_cloud.ply")
        blocks.append(
            Block(name, f"blocks/{name}", cell, margin, int(region.sum()), int(cell.contains(ground).sum()), [])
        )
    manifest = Manifest(str(tmp_path / "scene"), TURN.tolist(), "+x", "grid 3x2", 0.2, 0.15, 8, [], 0, blocks)
    manifest.save(tmp_path / "manifest.json")
    return manifest, world


def test_every_gaussian_is_kept_exactly_once_by_its_cells_block(trained, tmp_path):
    manifest, world = trained
    stored = sum(len(load_ply(tmp_path / "runs" / b.name / "point_cloud.ply")["means"]) for b in manifest.blocks)
    assert stored > len(world) * 1.2  # the margins really overlap
    ply, counts = merge_blocks(manifest, tmp_path / "runs", tmp_path / "merged", say=lambda line: None)
    merged = load_ply(ply)
    ids = merged["opacities"].long().numpy()
    assert sorted(ids.tolist()) == list(range(len(world)))  # each once, none lost
    ground = world @ TURN[:2].T
    start = 0
    for block, kept in zip(manifest.blocks, counts):  # rows come block by block, each from its own cell
        rows = ids[start : start + kept.kept]
        assert block.cell.contains(ground[rows]).all()
        start += kept.kept
    np.testing.assert_allclose(merged["means"].numpy(), world[ids].astype(np.float32))
    vertex = PlyData.read(str(ply))["vertex"]
    assert vertex.count == len(world) and "f_rest_8" in vertex.data.dtype.names
    assert (tmp_path / "merged" / "config.yaml").is_file() and (tmp_path / "merged" / "merge.json").is_file()


def test_a_failed_or_missing_block_stops_the_merge_in_one_line(trained, tmp_path):
    manifest, _ = trained
    runs = tmp_path / "runs"
    write_status(
        runs, BlockStatus("block_004", "failed", str(runs / "logs" / "block_004.log"), "", message="killed by SIGKILL")
    )
    with pytest.raises(DataError, match=r"block_004: training failed \(killed by SIGKILL.*--only block_004 --resume"):
        merge_blocks(manifest, runs, tmp_path / "merged", say=lambda line: None)
    (runs / "status" / "block_004.json").unlink()
    (runs / "block_002" / "point_cloud.ply").unlink()
    with pytest.raises(DataError, match="block_002 has no trained model"):
        merge_blocks(manifest, runs, tmp_path / "merged", say=lambda line: None)


def test_blocks_with_different_sh_degrees_are_refused(trained, tmp_path):
    manifest, world = trained
    save_ply(_gaussians(world[:10], np.arange(10), sh_rest=8), tmp_path / "runs" / "block_001" / "point_cloud.ply")
    with pytest.raises(DataError, match="different SH degrees"):
        merge_blocks(manifest, tmp_path / "runs", tmp_path / "merged", say=lambda line: None)
