"""Judge a recipe change on the real-capture suite: the runs `suite` kept, side by side, and the rule's verdict.

    python -m benchmarks suite_judge --out DIR --change model.bound_clipped=true             # shipped -> change
    python -m benchmarks suite_judge --out DIR --base '--against 1fe502a --shared-sfm' --change ''
    python -m benchmarks suite_judge --out DIR --change dataset.mean_background=true --seeds 0,1 --record

A change to a shipped config or a default ships only when the suite's mean PSNR improves and no scene
loses more than 0.2 dB, a scene's difference under 0.3 dB counting only over at least two seeds (one
seed's draw moves a scene by tenths of a dB, some scenes by dB). This trains nothing: each side is the
options a ``python -m benchmarks suite --out DIR`` run was given (``--against``, ``--shared-sfm``,
``--process-args``, overrides; ``''`` is the checkout as shipped; a value that starts with ``--`` and
holds no space is written ``--change=--shared-sfm``), and seed N > 0 is that run with ``seed=N`` before
its other overrides (``python -m benchmarks suite --out DIR --against REV seed=1 model.x=1``), where the
suite keeps it. Both sides are read for the same seeds, so each seed's difference pairs two runs that
differ in the change alone where both train on one SfM output (an ``--against`` side needs
``--shared-sfm`` for that); where they do not, the table says so, since the SfM draw alone moves a scene
by tenths of a dB.

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
from typing import TYPE_CHECKING, NoReturn

from benchmarks import suite
from benchmarks._common import REPO, parser

if TYPE_CHECKING:
    from benchmarks.results import Table

RECORDS_ITSELF = True  # its rows are the per-scene table, not the closing lines
WORST_SCENE_DB = 0.2  # no scene may lose more than this
SEEDED_BELOW_DB = 0.3  # a difference smaller than this counts only over two seeds or more
COLUMNS = ("change", "scene", "base PSNR", "base mean", "changed PSNR", "changed mean", "per seed", "dB", "verdict")
OWN_SFM = " (each on its own SfM output)"


@dataclass(frozen=True)
class Side:
    """One side of the comparison: its suite options (as given and parsed), and where its runs are kept."""

    flag: str
    options: str
    args: argparse.Namespace
    work: Path
    tree: Path

    @property
    def label(self) -> str:
        return self.options or "shipped"

    def seeded(self, seed: int) -> argparse.Namespace:
        """The options of this side's run with ``seed``: ``seed=N`` first among the overrides."""
        seeded = [*([f"seed={seed}"] if seed else []), *self.args.overrides]
        return argparse.Namespace(**vars(self.args) | {"overrides": seeded})

    def folder(self, scene: str, seed: int) -> Path:
        return self.work / scene / suite.run_tag(self.seeded(seed), ceiling=False)

    def sfm(self, scene: str) -> Path:
        return suite.sfm_folder(self.args, self.tree, scene)

    def command(self, scene: str, seed: int) -> str:
        """The suite command that keeps this side's run of ``scene`` with ``seed``."""
        overrides = self.seeded(seed).overrides
        flags = [t for t in shlex.split(self.options) if t not in self.args.overrides]
        suite_args = ["--data", "DIR", "--out", str(self.args.out), "--scenes", scene, *flags, *overrides]
        return shlex.join(["python", "-m", "benchmarks", "suite", *suite_args])

    def row(self, scene: str, seed: int) -> dict:
        """The kept row of ``scene`` with ``seed``; a one-line error naming it (and how to make it) otherwise."""
        kept = self.folder(scene, seed) / "row.json"
        if not kept.is_file():
            raise SystemExit(f"error: no kept row {kept}: run {self.command(scene, seed)} first")
        try:
            row = json.loads(kept.read_text())
            psnr = row["unaligned"]["psnr"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise SystemExit(f"error: {kept}: not a suite row ({exc})") from None
        if not isinstance(psnr, (int, float)):
            raise SystemExit(f"error: {kept}: no test PSNR (the run left no scores); run {self.command(scene, seed)}")
        return row

    def version(self, row: dict) -> str:
        """The code that trained ``row``: kept in it, else (a row kept before rows named it) an
        ``--against`` side's commit; never this checkout's."""
        return row.get("version") or suite.against_commit(self.args) or "unknown"


def _refusing(p: argparse.ArgumentParser, flag: str) -> argparse.ArgumentParser:
    """``p`` (the suite's parser) made to raise one line naming the judge's ``flag`` instead of printing
    usage or help: the options are the judge's input, not the user's command line."""

    def refuse(message: str) -> NoReturn:
        raise SystemExit(f"error: {flag}: {message} (the options of python -m benchmarks suite)")

    p.error = refuse  # type: ignore[method-assign]
    p.print_help = lambda file=None: refuse("suite options only, not --help")  # type: ignore[method-assign]
    return p


def side(flag: str, options: str, out: Path) -> Side:
    """The :class:`Side` of ``options`` (a ``suite`` command's options, given as ``flag``) under ``out``."""
    p = _refusing(suite.arguments(), flag)
    try:
        args = p.parse_args(["--data", str(out), "--out", str(out), *shlex.split(options)])
    except ValueError as exc:  # shlex: an unclosed quote
        raise SystemExit(f"error: {flag}: {options!r}: {exc}") from None
    if args.ceiling:
        raise SystemExit(f"error: {flag}: {options!r}: a ceiling is not a recipe; judge the default runs")
    if any(o.startswith("seed=") for o in args.overrides):
        raise SystemExit(f"error: {flag}: {options!r}: seeds are --seeds, not an override")
    return Side(flag, options, args, suite.work_folder(args, tree_path(args.against)), tree_path(args.against))


def tree_path(against: str | None) -> Path:
    """The code tree ``--against`` names, without checking anything out: only its folder name is read."""
    from benchmarks import revision

    if against is None:
        return REPO
    path = Path(against)
    return path.resolve() if (path / "pointrix_lite").is_dir() else revision.worktree_path(against)


def judge_scene(base: list[float], changed: list[float]) -> tuple[float, str]:
    """The difference of the seeds' means (changed - base) and the scene's verdict under the rule."""
    diff = sum(changed) / len(changed) - sum(base) / len(base)
    if abs(diff) < SEEDED_BELOW_DB and min(len(base), len(changed)) < 2:
        return diff, "needs a second seed"
    if diff < -WORST_SCENE_DB:
        return diff, f"worse by over {WORST_SCENE_DB} dB"
    return diff, "holds"


def verdict(scene_verdicts: list[str], mean_diff: float) -> str:
    """The change's verdict: it ships when the mean improves and every scene holds; else the reasons, the
    gravest first."""
    failing = [] if mean_diff > 0 else ["the mean does not improve"]
    failing += [v for v in (f"worse by over {WORST_SCENE_DB} dB", "needs a second seed") if v in scene_verdicts]
    return "ships" if not failing else "does not ship: " + "; ".join(failing)


def _psnrs(values: list[float]) -> str:
    return " / ".join(f"{v:.2f}" for v in values)


def compare(base: Side, changed: Side, scenes: list[str], seeds: list[int]) -> tuple[list[dict], dict]:
    """Per scene the cells of :data:`COLUMNS` with each side's rows and means, then the mean row's cells."""
    rows = []
    for scene in scenes:
        b = [base.row(scene, s) for s in seeds]
        c = [changed.row(scene, s) for s in seeds]
        bp, cp = [r["unaligned"]["psnr"] for r in b], [r["unaligned"]["psnr"] for r in c]
        diff, say = judge_scene(bp, cp)
        means = (sum(bp) / len(bp), sum(cp) / len(cp))
        cells = {
            "scene": scene,
            "base PSNR": _psnrs(bp),
            "base mean": f"{means[0]:.2f}",
            "changed PSNR": _psnrs(cp),
            "changed mean": f"{means[1]:.2f}",
            "per seed": " / ".join(f"{y - x:+.2f}" for x, y in zip(bp, cp)),
            "dB": f"{diff:+.2f}",
            "verdict": say,
        }
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
    """The printed table: one line per scene, then the mean's."""
    columns = COLUMNS[1:]
    lines = ["| " + " | ".join(columns) + " |", "|" + " --- |" * len(columns)]
    for cells in [*(r["cells"] for r in rows), mean]:
        lines.append("| " + " | ".join(cells.get(k, "") for k in columns) + " |")
    return "\n".join(lines)


def results_table() -> Table:
    from benchmarks.results import Table

    return Table(
        "capture_suite_judged",
        "Real-capture suite: recipe changes judged",
        "Each recipe change against what it would replace, from the suite's kept runs (`python -m benchmarks "
        "suite_judge --help`): unaligned test PSNR per seed on each side (the same seeds; one SfM output unless "
        f"the change says{OWN_SFM}), the means, the difference per seed and of the means. A change ships when "
        f"the mean improves and no scene loses more than {WORST_SCENE_DB} dB; a scene's difference under "
        f"{SEEDED_BELOW_DB} dB counts only over two seeds or more. `version` is the code of the changed side's "
        "runs, `base version` the other's.",
        (*COLUMNS, "base version"),
        order=37,
    )


def record(change: str, base: Side, changed: Side, rows: list[dict], mean: dict, argv: list[str]) -> None:
    """Store each scene's cells and the mean's as rows of :func:`results_table`, keyed by the change."""
    from benchmarks.results import record as store

    def versions(side: Side, kept: list[dict]) -> str | None:
        return suite.shared([side.version(r) for r in kept])

    command = ["python", "-m", "benchmarks", "suite_judge", *(a for a in argv if a != "--record")]
    every = [(r["cells"], r["base"], r["changed"], "") for r in rows]
    kept_b, kept_c = [k for r in rows for k in r["base"]], [k for r in rows for k in r["changed"]]
    every.append((mean, kept_b, kept_c, suite.MEAN_KEY))
    for cells, b, c, last in every:
        machines = suite.shared([r.get("machine") or "unknown" for r in b + c])
        shown = {"change": change, **cells, "base version": versions(base, b)}
        key = f"{change} {last}{cells['scene']}"
        path = store(results_table(), key, shown, command, on=machines, at=versions(changed, c))
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
    if not seeds or len(set(seeds)) < len(seeds) or min(seeds) < 0:
        raise SystemExit(f"error: --seeds: distinct seeds >= 0, at least one, got {args.seeds!r}")
    scenes = suite.scene_names(args.scenes)
    base, changed = side("--base", args.base, args.out), side("--change", args.change, args.out)
    if base.folder(scenes[0], seeds[0]) == changed.folder(scenes[0], seeds[0]):
        raise SystemExit(f"error: --base {args.base!r} and --change {args.change!r} name the same runs")
    own_sfm = any(base.sfm(s) != changed.sfm(s) for s in scenes)
    change = f"{base.label} -> {changed.label}" + (OWN_SFM if own_sfm else "")
    rows, mean = compare(base, changed, scenes, seeds)
    print(f"{change}, seeds {', '.join(map(str, seeds))}:\n" + markdown(rows, mean))
    if args.record:
        record(change, base, changed, rows, mean, argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
