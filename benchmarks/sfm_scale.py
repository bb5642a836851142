"""SfM for 1000 to 3000 photos: retrieval's pair choice measured alone, and every stage extrapolated.

    python -m benchmarks sfm_scale retrieval --counts 300,1000,3000      # pair choice on synthetic descriptors
    python -m benchmarks sfm_scale extrapolate --counts 1000,3000         # from benchmarks sfm's results.jsonl

``retrieval`` times :func:`pointrix_lite.process.retrieval.retrieval_pairs` step by step (vocabulary
sample, k-means, words, similarities) on random SIFT-like descriptors (``--per-image`` each, 30% of the
bins set, made one image at a time as a database hands them out), each count in a fresh process so
its peak RSS is its own.

``extrapolate`` reads the rows ``python -m benchmarks sfm`` wrote (``--root``/``results.jsonl``) for the
largest measured set and prints what 1000 and 3000 photos would take, every figure with its formula:
features and matching are linear (seconds per image, pairs per image and seconds per pair measured);
the pair choice comes from this benchmark's ``retrieval`` rows; incremental mapping grows as a power of
``n`` fitted to the measured registration times; hierarchical mapping is linear in its clusters (see
``docs/data.md``, "Large photo sets").
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from benchmarks._common import REPO, cpu_name, load_average, parser


class SyntheticDescriptors(Sequence):
    """``n`` images of ``per_image`` random SIFT-like descriptors, made on demand (nothing is held)."""

    def __init__(self, n: int, per_image: int, seed: int = 0) -> None:
        self.n, self.per_image, self.seed = n, per_image, seed

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> np.ndarray:
        if not 0 <= i < self.n:
            raise IndexError(i)  # where iterating a Sequence stops
        rng = np.random.default_rng((self.seed, i))
        shape = (self.per_image, 128)
        return (rng.integers(0, 120, size=shape) * (rng.random(shape) < 0.3)).astype(np.uint8)


def one_retrieval(n: int, per_image: int, neighbours: int) -> dict:
    """Time the pair choice for ``n`` synthetic images in this process; the step seconds and peak RSS."""
    from pointrix_lite.process.options import RETRIEVAL_OVERLAP
    from pointrix_lite.process.retrieval import retrieval_pairs

    base_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6
    marks: list[tuple[str, float]] = []

    def progress(step: str, done: int, total: int) -> None:
        if not marks or marks[-1][0] != step:
            marks.append((step, time.perf_counter()))

    start, cpu = time.perf_counter(), time.process_time()
    pairs = retrieval_pairs(SyntheticDescriptors(n, per_image), neighbours, RETRIEVAL_OVERLAP, progress=progress)
    end = time.perf_counter()
    ends = [t for _, t in marks[1:]] + [end]
    steps = {step: round(e - t, 2) for (step, t), e in zip(marks, ends)}
    return dict(
        n=n,
        per_image=per_image,
        pairs=len(pairs),
        seconds=round(end - start, 2),
        cpu_seconds=round(time.process_time() - cpu, 2),
        steps=steps,
        peak_rss_gb=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6, 3),
        rss_before_gb=round(base_gb, 3),
    )


def retrieval_rows(counts: list[int], per_image: int, neighbours: int, results: Path) -> list[dict]:
    """One fresh process per count (its own peak RSS); each row is appended to ``results``."""
    rows = []
    for n in counts:
        cmd = [sys.executable, "-m", "benchmarks", "sfm_scale", "_one", str(n), str(per_image), str(neighbours)]
        out = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, check=True).stdout
        row = dict(stage="choose_pairs", synthetic=True, **json.loads(out.splitlines()[-1]))
        rows.append(row)
        with results.open("a") as f:
            f.write(json.dumps(row) + "\n")
        print(f"  {row}", flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["_one"]:  # the child of retrieval_rows
        print(json.dumps(one_retrieval(*(int(a) for a in argv[1:4]))))
        return 0
    p = parser(__name__, __doc__)
    p.add_argument("what", choices=("retrieval", "extrapolate"))
    p.add_argument("--root", type=Path, default=REPO / "build" / "sfm_bench")
    p.add_argument("--counts", default="300,1000,3000", help="photos per set")
    p.add_argument("--per-image", type=int, default=2000, help="retrieval: descriptors per image")
    p.add_argument("--neighbors", type=int, default=10, help="retrieval: --retrieval-neighbors")
    args = p.parse_args(argv)
    counts = [int(c) for c in args.counts.split(",")]
    args.root.mkdir(parents=True, exist_ok=True)
    results = args.root / "results.jsonl"
    print(f"CPU: {cpu_name()}; load average {load_average()}", flush=True)
    if args.what == "retrieval":
        retrieval_rows(counts, args.per_image, args.neighbors, results)
        return 0
    from benchmarks._sfm_extrapolate import extrapolate, read_rows

    print(extrapolate(read_rows(results), counts))
    return 0
