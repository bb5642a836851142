"""``--mapper``: the ``auto`` rule, its options' errors, progress read from COLMAP's log, and the hierarchical mapper."""

from __future__ import annotations

import dataclasses
import threading
import time
from pathlib import Path

import pytest

from pointrix_lite.cli.process import build_parser, to_options
from pointrix_lite.cli.process import main as process_main
from pointrix_lite.process import colmap_log, mapping
from pointrix_lite.process.colmap_log import HierarchicalReader, MatchingReader, follow, log_to
from pointrix_lite.process.options import CLUSTER_IMAGES, ProcessOptions

REPO = Path(__file__).resolve().parents[2]


def test_auto_mapper_is_incremental_while_the_set_fits_one_cluster():
    opts = ProcessOptions(out=Path("o"))
    assert opts.mapper == "auto" and opts.cluster_images == CLUSTER_IMAGES == 500
    assert opts.resolved_mapper(300) == opts.resolved_mapper(CLUSTER_IMAGES) == "incremental"
    assert opts.resolved_mapper(CLUSTER_IMAGES + 1) == "hierarchical"
    assert ProcessOptions(out=Path("o"), cluster_images=100).resolved_mapper(300) == "hierarchical"
    for mapper in ("incremental", "global", "hierarchical"):
        assert ProcessOptions(out=Path("o"), mapper=mapper).resolved_mapper(5000) == mapper
        assert ProcessOptions(out=Path("o"), mapper=mapper).resolved_mapper(10) == mapper


def test_mapper_options_parse_and_bad_ones_are_one_line(tmp_path, capsys):
    args = build_parser().parse_args(
        ["--images", "x", "--out", "y", "--mapper", "hierarchical", "--cluster-images", "200"]
    )
    opts = to_options(args)
    assert (opts.mapper, opts.cluster_images) == ("hierarchical", 200)
    assert to_options(build_parser().parse_args(["--images", "x", "--out", "y"])).cluster_images == CLUSTER_IMAGES
    assert process_main(["--images", str(tmp_path), "--out", str(tmp_path / "o"), "--cluster-images", "5"]) == 2
    assert capsys.readouterr().err.strip() == "error: --cluster-images: must be >= 20, got 5"
    with pytest.raises(SystemExit) as exc:
        process_main(["--images", str(tmp_path), "--out", str(tmp_path / "o"), "--mapper", "fast"])
    assert exc.value.code == 2
    assert "argument --mapper: invalid choice: 'fast'" in capsys.readouterr().err.strip().splitlines()[-1]


def _glog(thread: str, text: str) -> str:
    return f"I20261127 00:13:04.169339 {thread} file.cc:1] {text}"


def test_matching_reader_counts_pairs_in_finished_blocks():
    read = MatchingReader(pairs=600, block_pairs=250)
    assert read(_glog("1", "Processing block [1/3]")) == "block 1/3 (0 of 600 pairs done)"
    assert read(_glog("1", "Processing block [3/3]")) == "block 3/3 (500 of 600 pairs done)"
    assert MatchingReader()(_glog("1", "Processing block [2/4, 3/4]")) == "block [2/4, 3/4]"
    assert MatchingReader()(_glog("1", "Processing image [7/48]")) == "image 7/48"
    assert read(_glog("1", "Creating SIFT CPU feature matcher")) is None


