"""Judge a recipe change on the real-capture suite: the runs `suite` kept, side by side, and the rule's verdict.

    python -m benchmarks suite_judge --out DIR --change model.bound_clipped=true             # shipped -> change
    python -m benchmarks suite_judge --out DIR --base '--against 1fe502a --shared-sfm' --change ''
    python -m benchmarks suite_judge --out DIR --change dataset.mean_background=true --seeds 0,1 --record

A change to a shipped config or a default ships only when the suite's mean PSNR improves and no scene
loses more than 0.2 dB, a scene's difference under 0.3 dB counting only over at least two seeds (one
seed's draw moves a scene by tenths of a dB, some scenes by dB). This trains nothing: each side is the
options a ``python -m benchmarks suite --out DIR`` run was given (``--against``, ``--shared-sfm``,
``--process-args``, overrides; ``''`` is the checkout as shipped), and seed N > 0 is that run with
``seed=N`` first among its overrides, as ``python -m benchmarks suite --out DIR [OPTIONS] seed=N``
keeps it. Both sides are read for the same seeds, so each seed's difference pairs two runs that
differ in the change alone (on one SfM output: give ``--shared-sfm`` to an ``--against`` side).

Printed per scene: each side's unaligned test PSNR per seed and their mean, the difference per seed
and of the means, and the scene's verdict; then the mean over the scenes and the change's verdict.
``--record`` stores the table in benchmarks/results (docs/results.md), so the per-scene differences
that decided a change stay beside the rows they come from.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

from benchmarks import suite
from benchmarks._common import REPO, code_tree, parser

RECORDS_ITSELF = True
WORST_SCENE_DB = 0.2  # no scene may lose more than this
SEEDED_BELOW_DB = 0.3  # a difference smaller than this counts only over two seeds or more
COLUMNS = ("change", "scene", "base PSNR", "base mean", "changed PSNR", "changed mean", "per seed", "dB", "verdict")


@dataclass(frozen=True)
class Side:
    """One side of the comparison: its suite options, and where its runs are kept."""

    options: str
    args: argparse.Namespace
    work: Path

    @property
    def label(self) -> str:
        return self.options or "shipped"

    def folder(self, scene: str, seed: int) -> Path:
        args = argparse.Namespace(**vars(self.args))
        args.overrides = [*([f"seed={seed}"] if seed else []), *self.args.overrides]
        return self.work / scene / suite.run_tag(args, ceiling=False)

    def row(self, scene: str, seed: int) -> dict:
        kept = self.folder(scene, seed) / "row.json"
        if not kept.is_file():
            seeded = f" seed={seed}" if seed else ""
            raise SystemExit(
                f"error: no kept row {kept}: run python -m benchmarks suite --data DIR --out "
                f"{self.args.out} --scenes {scene} {self.options}{seeded} first".replace("  ", " ")
            )
        return json.loads(kept.read_text())

    def version(self, row: dict) -> str:
        """The code that trained ``row``: kept in it, else (a row kept before rows named it) an
        ``--against`` side's commit; never this checkout's."""
        return row.get("version") or suite.against_commit(self.args) or "unknown"


def side(options: str, out: Path) -> Side:
    """The :class:`Side` of ``options`` (a ``suite`` command's options) under ``out``."""
    try:
        args = suite.arguments().parse_args(["--data", str(out), "--out", str(out), *shlex.split(options)])
    except SystemExit:
        raise SystemExit(
            f"error: {options!r} is not a set of suite options (python -m benchmarks suite --help)"
        ) from None
    if args.ceiling:
        raise SystemExit(f"error: {options!r}: a ceiling is not a recipe; judge the default runs")
    _, tree = code_tree(args.against) or ("shipped", REPO)
    return Side(options, args, suite.work_folder(args, tree))


def judge_scene(base: list[float], changed: list[float]) -> tuple[float, str]:
    """The difference of the seeds' means (changed - base) and the scene's verdict under the rule."""
    diff = sum(changed) / len(changed) - sum(base) / len(base)
    if diff < -WORST_SCENE_DB:
        return diff, f"worse by over {WORST_SCENE_DB} dB"
    if abs(diff) < SEEDED_BELOW_DB and min(len(base), len(changed)) < 2:
        return diff, "needs a second seed"
    return diff, "holds"


def verdict(scene_verdicts: list[str], mean_diff: float) -> str:
    """The change's verdict: it ships when the mean improves and every scene holds."""
    failing = sorted({v for v in scene_verdicts if v != "holds"})
    if mean_diff <= 0:
        failing.insert(0, "the mean does not improve")
    return "ships" if not failing else "does not ship: " + "; ".join(failing)


def _psnrs(values: list[float]) -> str:
    return " / ".join(f"{v:.2f}" for v in values)


def compare(base: Side, changed: Side, scenes: list[str], seeds: list[int]) -> tuple[list[dict], dict]:
    """Per scene the cells of :data:`COLUMNS` (and each side's rows), then the mean row's."""
    rows = []
    for scene in scenes:
        b = [base.row(scene, s) for s in seeds]
        c = [changed.row(scene, s) for s in seeds]
        bp, cp = [r["unaligned"]["psnr"] for r in b], [r["unaligned"]["psnr"] for r in c]
        diff, say = judge_scene(bp, cp)
        cells = {
            "scene": scene,
            "base PSNR": _psnrs(bp),
            "base mean": f"{sum(bp) / len(bp):.2f}",
            "changed PSNR": _psnrs(cp),
            "changed mean": f"{sum(cp) / len(cp):.2f}",
            "per seed": " / ".join(f"{y - x:+.2f}" for x, y in zip(bp, cp)),
            "dB": f"{diff:+.2f}",
            "verdict": say,
        }
        means = (sum(bp) / len(bp), sum(cp) / len(cp))
        rows.append({"cells": cells, "base": b, "changed": c, "means": means})
    n = len(rows)
    mb, mc = (sum(r["means"][i] for r in rows) / n for i in (0, 1))
    mean = {
        "scene": f"mean of {n}",
        "base mean": f"{mb:.2f}",
        "changed mean": f"{mc:.2f}",
        "dB": f"{mc - mb:+.2f}",
        "verdict": verdict([r["cells"]["verdict"] for r in rows], mc - mb),
    }
    return rows, mean


def markdown(rows: list[dict], mean: dict) -> str:
    columns = COLUMNS[1:]
    lines = ["| " + " | ".join(columns) + " |", "|" + " --- |" * len(columns)]
    for cells in [*(r["cells"] for r in rows), mean]:
        lines.append("| " + " | ".join(cells.get(k, "") for k in columns) + " |")
    return "\n".join(lines)


def results_table():
    from benchmarks.results import Table

    return Table(
        "capture_suite_judged",
        "Real-capture suite: recipe changes judged",
        "Each recipe change against what it would replace, from the suite's kept runs (`python -m benchmarks "
        "suite_judge --help`): unaligned test PSNR per seed on each side (the same seeds, the same SfM output), "
        f"the means, the difference per seed and of the means. A change ships when the mean improves and no "
        f"scene loses more than {WORST_SCENE_DB} dB; a scene's difference under {SEEDED_BELOW_DB} dB counts only "
        "over two seeds or more. `version` is the code of the changed side's runs, `base version` the other's.",
        (*COLUMNS, "base version"),
        order=37,
    )


def record(base: Side, changed: Side, rows: list[dict], mean: dict, argv: list[str]) -> None:
    from benchmarks.results import record as store

    def shared(side: Side, kept: list[dict]) -> str:
        return ", ".join(dict.fromkeys(side.version(r) for r in kept))

    change = f"{base.label} -> {changed.label}"
    command = ["python", "-m", "benchmarks", "suite_judge", *(a for a in argv if a != "--record")]
    every = [(r["cells"], r["base"], r["changed"]) for r in rows]
    every.append((mean, [k for r in rows for k in r["base"]], [k for r in rows for k in r["changed"]]))
    for cells, b, c in every:
        machines = ", ".join(dict.fromkeys(str(r.get("machine") or "unknown") for r in b + c))
        shown = {"change": change, **cells, "base version": shared(base, b)}
        path = store(results_table(), f"{change} {cells['scene']}", shown, command, on=machines, at=shared(changed, c))
    print(f"recorded in {path}; python -m benchmarks results rewrites docs/results.md")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[2:] if argv is None else argv
    p = parser(__name__, __doc__)
    p.add_argument("--out", type=Path, required=True, help="the suite's --out folder")
    p.add_argument("--base", default="", help="the suite options of what the change would replace ('': shipped)")
    p.add_argument("--change", required=True, help="the suite options of the change, e.g. model.bound_clipped=true")
    p.add_argument("--scenes", default=",".join(suite.CAPTURES), help="comma-separated (default: the captures)")
    p.add_argument("--seeds", default="0,1,2", help="comma-separated seeds, read on both sides")
    p.add_argument("--record", action="store_true", help="store the table in benchmarks/results (docs/results.md)")
    args = p.parse_args(argv)
    try:
        seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    except ValueError:
        raise SystemExit(f"error: --seeds: comma-separated integers, got {args.seeds!r}") from None
    scenes = [s for s in args.scenes.split(",") if s]
    if not seeds or not scenes:
        raise SystemExit("error: --seeds and --scenes each need at least one value")
    if args.base == args.change:
        raise SystemExit(f"error: --base and --change are the same options ({args.base!r})")
    base, changed = side(args.base, args.out), side(args.change, args.out)
    rows, mean = compare(base, changed, scenes, seeds)
    print(f"{base.label} -> {changed.label}, seeds {args.seeds}:\n" + markdown(rows, mean))
    if args.record:
        record(base, changed, rows, mean, argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
