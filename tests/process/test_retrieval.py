"""Pair selection for large photo sets (``--matcher retrieval``) and the ``auto`` rule."""

from __future__ import annotations

import math
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from pointrix_lite.data.demo import ensure_demo
from pointrix_lite.process import retrieval, sfm
from pointrix_lite.process.matching import match_features
from pointrix_lite.process.options import EXHAUSTIVE_MAX_IMAGES, RETRIEVAL_OVERLAP, ProcessOptions

REPO = Path(__file__).resolve().parents[2]


def _place_descriptors(places: int, per_place: int, seed: int = 0) -> tuple[list[np.ndarray], list[int]]:
    """Images of ``places`` places, ``per_place`` each, in a shuffled (name) order.

    A place is 200 random sparse (SIFT-like: most bins empty) prototype descriptors; each of its images
    shows a random 150 of them with noise, plus 50 descriptors of clutter seen nowhere else.
    """
    rng = np.random.default_rng(seed)
    prototypes = rng.integers(0, 120, size=(places, 200, 128)) * (rng.random((places, 200, 128)) < 0.3)
    order = rng.permutation(places * per_place)
    descriptors, place_of = [], []
    for image in order:
        place = int(image) // per_place
        seen = prototypes[place, rng.choice(200, 150, replace=False)] + rng.integers(0, 12, size=(150, 128))
        clutter = rng.integers(0, 120, size=(50, 128))
        descriptors.append(np.clip(np.concatenate([seen, clutter]), 0, 255).astype(np.uint8))
        place_of.append(place)
    return descriptors, place_of


def test_retrieval_pairs_images_of_the_same_place_whatever_their_names():
    descriptors, place_of = _place_descriptors(places=6, per_place=5)
    pairs = retrieval.retrieval_pairs(descriptors, neighbours=4, overlap=0)
    # Each image's 4 most similar are the other 4 of its place, and nothing else is paired.
    assert all(place_of[i] == place_of[j] for i, j in pairs)
    assert len(pairs) == 6 * math.comb(5, 2)
    # Name order adds its neighbours, and nothing is paired twice or with itself.
    with_order = retrieval.retrieval_pairs(descriptors, neighbours=4, overlap=2)
    assert set(with_order) == set(pairs) | retrieval.sequential_pairs(30, 2)
    assert all(i < j for i, j in with_order) and len(set(with_order)) == len(with_order)


def test_similarities_in_blocks_find_the_same_neighbours(monkeypatch):
    descriptors, place_of = _place_descriptors(places=6, per_place=5)
    whole = retrieval.retrieval_pairs(descriptors, neighbours=4, overlap=0)
    monkeypatch.setattr(retrieval, "SIMILARITY_BLOCK", 30 * 4)  # 4 rows of the 30 x 30 similarities at a time
    assert retrieval.retrieval_pairs(descriptors, neighbours=4, overlap=0) == whole
    assert all(place_of[i] == place_of[j] for i, j in whole) and len(whole) == 6 * math.comb(5, 2)
    v = torch.nn.functional.normalize(torch.randn(50, 7, generator=torch.Generator().manual_seed(1)), dim=1)
    monkeypatch.setattr(retrieval, "SIMILARITY_BLOCK", 50 * 3)
    blocked = retrieval.similar_pairs(v, 3)
    monkeypatch.setattr(retrieval, "SIMILARITY_BLOCK", 1 << 24)
    assert blocked == retrieval.similar_pairs(v, 3)


class _CountingReads(Sequence):
    """Descriptors handed out one image at a time, counting the reads (as pycolmap's database would)."""

    def __init__(self, descriptors: list[np.ndarray]) -> None:
        self.descriptors, self.reads = descriptors, [0] * len(descriptors)

    def __len__(self) -> int:
        return len(self.descriptors)

    def __getitem__(self, i: int) -> np.ndarray:
        if not 0 <= i < len(self.descriptors):
            raise IndexError(i)
        self.reads[i] += 1
        return self.descriptors[i]