def test_hierarchical_reader_follows_clusters_registrations_and_merges():
    read = HierarchicalReader()
    lines = [
        _glog("M", "  Cluster 1 with 60 images"),
        _glog("M", "  Cluster 2 with 55 images"),
        _glog("M", "=== Reconstructing clusters ==="),
        _glog("A", "Registering image #5 (num_reg_frames=2)"),
        _glog("A", "Registering image #6 (num_reg_frames=3)"),
        _glog("A", "Discarding reconstruction due to insufficient size"),  # its 3 images do not count
        _glog("A", "Registering image #9 (num_reg_frames=2)"),
        _glog("A", "Registering image #7 (num_reg_frames=40)"),
        _glog("A", "Keeping successful reconstruction"),
        _glog("A", "Elapsed time: 0.5 [minutes]"),
        _glog("B", "Registering image #70 (num_reg_frames=20)"),
    ]
    answers = [read(line) for line in lines]
    assert answers[0] == "partitioning: cluster 1 of 60 images"
    assert answers[5] == "cluster 0/2 done, ~0/115 cluster images registered"
    assert answers[-2] == "cluster 1/2 done, ~40/115 cluster images registered"
    assert answers[-1] == "cluster 1/2 done, ~60/115 cluster images registered"
    assert (
        read(_glog("M", "Elapsed time: 2.0 [minutes]")) is None and read.done == 1
    )  # the main thread's timer: the run's
    assert read(_glog("M", "=== Merging clusters ===")) == "merging 2 clusters (0 merges done)"
    assert (
        read(_glog("M", "=> Merged clusters with 60 and 55 images into 110 images"))
        == "merging 2 clusters (1 merges done)"
    )


def test_follow_reads_only_the_lines_written_while_it_runs(tmp_path, monkeypatch):
    monkeypatch.setattr(colmap_log, "POLL_SECONDS", 0.02)
    log = tmp_path / "colmap.log"
    log.write_text(_glog("1", "Processing image [1/9]") + "\n")  # an earlier stage's line
    seen: list[str] = []

    def write() -> None:
        with log.open("a") as f:
            for i in (2, 3):
                f.write(_glog("1", f"Processing image [{i}/9]") + "\n")
                f.flush()
                time.sleep(0.05)
            f.write(_glog("1", "Processing image [4/9]"))  # no newline yet: not a whole line

    with follow(log, MatchingReader(), seen.append):
        writer = threading.Thread(target=write)
        writer.start()
        writer.join()
    assert seen == ["image 2/9", "image 3/9"]
    with follow(tmp_path / "missing.log", MatchingReader(), seen.append):  # no log (stages called from Python)
        pass


@pytest.mark.slow
def test_hierarchical_mapper_registers_every_image(tmp_path, monkeypatch):
    """20 views of the photo scene, clusters of 7 (+4 shared): mapped apart, merged into one model of all 20."""
    from pointrix_lite.data.demo.photo import ensure_photo_scene
    from pointrix_lite.io.colmap import read_model
    from pointrix_lite.process import sfm
    from pointrix_lite.process.colmap_import import import_pycolmap
    from pointrix_lite.process.compare import compare_cameras
    from pointrix_lite.process.matching import match_features

    pycolmap = import_pycolmap()
    scene = ensure_photo_scene(REPO / "data" / "bench_photo") / "colmap"
    names = [f"r_{i:03d}.png" for i in range(0, 40, 2)]
    opts = ProcessOptions(out=tmp_path, images=scene / "images", threads=1, mapper="hierarchical", cluster_images=7)
    monkeypatch.setattr(mapping, "CLUSTER_OVERLAP", 4)
    database, log = tmp_path / "database.db", tmp_path / "colmap.log"
    read, statuses = HierarchicalReader(), []
    with log_to(log):
        sfm.extract_features(pycolmap, database, scene / "images", names, opts, lambda d, t: None)
        match_features(pycolmap, database, "exhaustive", opts)
        with follow(log, read, statuses.append):
            recs = mapping.map_scene(pycolmap, database, scene / "images", tmp_path / "sparse", opts, lambda: None)
    assert len(read.sizes) >= 2 and read.done == len(read.sizes) and read.merges == len(read.sizes) - 1
    chosen = sfm.pick_model(recs, names, 3)
    assert chosen.registered == names and not chosen.dropped
    model = tmp_path / "model"
    model.mkdir()
    chosen.reconstruction.write(str(model))
    truth = read_model(scene / "sparse" / "0")
    truth = dataclasses.replace(truth, images={k: im for k, im in truth.images.items() if im.name in names})
    score = compare_cameras(read_model(model), truth)
    assert score.registered == 20 and score.centre_median < 0.01
    assert any(s.startswith("merging") for s in statuses) and any("cluster 1/" in s for s in statuses)
