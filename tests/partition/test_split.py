"""partition.py: cells tile the plane, margins are as stated, views see their blocks, folders load."""

from __future__ import annotations

import json

import numpy as np
import pytest

from pointrix_lite.errors import DataError
from pointrix_lite.io import colmap as colmap_io
from pointrix_lite.partition.cells import Rect, grid_cells, kd_cells, margins
from pointrix_lite.partition.frame import find_frame
from pointrix_lite.partition.manifest import load_manifest
from pointrix_lite.partition.split import SplitOptions, held_out, pinhole_view, split_scene
from pointrix_lite.partition.visibility import front_points

from .conftest import N_VIEWS


def _scene(street):
    cm = colmap_io
    return cm.read_model(cm.find_sparse_dir(street))


def test_cells_tile_the_plane_exactly_once():
    rng = np.random.default_rng(0)
    xy = rng.normal(size=(5000, 2)) * [10.0, 3.0]
    probe = np.concatenate([xy, rng.uniform(-100, 100, (2000, 2))])  # far outliers too
    for cells in (grid_cells(xy, 3, 2), kd_cells(xy, 5), kd_cells(xy, 4)):
        hits = np.stack([c.contains(probe) for c in cells]).sum(axis=0)
        assert (hits == 1).all()
    counts = [c.contains(xy).sum() for c in kd_cells(xy, 4)]
    assert max(counts) - min(counts) <= 2  # k-d: equal shares of the points


def test_margin_is_the_stated_fraction_of_the_cell():
    xy = np.random.default_rng(1).uniform(0, 10, (4000, 2))
    cells = grid_cells(xy, 2, 2)  # lower-left, lower-right, upper-left, upper-right
    grown = margins(cells, xy, 0.2)
    lo, hi = np.quantile(xy, [0.01, 0.99], axis=0)  # an outer cell's size is measured up to the trimmed extent
    mid_x, mid_y = cells[0].x1, cells[0].y1
    assert grown[0].x1 == pytest.approx(mid_x + 0.2 * (mid_x - lo[0]))  # grown into its neighbour by 20% of its width
    assert grown[0].y1 == pytest.approx(mid_y + 0.2 * (mid_y - lo[1]))
    assert grown[3].x0 == pytest.approx(mid_x - 0.2 * (hi[0] - mid_x))
    assert grown[0].x0 is None and grown[3].x1 is None and grown[3].y1 is None  # unbounded sides stay so


def test_up_axis_is_found_from_the_cameras_and_from_the_points(street):
    model = _scene(street)
    views = [pinhole_view(im, model.cameras[im.camera_id]) for im in model.images.values()]
    Rs, ts = np.stack([v.R for v in views]), np.stack([v.t for v in views])
    by_cameras = find_frame(model.xyz, Rs, ts, "auto")
    assert by_cameras.method == "cameras" and by_cameras.up @ [0, 0, 1] > 0.999
    turned = find_frame(model.xyz, Rs, ts, "pca")  # ground dominates the points: least spread is up
    assert turned.up @ [0, 0, 1] > 0.95
    assert np.allclose(by_cameras.rotation @ by_cameras.rotation.T, np.eye(3), atol=1e-9)


def test_partition_covers_every_point_and_every_training_view(street, partition):
    model = _scene(street)
    names = sorted(im.name for im in model.images.values())
    test = held_out(names, 8)
    assert partition.test_views == sorted(test) and len(test) == N_VIEWS // 8
    rot = partition.ground_rotation()
    xy = model.xyz @ rot[:2].T
    in_cells = np.stack([b.cell.contains(xy) for b in partition.blocks])
    assert (in_cells.sum(axis=0) == 1).all()  # each point in exactly one cell
    assert [b.n_cell_points for b in partition.blocks] == in_cells.sum(axis=1).tolist()
    trained = set().union(*(b.views for b in partition.blocks))
    assert trained == set(names) - test  # every training view somewhere, no test view anywhere
    for block in partition.blocks:
        block_model = _scene(partition.block_dir(block))
        assert sorted(im.name for im in block_model.images.values()) == sorted(block.views)
        assert len(block_model.xyz) == block.n_points >= block.n_cell_points
        assert block.margin.contains(block_model.xyz @ rot[:2].T).all()
        for name in block.views:  # linked, readable images
            assert (partition.block_dir(block) / "images" / name).stat().st_size > 0


def test_an_assigned_view_sees_its_block(street, partition):
    model = _scene(street)
    rot = partition.ground_rotation()
    by_name = {im.name: im for im in model.images.values()}
    for block in partition.blocks:
        region = block.margin.contains(model.xyz @ rot[:2].T)
        shares = []
        for name in block.views:
            front = front_points(pinhole_view(by_name[name], model.cameras[by_name[name].camera_id]), model.xyz)
            shares.append(region[front].mean())
        assert (
            min(shares) > 0 and np.mean(np.array(shares) >= partition.min_share) > 0.9
        )  # the rest: placed by largest share


def test_manifest_reads_back_and_bad_manifests_fail_in_one_line(partition, tmp_path):
    again = load_manifest(partition.path.parent)  # a folder works too
    assert again.blocks == partition.blocks and again.rotation == partition.rotation
    assert again.block_dir(again.blocks[1]) == partition.block_dir(partition.blocks[1])
    raw = json.loads(partition.path.read_text())
    del raw["blocks"][2]["cell"]
    bad = tmp_path / "manifest.json"
    bad.write_text(json.dumps(raw))
    with pytest.raises(DataError, match=r"manifest.json: blocks\[2\]: key 'cell' missing"):
        load_manifest(bad)
    with pytest.raises(DataError, match="manifest not found"):
        load_manifest(tmp_path / "nowhere.json")
    with pytest.raises(DataError, match="no block named 'block_9'"):
        again.block("block_9")


def test_kd_split_and_overwrite(street, tmp_path):
    quiet = lambda line: None  # noqa: E731
    manifest = split_scene(street, tmp_path, SplitOptions(split="kd", blocks=3, margin=0.1, links="copy"), say=quiet)
    assert len(manifest.blocks) == 3 and manifest.split == "kd 3" and manifest.links == "copy"
    with pytest.raises(Exception, match="holds a partition already"):
        split_scene(street, tmp_path, SplitOptions(), say=quiet)
    assert len(split_scene(street, tmp_path, SplitOptions(grid=(2, 1), overwrite=True), say=quiet).blocks) == 2


def test_rect_round_trips_through_json():
    r = Rect(None, 1.5, -2.0, None)
    assert Rect.from_list(json.loads(json.dumps(r.as_list()))) == r
