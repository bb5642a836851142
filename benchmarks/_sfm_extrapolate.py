"""Stage times for photo counts too large to run here, from the parts ``python -m benchmarks sfm`` measured.

Every figure names its formula and the measured numbers it uses; what was measured says "measured".
Both wall seconds (this shared machine, as it was) and CPU seconds (this process, all threads: what
holds when the machine is busy) are given.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

FIT_FROM = 50  # registrations before this are the start-up (initial pair, first adjustments), not the trend


def read_rows(results: Path) -> list[dict]:
    return [json.loads(line) for line in results.read_text().splitlines() if line.strip()]


def _last(rows: list[dict], **match) -> dict | None:
    found = [r for r in rows if all(r.get(k) == v for k, v in match.items())]
    return found[-1] if found else None


def power_fit(points: list[tuple[float, float]]) -> tuple[float, float]:
    """``(a, b)`` of ``y = a x^b``, least squares on logs."""
    b, log_a = np.polyfit(np.log([p[0] for p in points]), np.log([p[1] for p in points]), 1)
    return float(math.exp(log_a)), float(b)


def leaves(n: int, cluster: int) -> int:
    """Clusters COLMAP's hierarchical mapper makes of ``n`` images (branching 2: halved until at most ``cluster``)."""
    return 2 ** max(0, math.ceil(math.log2(n / cluster)))


def extrapolate(rows: list[dict], counts: list[int], cluster: int = 500, overlap: int = 50) -> str:
    """A markdown table: the largest measured set, then ``counts``, stage by stage with formulas.

    Incremental mapping: ``tail x a n^b``, the power fitted to the time to register ``k`` images in the
    measured run (k >= 50), times the share of the run after its last registration (its final global
    adjustment). Hierarchical: ``c Σ m_i^b`` over its clusters of ``m_i`` images (the halving rule for
    ``n``), ``c`` calibrated on the measured run's own clusters, the same ``b``; its wall time is its
    CPU time over the cores its parallel clusters kept busy in the measured run.
    """
    feat = max((r for r in rows if r["stage"] == "features"), key=lambda r: r["n"])
    n0 = feat["n"]
    match = _last(rows, stage="matching", n=n0, matcher="retrieval")
    inc = _last(rows, stage="mapping", n=n0, mapper="incremental")
    hier = _last(rows, stage="mapping", n=n0, mapper="hierarchical")
    choose = {r["n"]: r for r in rows if r["stage"] == "choose_pairs"}
    if match is None or inc is None or hier is None:
        raise SystemExit(f"no retrieval matching and incremental and hierarchical mapping rows for {n0} photos")
    f_wall, f_cpu = feat["seconds"] / feat["new_images"], feat["cpu_seconds"] / feat["new_images"]
    pairs_per_image = match["pairs"] / n0
    p_wall, p_cpu = match["seconds"] / match["pairs"], match["cpu_seconds"] / match["pairs"]
    curve = [(k, w, c) for k, w, c in inc["registrations"] if k >= FIT_FROM]
    aw, bw = power_fit([(k, w) for k, w, _ in curve])
    ac, bc = power_fit([(k, c) for k, _, c in curve])
    tail_w, tail_c = inc["seconds"] / curve[-1][1], inc["cpu_seconds"] / curve[-1][2]
    c_h = hier["cpu_seconds"] / sum(m**bc for m in hier["cluster_sizes"])
    busy = hier["cpu_seconds"] / hier["seconds"]  # cores the parallel clusters kept busy
    out = [
        f"measured at {n0} photos: features {f_wall:.2f} s ({f_cpu:.2f} s CPU) per image; retrieval {match['pairs']} "
        f"pairs ({pairs_per_image:.1f} per image) at {p_wall:.3f} s ({p_cpu:.3f} s CPU) per pair; incremental: "
        f"time to register k images {aw:.3g} k^{bw:.2f} s ({ac:.3g} k^{bc:.2f} s CPU) for k = {FIT_FROM}..{curve[-1][0]}, "
        f"whole run {tail_w:.2f} ({tail_c:.2f} CPU) x the last registration's; hierarchical: "
        f"c = {c_h:.3g} s CPU per cluster image^{bc:.2f}, {busy:.2f} cores busy",
        "",
        "| photos | | features | matching (pairs) | incremental mapping | hierarchical mapping |",
        "| --- | --- | --- | --- | --- | --- |",
        f"| {n0} | measured | {f_wall * n0:.0f} s / {f_cpu * n0:.0f} s CPU "
        f"| {match['seconds']:.0f} s / {match['cpu_seconds']:.0f} s CPU ({match['pairs']}) "
        f"| {inc['seconds']:.0f} s / {inc['cpu_seconds']:.0f} s CPU, {inc.get('registered', 0)}/{n0} "
        f"| {_hier_measured(hier, n0)} |",
    ]
    for n in counts:
        pairs = round(pairs_per_image * n)
        chosen = choose.get(n)
        pick = f" + choosing {chosen['cpu_seconds']:.0f} s (measured, synthetic)" if chosen else ""
        k = leaves(n, cluster)
        size = math.ceil(n / k) + (overlap if k > 1 else 0)
        h_cpu = c_h * k * size**bc
        hier_cell = (
            f"{c_h:.3g} x {k} x {size}^{bc:.2f} = {h_cpu:.0f} s CPU / {busy:.2f} = {h_cpu / busy:.0f} s"
            if k > 1
            else "one cluster: the incremental mapper's time"
        )
        out.append(
            f"| {n} | extrapolated | n x {f_wall:.2f} = {n * f_wall:.0f} s / {n * f_cpu:.0f} s CPU "
            f"| {pairs} x {p_wall:.3f} = {pairs * p_wall:.0f} s / {pairs * p_cpu:.0f} s CPU{pick} "
            f"| {tail_w:.2f} x {aw:.3g} n^{bw:.2f} = {tail_w * aw * n**bw:.0f} s / {tail_c * ac * n**bc:.0f} s CPU "
            f"| {hier_cell} |"
        )
    out.append("")
    out.append(f"hierarchical: clusters of at most {cluster} images (halved until they fit) plus {overlap} shared")
    return "\n".join(out)


def _hier_measured(row: dict | None, n: int) -> str:
    if row is None:
        return "not run"
    clusters = row.get("cluster_sizes", [])
    merge = row.get("merge_seconds")
    return (
        f"{row['seconds']:.0f} s / {row['cpu_seconds']:.0f} s CPU, {row.get('registered', 0)}/{n}; clusters "
        f"{clusters} (at most {row.get('cluster_images')} + overlap), merge {merge} s"
    )
