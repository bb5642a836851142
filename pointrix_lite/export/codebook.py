"""Codebooks for the SOG writer (:mod:`.sog`): 256-entry scalar codebooks and a vector palette,
both fitted by Lloyd's k-means.

Entries are float32 because that is what readers decode them to (PlayCanvas' readers put the
meta.json numbers in a ``Float32Array``); every label is the nearest float32 entry.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from torch import Tensor


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
EXACT_PAIRS = 1 << 28  # vector-centre pairs up to which the palette is fitted and assigned exactly
SAMPLE_PER_CENTRE = 8  # palette fit sample: this many vectors a centre (at least MIN_SAMPLE)
MIN_SAMPLE = 65536
PROBES = 16  # groups of centres searched per vector beyond EXACT_PAIRS (see palette())
GLOBAL_ITERATIONS = 2  # two-level fit: its last Lloyd iterations search across groups (probed_nearest)
# Groups each vector searches in those iterations. Fewer than PROBES on purpose: at 100,000 trained-like
# vectors 2 end 5 % below 16 (rms 0.0335 against 0.0353), at an eighth of the cost.
GLOBAL_PROBES = 2
CHUNK_FLOATS = 1 << 24  # distance block of nearest_centre(): 64 MB of float32, whatever the palette size


def nearest_centre(x: np.ndarray, centres: np.ndarray) -> np.ndarray:
    """int64 index of the nearest of ``centres [K, D]`` for each row of ``x [N, D]`` (exact).

    A k-d tree in few dimensions; beyond, where a tree degenerates into a slower brute force (13 s
    against 4 s for 50,000 rows and 32,768 centres in 45 dimensions on 2 cores), chunked float32
    distances through one matrix product each.
    """
    if x.shape[1] <= KD_TREE_DIMS:
        from scipy.spatial import cKDTree

        return cKDTree(centres).query(x, workers=-1)[1]
    return _nearest_torch(_float32(x), _float32(centres)).numpy()


def _float32(a: np.ndarray | Tensor) -> Tensor:
    import torch

    return torch.as_tensor(a, dtype=torch.float32)


def _distance_blocks(rows: Tensor, c: Tensor) -> Iterator[Tensor]:
    """``|x - c|^2 - |x|^2`` (what every centre shares left out) of each row against every centre, a block of
    rows at a time: each block is at most ``CHUNK_FLOATS`` floats, whatever the number of centres."""
    import torch

    norms = (c * c).sum(1)
    chunk = max(1, CHUNK_FLOATS // max(1, len(c)))
    for start in range(0, len(rows), chunk):
        yield torch.addmm(norms, rows[start : start + chunk], c.T, alpha=-2)


def _nearest_torch(rows: Tensor, c: Tensor) -> Tensor:
    """Exact nearest of the float32 centres ``c`` for each of ``rows``; blocks of rows bound memory."""
    import torch

    labels = [d.argmin(1) for d in _distance_blocks(rows, c)]
    return torch.cat(labels) if labels else torch.empty(0, dtype=torch.int64)


def palette(
    vectors: np.ndarray,
    k: int,
    iterations: int = 10,
    *,
    sample: int | None = None,
    exact_pairs: int = EXACT_PAIRS,
    probes: int = PROBES,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """A palette of at most ``k`` centres for ``vectors [N, D]`` and each vector's centre.

    Lloyd's k-means over every vector costs ``N k D`` per iteration: minutes for 100,000 SH-3
    Gaussians and their 65,536 entries, hours for a million. So the centres are fitted on a seeded
    random ``sample`` of the vectors (default ``max(SAMPLE_PER_CENTRE k, MIN_SAMPLE)``: an export
    stays reproducible), and once ``sample k`` exceeds ``exact_pairs`` by two-level k-means:
    ``sqrt(k)`` coarse groups, Lloyd within each group with centres in proportion to its vectors (an
    iteration compares a vector with its own group's centres only), then ``GLOBAL_ITERATIONS``
    iterations across groups (``GLOBAL_PROBES`` probed). Every vector then gets the nearest centre:
    exactly while ``N k <= exact_pairs``, beyond the nearest among the centres of its ``probes``
    nearest groups (:func:`probed_nearest`; for a million trained-like SH-3 vectors that is the true
    nearest for all but 0.3 %, and their rms error 0.1 % above the exact labels').

    Returns:
        ``centres [K, D]`` float64 (K <= k: the distinct vectors when there are at most ``k``, kept
        exactly) and ``labels [N]`` int64.
    """
    x = vectors.astype(np.float64)
    few = _few_distinct(x, k)
    if few is not None:
        return few
    rng = np.random.default_rng(seed)
    size = sample if sample is not None else max(SAMPLE_PER_CENTRE * k, MIN_SAMPLE)
    fit = x if len(x) <= size else x[np.sort(rng.choice(len(x), size, replace=False))]
    if len(fit) * k <= exact_pairs:
        centres = _lloyd(fit, fit[np.argsort(fit[:, 0], kind="stable")[_evenly(len(fit), k)]], iterations)
    else:
        centres = _two_level(fit, k, iterations, rng)
    rows = _float32(x)
    if len(x) * len(centres) <= exact_pairs:
        return centres, _nearest_torch(rows, _float32(centres)).numpy()
    return centres, probed_nearest(rows, centres, probes, rng).numpy()


def _few_distinct(x: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray] | None:
    """The distinct rows of ``x`` and each row's index among them when there are at most ``k``, else
    None. One column with more than ``k`` values settles it without sorting whole rows (seconds for
    a million)."""
    if len(np.unique(x[:, 0])) > k:
        return None
    distinct, inverse = np.unique(x, axis=0, return_inverse=True)
    return (distinct, inverse.reshape(-1)) if len(distinct) <= k else None


def _spread(n: int, k: int, rng: np.random.Generator) -> np.ndarray:
    """``min(n, k)`` distinct row indices below ``n``, drawn with ``rng``: initial coarse centres."""
    return np.sort(rng.choice(n, min(n, k), replace=False))


def _evenly(n: int, k: int) -> np.ndarray:
    """``min(n, k)`` evenly spaced positions below ``n``. Initial palette entries are rows evenly spaced
    in the order of one coordinate: with nearly as many entries as vectors, random rows would start
    with near twins and end 5% worse (5,000 SH-3 vectors, 4,096 entries)."""
    k = min(n, k)
    return ((np.arange(k) + 0.5) * n / k).astype(np.int64)


def _lloyd(x: np.ndarray, centres: np.ndarray, iterations: int, labels_of=None) -> np.ndarray:
    """``iterations`` Lloyd steps from ``centres``; ``labels_of(centres)`` assigns ``x`` (default:
    exactly). Means in float64; an emptied centre keeps its place (no random re-seed: reproducible)."""
    rows = _float32(x)
    assign = labels_of or (lambda c: _nearest_torch(rows, _float32(c)).numpy())
    for _ in range(iterations):
        labels = assign(centres)
        counts = np.bincount(labels, minlength=len(centres))
        sums = np.stack([np.bincount(labels, weights=col, minlength=len(centres)) for col in x.T], 1)
        moved = np.where(counts[:, None] > 0, sums / np.maximum(counts, 1)[:, None], centres)
        if np.array_equal(moved, centres):  # converged (within groups often after 4 of 8): no change to come
            break
        centres = moved
    return centres


def _quotas(counts: np.ndarray, k: int) -> np.ndarray:
    """Centres per group, in proportion to its vectors (largest remainders), at most its vectors."""
    share = counts * (k / counts.sum())
    quota = np.floor(share).astype(np.int64)
    quota[np.argsort(quota - share, kind="stable")[: k - quota.sum()]] += 1
    return np.minimum(quota, counts)


def _two_level(x: np.ndarray, k: int, iterations: int, rng: np.random.Generator) -> np.ndarray:
    """Centres of ``x`` from Lloyd within ``sqrt(k)`` coarse groups (:func:`palette`)."""
    groups = max(1, math.isqrt(k))
    coarse = _lloyd(x, x[_spread(len(x), groups, rng)], iterations)
    member = nearest_centre(x, coarse)
    x = x[np.lexsort((x[:, 0], member))]  # each group's vectors one slice (the means ignore order)
    rows, counts = _float32(x), np.bincount(member, minlength=groups)
    quota = _quotas(counts, k)
    row_at = np.concatenate([[0], np.cumsum(counts)])  # group j: vectors row_at[j]:row_at[j + 1]
    centre_at = np.concatenate([[0], np.cumsum(quota)])  # and centres centre_at[j]:centre_at[j + 1]

    def within_groups(centres: np.ndarray) -> np.ndarray:
        c = _float32(centres)
        labels = np.empty(len(x), dtype=np.int64)
        for j in np.flatnonzero(quota):  # each vector against its own group's centres only
            lo, hi = row_at[j], row_at[j + 1]
            labels[lo:hi] = centre_at[j] + _nearest_torch(rows[lo:hi], c[centre_at[j] : centre_at[j + 1]]).numpy()
        return labels

    picks = [row_at[j] + _evenly(counts[j], quota[j]) for j in range(groups)]
    local = max(1, iterations - GLOBAL_ITERATIONS)
    centres = _lloyd(x, x[np.concatenate(picks)], local, within_groups)
    # A vector near a group's border may be nearer another group's centres: the last iterations let
    # it move there (an 8 % smaller error at 100,000 trained-like vectors and 65,536 centres).
    return _lloyd(x, centres, iterations - local, lambda c: probed_nearest(rows, c, GLOBAL_PROBES, rng).numpy())


def probed_nearest(rows: Tensor, centres: np.ndarray, probes: int, rng: np.random.Generator) -> Tensor:
    """For each float32 row, the nearest of the ``centres`` in its ``probes`` nearest groups.

    The centres are grouped by their nearest of ``sqrt(K)`` coarse centres (k-means of the centres);
    a row is compared with the coarse centres, then with the centres of its ``probes`` nearest groups:
    ``N (sqrt(K) + probes sqrt(K))`` distances instead of ``N K``. A row whose nearest centre lies in
    a farther group gets the nearest of the searched ones instead.
    """
    import torch

    coarse = _lloyd(centres, centres[_spread(len(centres), math.isqrt(len(centres)), rng)], 5)
    owner = nearest_centre(centres, coarse)
    used = np.flatnonzero(np.bincount(owner, minlength=len(coarse)))
    coarse, owner, groups = coarse[used], np.searchsorted(used, owner), len(used)  # no group without centres
    by_group = np.argsort(owner, kind="stable")
    first = np.concatenate([[0], np.cumsum(np.bincount(owner, minlength=groups))])
    c = _float32(centres[by_group])
    probes = min(probes, groups)
    near = _nearest_groups(rows, _float32(coarse), probes).reshape(-1)  # row r's groups: near[r p:(r + 1) p]
    pairs = torch.argsort(near, stable=True)  # the (row, group) pairs, grouped by group
    starts = torch.searchsorted(near[pairs], torch.arange(groups + 1)).tolist()
    dist = torch.empty(len(pairs))
    index = torch.empty(len(pairs), dtype=torch.int64)
    for j in range(groups):
        lo, hi, these = int(first[j]), int(first[j + 1]), pairs[starts[j] : starts[j + 1]]
        if len(these):  # else no row has this group among its nearest
            dist[these], index[these] = _nearest_in(rows[these // probes], c[lo:hi])
            index[these] += lo
    best = dist.reshape(-1, probes).argmin(1, keepdim=True)
    return torch.from_numpy(by_group)[index.reshape(-1, probes).gather(1, best)[:, 0]]


def _nearest_in(rows: Tensor, c: Tensor) -> tuple[Tensor, Tensor]:
    """``(|x - c|^2 - |x|^2, index)`` of the nearest of ``c`` for each row, in blocks of rows."""
    import torch

    found = [d.min(1) for d in _distance_blocks(rows, c)]
    return torch.cat([f.values for f in found]), torch.cat([f.indices for f in found])


def _nearest_groups(rows: Tensor, coarse: Tensor, probes: int) -> Tensor:
    """``[N, probes]`` indices of each row's ``probes`` nearest coarse centres, in blocks of rows."""
    import torch

    return torch.cat([d.topk(probes, 1, largest=False).indices for d in _distance_blocks(rows, coarse)])