def test_descriptors_are_read_twice_one_image_at_a_time():
    """The vocabulary's sample and the words are two passes over the images: nothing is held between them,
    and the pairs are those of the whole set held in memory (the same random draws)."""
    descriptors, _ = _place_descriptors(places=5, per_place=4, seed=2)
    descriptors[1] = np.concatenate([descriptors[1]] * 12)  # 2400 > PER_IMAGE: a random subset votes
    lazy = _CountingReads(descriptors)
    steps = []
    pairs = retrieval.retrieval_pairs(
        lazy, 3, 1, counts=[len(d) for d in descriptors], progress=lambda step, done, total: steps.append(step)
    )
    assert lazy.reads == [2] * 20
    assert pairs == retrieval.retrieval_pairs(descriptors, 3, 1)
    assert [s for i, s in enumerate(steps) if i == 0 or steps[i - 1] != s] == [
        "sample",
        "vocabulary",
        "words",
        "similar",
    ]


def test_similarities_never_hold_the_whole_matrix():
    """16,000 images: the n x n similarities would take 1 GB; the blocks take 64 MB (peak RSS of a fresh process)."""
    code = (
        "import resource, torch\n"
        "from pointrix_lite.process.retrieval import similar_pairs\n"
        "v = torch.nn.functional.normalize(torch.randn(16000, 8, generator=torch.Generator().manual_seed(0)), dim=1)\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "pairs = similar_pairs(v, 5)\n"
        "print(len(pairs), (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1e3)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO).stdout
    n_pairs, grown_mb = out.split()
    assert 16000 * 5 // 2 <= int(n_pairs) <= 16000 * 5
    assert float(grown_mb) < 400, f"peak RSS grew by {grown_mb} MB"


def test_pair_count_grows_linearly():
    descriptors, _ = _place_descriptors(places=20, per_place=6, seed=1)
    n = len(descriptors)
    pairs = retrieval.retrieval_pairs(descriptors, neighbours=3, overlap=RETRIEVAL_OVERLAP)
    assert len(pairs) <= n * (3 + RETRIEVAL_OVERLAP) < n * (n - 1) // 2
    assert retrieval.sequential_pairs(5, 2) == {(0, 1), (0, 2), (1, 2), (1, 3), (2, 3), (2, 4), (3, 4)}
    # A photo without features (blank, black) keeps its neighbours by name and breaks nothing.
    descriptors[3] = np.zeros((0, 128), np.uint8)
    pairs = retrieval.retrieval_pairs(descriptors, neighbours=3, overlap=1)
    assert {(2, 3), (3, 4)} <= set(pairs) and len(pairs) <= n * 4


def test_similar_pairs_are_the_top_cosines():
    v = torch.nn.functional.normalize(torch.randn(12, 7, generator=torch.Generator().manual_seed(0)), dim=1)
    pairs = retrieval.similar_pairs(v, 2)
    sim = (v @ v.T).numpy()
    expected = set()
    for i in range(12):
        others = sorted((j for j in range(12) if j != i), key=lambda j: -sim[i, j])[:2]
        expected |= {(min(i, j), max(i, j)) for j in others}
    assert pairs == expected
    assert retrieval.similar_pairs(v[:1], 5) == set()  # one image: nothing to pair


def test_image_vectors_are_unit_sqrt_tf_idf():
    words = [torch.tensor([0, 0, 0, 0, 1, 2]), torch.tensor([0, 1, 1]), torch.tensor([0, 3])]
    v = retrieval.image_vectors(words, 5)
    n = 3
    idf = np.array([0.0, math.log(n / 2), math.log(n / 1), math.log(n / 1), 0.0])  # word 0 is everywhere: no weight
    counts = np.array([[4, 1, 1, 0, 0], [1, 2, 0, 0, 0], [1, 0, 0, 1, 0]], float)
    expected = np.sqrt(counts) * idf
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    np.testing.assert_allclose(v.numpy(), expected, rtol=1e-6, atol=1e-7)


def test_nearest_word_and_kmeans_objective():
    g = torch.Generator().manual_seed(0)
    x = torch.nn.functional.normalize(torch.randn(3000, 16, generator=g), dim=1)
    vocab = torch.nn.functional.normalize(torch.randn(40, 16, generator=g), dim=1)
    brute = torch.tensor([int(np.argmax([float(r @ w) for w in vocab])) for r in x[:200]])
    assert torch.equal(retrieval.nearest_word(x[:200], vocab), brute)

    def objective(v: torch.Tensor) -> float:  # mean cosine of each sample to its word
        return float((x * v[retrieval.nearest_word(x, v)]).sum(1).mean())

    start = x[torch.randperm(3000, generator=torch.Generator().manual_seed(0))[:40]]
    trained = retrieval.train_vocabulary(x, 40, iters=8, seed=0)
    assert torch.allclose(trained.norm(dim=1), torch.ones(40))
    # Spherical k-means never lowers the objective; from the same start, 8 steps raise it.
    assert objective(trained) > objective(start) + 0.01
    assert torch.equal(trained, retrieval.train_vocabulary(x, 40, iters=8, seed=0))  # deterministic


def test_auto_rule():
    opts = ProcessOptions(out=Path("o"), images=Path("i"))
    assert opts.resolved_matcher(EXHAUSTIVE_MAX_IMAGES) == "exhaustive"
    assert opts.resolved_matcher(EXHAUSTIVE_MAX_IMAGES + 1) == "retrieval"
    assert opts.resolved_matcher(300) == "retrieval"
    video = ProcessOptions(out=Path("o"), video=Path("v.mp4"))
    assert video.resolved_matcher(100) == "retrieval" and video.resolved_matcher(30) == "exhaustive"
    assert ProcessOptions(out=Path("o"), vocab_tree=Path("t.bin")).resolved_matcher(300) == "vocab_tree"
    assert ProcessOptions(out=Path("o"), matcher="sequential").resolved_matcher(300) == "sequential"
    assert ProcessOptions(out=Path("o"), matcher="retrieval").resolved_matcher(10) == "retrieval"


def test_retrieval_matching_on_demo_views(tmp_path):
    """COLMAP matches the pairs written to ``pairs.txt`` and no others; features added later share the camera."""
    from pointrix_lite.process.colmap_import import import_pycolmap

    pycolmap = import_pycolmap()
    images = ensure_demo(REPO / "data" / "demo") / "colmap" / "images"
    names = [f"r_{i:03d}.png" for i in range(16)]
    opts = ProcessOptions(out=tmp_path, images=images, threads=1, retrieval_neighbors=2)
    database = tmp_path / "database.db"
    sfm.extract_features(pycolmap, database, images, names[:8], opts, lambda d, t: None)
    sfm.extract_features(pycolmap, database, images, names[8:], opts, lambda d, t: None)
    matched, verified = match_features(pycolmap, database, "retrieval", opts)
    listed = {tuple(line.split()) for line in (tmp_path / "pairs.txt").read_text().splitlines()}
    assert (
        len(listed) <= 16 * (2 + RETRIEVAL_OVERLAP)
        and {("r_000.png", "r_001.png"), ("r_014.png", "r_015.png")} <= listed
    )
    db = pycolmap.Database.open(str(database))
    try:
        assert len(db.read_all_cameras()) == 1
        by_id = {im.image_id: im.name for im in db.read_all_images()}
        pair_ids, _ = db.read_all_matches()
        found = {tuple(sorted(by_id[i] for i in pycolmap.pair_id_to_image_pair(p))) for p in pair_ids}
    finally:
        db.close()
    # Every listed pair was matched (pairs without a match keep no row of matches) and no other pair.
    assert matched == len(listed) and found <= listed and 0 < verified <= len(found)
