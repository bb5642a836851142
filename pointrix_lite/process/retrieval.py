"""Which image pairs to match when every pair is too many, without a downloaded vocabulary tree.

Exhaustive matching costs ``n (n - 1) / 2`` pairs; COLMAP's answer for large sets, a vocabulary tree,
is a file that has to be downloaded. This learns a small visual vocabulary from the set's own SIFT
descriptors instead (spherical k-means), describes every image by its tf-idf weighted word histogram,
and pairs each image with the ``neighbours`` images most similar to it and with its ``overlap`` next
images in name order (phones and video frames name photos in the order they were taken). The pairs then
grow as ``n (neighbours + overlap)``, and the photos of one spot taken at different times (a second
orbit, the end of a loop) still meet: sequential matching alone never pairs them.

Memory stays linear in ``n`` and small per image, so thousands of photos fit: the descriptors are read
one image at a time, twice (once for the vocabulary's sample, once for the words), and only the word
histograms (``n x 1024`` floats, 4 KB an image) and the chosen neighbours are kept; the ``n x n``
similarities are computed a block of rows at a time (:func:`similar_pairs`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

import numpy as np
import torch

VOCAB_WORDS = 1024
VOCAB_SAMPLE = 100_000  # descriptors the vocabulary is learned from
KMEANS_ITERS = 8
PER_IMAGE = 2048  # descriptors per image that vote for words (a random subset of larger sets)
CHUNK = 16384  # rows per word-assignment block: bounds the [rows, words] scores at 64 MB
SIMILARITY_BLOCK = 1 << 24  # image-to-image similarities held at once (64 MB): one block up to 4096 images

Progress = Callable[[str, int, int], None]  # (step, done, total): steps "sample", "vocabulary", "words", "similar"


def unit_rows(descriptors: np.ndarray) -> torch.Tensor:
    """``[N, 128]`` uint8 SIFT descriptors -> float32 rows of unit length."""
    x = torch.from_numpy(np.array(descriptors, dtype=np.float32))  # a copy: pycolmap hands out read-only arrays
    return torch.nn.functional.normalize(x, dim=1)


def nearest_word(x: torch.Tensor, vocab: torch.Tensor) -> torch.Tensor:
    """``[N]`` index of the word (row of ``vocab`` ``[W, D]``) with the largest cosine to each row of ``x`` ``[N, D]``."""
    if len(x) == 0:
        return torch.zeros(0, dtype=torch.long)
    return torch.cat([(x[i : i + CHUNK] @ vocab.T).argmax(1) for i in range(0, len(x), CHUNK)])


def train_vocabulary(samples: torch.Tensor, words: int, iters: int = KMEANS_ITERS, seed: int = 0) -> torch.Tensor:
    """Spherical k-means: ``[words, D]`` unit centres of ``samples`` ``[M, D]`` (unit rows, M >= words).

    Starts from ``words`` distinct samples; a centre that loses all its samples keeps its place.
    """
    g = torch.Generator().manual_seed(seed)
    vocab = samples[torch.randperm(len(samples), generator=g)[:words]].clone()
    for _ in range(iters):
        assign = nearest_word(samples, vocab)
        sums = torch.zeros_like(vocab).index_add_(0, assign, samples)
        used = torch.bincount(assign, minlength=words) > 0
        vocab[used] = torch.nn.functional.normalize(sums[used], dim=1)
    return vocab


def tf_idf(counts: torch.Tensor) -> torch.Tensor:
    """``[n, words]`` word counts per image -> unit tf-idf vectors.

    Counts enter as square roots: a repeated texture (bricks, gravel) fires one word hundreds of times
    in one photo and would otherwise decide its neighbours alone.
    """
    df = (counts > 0).sum(0).float()
    idf = torch.where(df > 0, torch.log(len(counts) / df.clamp(min=1)), torch.zeros_like(df))
    return torch.nn.functional.normalize(counts.sqrt() * idf, dim=1)


def image_vectors(word_ids: list[torch.Tensor], words: int) -> torch.Tensor:
    """``[n, words]`` unit tf-idf vectors from each image's word indices."""
    return tf_idf(torch.stack([torch.bincount(w, minlength=words).float() for w in word_ids]))


