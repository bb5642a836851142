"""Codebooks for the SOG writer (:mod:`.sog`): 256-entry scalar codebooks and a vector palette,
both fitted by Lloyd's k-means.

Entries are float32 because that is what readers decode them to (PlayCanvas' readers put the
meta.json numbers in a ``Float32Array``); every label is the nearest float32 entry.
"""

from __future__ import annotations

import numpy as np


def json_floats(codebook: np.ndarray) -> list[float]:
    """The float32 ``codebook`` as the shortest decimals that read back as the same float32s (a
    float64 of a float32 would print 17 digits)."""
    return [float(str(v)) for v in codebook.astype(np.float32)]


def codebook_1d(
    values: np.ndarray, k: int = 256, iterations: int = 30, alpha: float = 0.5, bins: int = 1024
) -> np.ndarray:
    """``[k]`` float32 entries, ascending, for the pooled ``values``: the distinct values themselves
    when there are at most ``k`` (padded with the largest), else a weighted 1D k-means fit.

    Each value weighs ``density^(alpha - 1)`` (density: its share of a ``bins``-bin histogram), so
    the entries follow ``density^alpha`` rather than the density: ``alpha = 0.5`` is splat-transform's
    choice, and on the demo model it gives a smaller error than plain k-means everywhere (rms and
    largest: the sparse tails, e.g. the largest Gaussians' scales, get entries of their own).
    """
    v = np.sort(values.astype(np.float64).ravel())
    distinct = np.unique(v)
    if len(distinct) <= k:
        return np.concatenate([distinct, np.full(k - len(distinct), distinct[-1])]).astype(np.float32)
    b = np.minimum(((v - v[0]) / (v[-1] - v[0]) * bins).astype(np.int64), bins - 1)
    w = np.bincount(b, minlength=bins)[b] ** (alpha - 1.0)
    cw, cwx = np.concatenate([[0.0], np.cumsum(w)]), np.concatenate([[0.0], np.cumsum(w * v)])
    # Start at weighted quantiles; on sorted data every cluster is then a run between two midpoints.
    centres = v[np.minimum(np.searchsorted(cw[1:], (np.arange(k) + 0.5) / k * cw[-1]), len(v) - 1)]
    for _ in range(iterations):
        ends = np.concatenate([np.searchsorted(v, (centres[:-1] + centres[1:]) / 2), [len(v)]])
        starts = np.concatenate([[0], ends[:-1]])
        weight = cw[ends] - cw[starts]
        new = np.where(weight > 0, (cwx[ends] - cwx[starts]) / np.where(weight > 0, weight, 1), centres)
        if np.array_equal(new, centres):
            break
        centres = new
    return centres.astype(np.float32)


def nearest_1d(values: np.ndarray, codebook: np.ndarray) -> np.ndarray:
    """uint8 index of the nearest entry of the ascending ``codebook`` for each of ``values``."""
    mids = (codebook[:-1].astype(np.float64) + codebook[1:]) / 2
    return np.searchsorted(mids, values.astype(np.float64), side="right").astype(np.uint8)


KD_TREE_DIMS = 16  # up to here a k-d tree finds nearest centres fastest (SH degree 1: 9 dimensions)


def nearest_centre(x: np.ndarray, centres: np.ndarray, chunk: int = 4096) -> np.ndarray:
    """int64 index of the nearest of ``centres [K, D]`` for each row of ``x [N, D]``.

    A k-d tree in few dimensions; beyond, where a tree degenerates into a slower brute force (13 s
    against 4 s for 50,000 rows and 32,768 centres in 45 dimensions on 2 cores), chunked float32
    distances through one matrix product each.
    """
    if x.shape[1] <= KD_TREE_DIMS:
        from scipy.spatial import cKDTree

        return cKDTree(centres).query(x, workers=-1)[1]
    import torch

    c = torch.from_numpy(centres).float()
    rows = torch.from_numpy(x).float()
    norms = (c * c).sum(1)
    labels = torch.empty(len(x), dtype=torch.int64)
    for start in range(0, len(x), chunk):  # |x - c|^2 less the |x|^2 every centre shares
        labels[start : start + chunk] = torch.addmm(norms, rows[start : start + chunk], c.T, alpha=-2).argmin(1)
    return labels.numpy()


def palette(vectors: np.ndarray, k: int, iterations: int = 10) -> tuple[np.ndarray, np.ndarray]:
    """A palette of at most ``k`` centres for ``vectors [N, D]`` and each vector's nearest centre.

    Returns:
        ``centres [K, D]`` float64 (K <= k: the distinct vectors when there are at most ``k``, kept
        exactly) and ``labels [N]`` int64.
    """
    x = vectors.astype(np.float64)
    distinct, inverse = np.unique(x, axis=0, return_inverse=True)
    if len(distinct) <= k:
        return distinct, inverse.reshape(-1)
    centres = distinct[((np.arange(k) + 0.5) * len(distinct) / k).astype(np.int64)]
    for _ in range(iterations):
        labels = nearest_centre(x, centres)
        counts = np.bincount(labels, minlength=k)
        sums = np.stack([np.bincount(labels, weights=col, minlength=k) for col in x.T], 1)
        # An emptied centre keeps its place: no random re-seed, so an export is reproducible.
        centres = np.where(counts[:, None] > 0, sums / np.maximum(counts, 1)[:, None], centres)
    return centres, nearest_centre(x, centres)
