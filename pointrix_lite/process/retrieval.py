"""Which image pairs to match when every pair is too many, without a downloaded vocabulary tree.

Exhaustive matching costs ``n (n - 1) / 2`` pairs; COLMAP's answer for large sets, a vocabulary tree,
is a file that has to be downloaded. This learns a small visual vocabulary from the set's own SIFT
descriptors instead (spherical k-means), describes every image by its tf-idf weighted word histogram,
and pairs each image with the ``neighbours`` images most similar to it and with its ``overlap`` next
images in name order (phones and video frames name photos in the order they were taken). The pairs then
grow as ``n (neighbours + overlap)``, and the photos of one spot taken at different times (a second
orbit, the end of a loop) still meet: sequential matching alone never pairs them.
"""

from __future__ import annotations

import numpy as np
import torch

VOCAB_WORDS = 1024
VOCAB_SAMPLE = 100_000  # descriptors the vocabulary is learned from
KMEANS_ITERS = 8
PER_IMAGE = 2048  # descriptors per image that vote for words (a random subset of larger sets)
CHUNK = 16384  # rows per similarity block: bounds the [rows, words] scores at 64 MB


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


def image_vectors(word_ids: list[torch.Tensor], words: int) -> torch.Tensor:
    """``[n, words]`` unit tf-idf vectors from each image's word indices.

    Counts enter as square roots: a repeated texture (bricks, gravel) fires one word hundreds of times
    in one photo and would otherwise decide its neighbours alone.
    """
    counts = torch.stack([torch.bincount(w, minlength=words).float() for w in word_ids])
    df = (counts > 0).sum(0).float()
    idf = torch.where(df > 0, torch.log(len(word_ids) / df.clamp(min=1)), torch.zeros_like(df))
    return torch.nn.functional.normalize(counts.sqrt() * idf, dim=1)


def similar_pairs(vectors: torch.Tensor, neighbours: int) -> set[tuple[int, int]]:
    """``(i, j)``, ``i < j``: each image with its ``neighbours`` most similar others (cosine of ``vectors``)."""
    n = len(vectors)
    k = min(neighbours, n - 1)
    if k <= 0:
        return set()
    sim = vectors @ vectors.T
    sim.fill_diagonal_(-float("inf"))
    top = sim.topk(k, dim=1).indices.tolist()
    return {(min(i, j), max(i, j)) for i, row in enumerate(top) for j in row}


def sequential_pairs(n: int, overlap: int) -> set[tuple[int, int]]:
    """``(i, i + d)`` for ``d`` in ``1 .. overlap``."""
    return {(i, i + d) for i in range(n) for d in range(1, overlap + 1) if i + d < n}


def retrieval_pairs(descriptors: list[np.ndarray], neighbours: int, overlap: int, seed: int = 0) -> list[tuple[int, int]]:
    """Pairs ``(i, j)``, ``i < j``, sorted, of images given in capture (name) order by their SIFT descriptors.

    ``descriptors[i]``: ``[N_i, 128]`` uint8. At most ``n (neighbours + overlap)`` pairs.
    """
    n = len(descriptors)
    rng = np.random.default_rng(seed)
    per_image = [unit_rows(d if len(d) <= PER_IMAGE else d[np.sort(rng.choice(len(d), PER_IMAGE, replace=False))])
                 for d in descriptors]  # fmt: skip
    pool = torch.cat(per_image) if per_image else torch.zeros(0, 128)
    pairs = sequential_pairs(n, overlap)
    if len(pool) >= 2:
        sample = pool[torch.randperm(len(pool), generator=torch.Generator().manual_seed(seed))[:VOCAB_SAMPLE]]
        words = min(VOCAB_WORDS, max(2, len(sample) // 50))  # ~50 samples per centre at least
        vocab = train_vocabulary(sample, words, seed=seed)
        pairs |= similar_pairs(image_vectors([nearest_word(x, vocab) for x in per_image], words), neighbours)
    return sorted(pairs)
