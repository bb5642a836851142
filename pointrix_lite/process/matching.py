"""The matching stage: which image pairs to match, COLMAP matching and verifying them, and its progress.

``exhaustive``, ``sequential`` and ``vocab_tree`` are COLMAP's own pair choices; ``retrieval`` is this
project's (:mod:`.retrieval`), written to ``pairs.txt`` for COLMAP's imported-pairs matcher. Progress
comes from COLMAP's log (:mod:`.colmap_log`): the matchers take no callback.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from ..errors import DataError
from .colmap_log import MatchingReader, follow
from .options import RETRIEVAL_OVERLAP, ProcessOptions
from .retrieval import Progress as RetrievalProgress
from .retrieval import retrieval_pairs

# Retrieval pairs are matched in blocks of this many (COLMAP's default 1225): a status line every ~15 s
# of 1 MP photos on 2 cores; a block only waits for its slowest pair, so the cost is a few pairs' time.
RETRIEVAL_BLOCK_PAIRS = 250
RETRIEVAL_STEPS = {  # retrieval's steps choosing the pairs, as the status line names them
    "sample": "choosing pairs: the vocabulary's sample from {total} images",
    "vocabulary": "choosing pairs: learning {total} visual words",
    "words": "choosing pairs: words of image {done}/{total}",
    "similar": "choosing pairs: the most similar of {total} images",
}


def match_features(
    pycolmap: ModuleType,
    database: Path,
    matcher: str,
    opts: ProcessOptions,
    status: Callable[[str], None] | None = None,
    log: Path | None = None,
) -> tuple[int, int]:
    """Match and geometrically verify image pairs; returns (pairs matched, pairs verified).

    ``status`` hears what is being done: retrieval's steps choosing the pairs, then the blocks of pairs
    COLMAP has matched, read from its ``log`` (``OUT/colmap/colmap.log``) when one is given.

    Raises:
        DataError: no pair of images survived verification (the photos do not overlap).
    """
    matching = pycolmap.FeatureMatchingOptions()
    matching.num_threads = opts.threads
    cpu = pycolmap.Device.cpu
    say = status or (lambda text: None)
    reader = MatchingReader()
    if matcher == "retrieval":
        path, n_pairs = write_retrieval_pairs(
            pycolmap,
            database,
            opts,
            lambda step, done, total: say(RETRIEVAL_STEPS[step].format(done=done, total=total)),
        )
        pairing = pycolmap.ImportedPairingOptions()
        pairing.match_list_path = str(path)
        pairing.block_size = RETRIEVAL_BLOCK_PAIRS
        reader = MatchingReader(n_pairs, RETRIEVAL_BLOCK_PAIRS)
        say(
            f"matching {n_pairs} pairs ({opts.retrieval_neighbors} most similar + next {RETRIEVAL_OVERLAP} by name per image)"
        )
    elif matcher == "vocab_tree" and opts.vocab_tree is None:
        raise DataError("--matcher vocab_tree needs --vocab-tree FILE (COLMAP would download one, and abort offline)")
    elif matcher not in ("exhaustive", "sequential", "vocab_tree"):
        raise DataError(f"--matcher: unknown matcher {matcher!r}")
    watch = follow(log, reader, say) if log is not None else contextlib.nullcontext()
    with watch:
        if matcher == "exhaustive":
            pycolmap.match_exhaustive(database, matching_options=matching, device=cpu)
        elif matcher == "sequential":
            pairing = pycolmap.SequentialPairingOptions()
            if opts.vocab_tree is not None:  # loop detection needs the tree; without one COLMAP downloads it
                pairing.loop_detection = True
                pairing.vocab_tree_path = str(opts.vocab_tree)
            pycolmap.match_sequential(database, matching_options=matching, pairing_options=pairing, device=cpu)
        elif matcher == "retrieval":
            pycolmap.match_image_pairs(database, matching_options=matching, pairing_options=pairing, device=cpu)
        else:
            pairing = pycolmap.VocabTreePairingOptions()
            pairing.vocab_tree_path = str(opts.vocab_tree)
            pycolmap.match_vocabtree(database, matching_options=matching, pairing_options=pairing, device=cpu)
    db = pycolmap.Database.open(str(database))
    try:
        # num_verified_image_pairs counts every pair verification looked at; only those with inliers overlap.
        matched, verified = int(db.num_matched_image_pairs()), len(db.read_two_view_geometries()[0])
    finally:
        db.close()
    if verified == 0:
        raise DataError(
            f"no overlapping image pairs: {matched} pair(s) matched but none passed geometric verification; "
            "the photos must overlap (60%+ between neighbours), be sharp and textured; try --max-features 16384"
        )
    return matched, verified


class _DatabaseDescriptors(Sequence):
    """The SIFT descriptors of ``image_ids``, read from an open database one image at a time (a 1 MP photo's
    8192 take 1 MB: 3,000 photos' would take 3 GB held at once)."""

    def __init__(self, db: Any, image_ids: list[int]) -> None:
        self.db, self.image_ids = db, image_ids

    def __len__(self) -> int:
        return len(self.image_ids)

    def __getitem__(self, i: int) -> np.ndarray:
        if not 0 <= i < len(self.image_ids):
            raise IndexError(i)  # where iterating a Sequence stops
        return self.db.read_descriptors(self.image_ids[i]).data


def write_retrieval_pairs(
    pycolmap: ModuleType, database: Path, opts: ProcessOptions, progress: RetrievalProgress | None = None
) -> tuple[Path, int]:
    """``database``'s folder / ``pairs.txt``: the pairs :func:`.retrieval.retrieval_pairs` picks, one ``a b`` per
    line; returns the file and the number of pairs."""
    db = pycolmap.Database.open(str(database))
    try:
        images = sorted(db.read_all_images(), key=lambda im: im.name)  # name order: capture order
        ids = [im.image_id for im in images]
        counts = [int(db.num_descriptors_for_image(i)) for i in ids]
        pairs = retrieval_pairs(
            _DatabaseDescriptors(db, ids), opts.retrieval_neighbors, RETRIEVAL_OVERLAP, counts=counts, progress=progress
        )
    finally:
        db.close()
    path = database.parent / "pairs.txt"
    path.write_text("".join(f"{images[i].name} {images[j].name}\n" for i, j in pairs))
    return path, len(pairs)