def similar_pairs(vectors: torch.Tensor, neighbours: int) -> set[tuple[int, int]]:
    """``(i, j)``, ``i < j``: each image with its ``neighbours`` most similar others (cosine of ``vectors``).

    The similarities are computed ``SIMILARITY_BLOCK / n`` rows at a time and only each row's top
    ``neighbours`` are kept: memory ``O(n k)`` besides one block, where the whole ``n x n`` matrix of
    100,000 photos would be 40 GB. Time stays ``O(n^2 words)``: 3,000 photos took 0.2 s here,
    nothing beside matching their ``~10 n`` pairs (hours).
    """
    n = len(vectors)
    k = min(neighbours, n - 1)
    if k <= 0:
        return set()
    rows = max(1, SIMILARITY_BLOCK // n)
    pairs: set[tuple[int, int]] = set()
    for start in range(0, n, rows):
        sim = vectors[start : start + rows] @ vectors.T
        own = torch.arange(len(sim))
        sim[own, start + own] = -float("inf")  # an image is not its own neighbour
        for i, row in enumerate(sim.topk(k, dim=1).indices.tolist(), start):
            pairs.update((min(i, j), max(i, j)) for j in row)
    return pairs


def sequential_pairs(n: int, overlap: int) -> set[tuple[int, int]]:
    """``(i, i + d)`` for ``d`` in ``1 .. overlap``."""
    return {(i, i + d) for i in range(n) for d in range(1, overlap + 1) if i + d < n}


def _subsets(counts: Sequence[int], seed: int) -> Iterator[np.ndarray | None]:
    """For each image in order, the sorted rows of its voting subset (``None``: all rows).

    The same ``seed`` gives the same subsets on every pass, so the descriptors need not be kept between passes.
    """
    rng = np.random.default_rng(seed)
    for c in counts:
        yield np.sort(rng.choice(c, PER_IMAGE, replace=False)) if c > PER_IMAGE else None


def _voters(descriptors: Sequence[np.ndarray], counts: Sequence[int], seed: int) -> Iterator[torch.Tensor]:
    """Each image's voting descriptors as unit rows, read one image at a time."""
    for i, rows in enumerate(_subsets(counts, seed)):
        if counts[i] == 0:
            yield torch.zeros(0, 128)
            continue
        d = descriptors[i]
        yield unit_rows(d if rows is None else d[rows])


def _vocabulary_sample(descriptors: Sequence[np.ndarray], counts: Sequence[int], seed: int) -> torch.Tensor:
    """Up to ``VOCAB_SAMPLE`` voting descriptors drawn at random over the whole set, as unit rows.

    The same rows, in the same order, as drawing from all images' voters put end to end, without
    holding them all: positions are drawn first, then each image fills its own.
    """
    voting = np.minimum(np.asarray(counts, dtype=np.int64), PER_IMAGE)
    starts = np.concatenate([[0], np.cumsum(voting)])
    order = torch.randperm(int(starts[-1]), generator=torch.Generator().manual_seed(seed))[:VOCAB_SAMPLE].numpy()
    image_of = np.searchsorted(starts, order, side="right") - 1
    sample = torch.zeros(len(order), 128)
    by_image = np.argsort(image_of, kind="stable")
    bounds = np.searchsorted(image_of[by_image], np.arange(len(counts) + 1))
    for i, voters in enumerate(_voters(descriptors, counts, seed)):
        slots = by_image[bounds[i] : bounds[i + 1]]
        if len(slots):
            sample[torch.from_numpy(slots)] = voters[torch.from_numpy(order[slots] - starts[i])]
    return sample


def retrieval_pairs(
    descriptors: Sequence[np.ndarray],
    neighbours: int,
    overlap: int,
    seed: int = 0,
    counts: Sequence[int] | None = None,
    progress: Progress | None = None,
) -> list[tuple[int, int]]:
    """Pairs ``(i, j)``, ``i < j``, sorted, of images given in capture (name) order by their SIFT descriptors.

    ``descriptors[i]``: ``[N_i, 128]`` uint8, read twice, one image at a time (a lazy sequence reading a
    database is enough); ``counts[i]`` is ``N_i`` (default: ``len(descriptors[i])``). ``progress`` hears
    each step as it starts and every 5% of the images read. At most ``n (neighbours + overlap)`` pairs.
    """
    n = len(descriptors)
    counts = [len(descriptors[i]) for i in range(n)] if counts is None else list(counts)
    say = progress or (lambda step, done, total: None)
    pairs = sequential_pairs(n, overlap)
    if sum(min(c, PER_IMAGE) for c in counts) >= 2:
        say("sample", 0, n)
        sample = _vocabulary_sample(descriptors, counts, seed)
        words = min(VOCAB_WORDS, max(2, len(sample) // 50))  # ~50 samples per centre at least
        say("vocabulary", 0, words)
        vocab = train_vocabulary(sample, words, seed=seed)
        histograms = torch.zeros(n, words)
        every = max(1, n // 20)
        for i, voters in enumerate(_voters(descriptors, counts, seed)):
            if i % every == 0:
                say("words", i, n)
            histograms[i] = torch.bincount(nearest_word(voters, vocab), minlength=words).float()
        say("similar", 0, n)
        pairs |= similar_pairs(tf_idf(histograms), neighbours)
    return sorted(pairs)
