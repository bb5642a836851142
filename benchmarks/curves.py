"""Whole training runs side by side: val PSNR against training seconds, one persistent worker per run.

Runs advance in turns of ``val_every`` steps (:func:`run_curves`), so machine load hits them alike;
each turn's training seconds are timed (validation excluded; a recipe's seeding before the first step
included), then val PSNR is measured at full
resolution; at the end each run reports its test PSNR. Used by ``train --compare`` and
``--time-to-psnr``, and by ``appearance``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from benchmarks import workers


class CurveRun:
    """One persistent curve worker (:func:`benchmarks.training.curve`) and the points it reported."""

    def __init__(self, name: str, tree: Path, spec: dict) -> None:
        self.name, self.points, self.test_psnr, self.half_fitted_psnr = name, [], None, None
        self.proc = subprocess.Popen(
            workers.command("benchmarks.training:curve", spec),
            cwd=os.getcwd(),
            env=workers.environment(tree),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.info = self._read()
        # Step 0 at the seconds spent before training (seeding), 0 for most recipes and old revisions.
        start = self.info.get("seconds", 0.0)
        self.points.append({"step": 0, "seconds": start, "psnr": self.info["psnr"], "n": self.info["n"]})
        self.done = False

    def _read(self) -> dict:
        for line in self.proc.stdout:
            if line.startswith(workers.TAG):
                return json.loads(line[len(workers.TAG) :])
            sys.stderr.write(line)
        raise SystemExit(f"error: curve worker {self.name!r} exited (code {self.proc.wait()}); see its output above")

    def advance(self) -> dict:
        self.proc.stdin.write("next\n")
        self.proc.stdin.flush()
        point = self._read()
        self.points.append(point)
        self.done = bool(point.get("done"))
        return point

    def finish(self) -> None:
        with_stdin = self.proc.stdin
        if not self.done:
            with_stdin.write("stop\n")
        with_stdin.close()
        final = self._read()
        self.test_psnr = final["test_psnr"]
        self.half_fitted_psnr = final.get("half_fitted_psnr")  # NeRF-W's protocol (benchmarks.training)
        self.proc.wait()

    def time_to(self, target: float) -> tuple[float, int] | None:
        for p in self.points:
            if p["psnr"] >= target:
                return p["seconds"], p["step"]
        return None


def run_curves(runs: list[CurveRun], target: float | None, max_seconds: float | None, stop_at_target: bool) -> None:
    """Advance the runs in turns, printing each point, until every run is done."""
    active = list(runs)
    while active:
        for run in list(active):
            p = run.advance()
            print(
                f"  {run.name:<28} step {p['step']:6d}  {p['seconds']:8.1f} s  val PSNR {p['psnr']:6.2f} dB  "
                f"N {p['n']}",
                flush=True,
            )
            reached = target is not None and p["psnr"] >= target
            if run.done or (stop_at_target and reached) or (max_seconds is not None and p["seconds"] >= max_seconds):
                run.finish()
                active.remove(run)


def print_curve_table(runs: list[CurveRun]) -> None:
    steps = sorted({p["step"] for r in runs for p in r.points})
    print("\nval PSNR [dB] / training seconds, per run:")
    print(f"{'step':>7} " + " ".join(f"{r.name[:27]:>28}" for r in runs))
    for s in steps:
        cells = []
        for r in runs:
            p = next((q for q in r.points if q["step"] == s), None)
            cells.append(f"{p['psnr']:6.2f} dB {p['seconds']:7.1f} s N {p['n']:>6}" if p else "")
        print(f"{s:7d} " + " ".join(f"{c:>28}" for c in cells))
    for r in runs:
        last = r.points[-1] if r.points else {"step": 0, "seconds": 0.0}
        half = f" (NeRF-W half-image protocol: {r.half_fitted_psnr:.2f} dB)" if r.half_fitted_psnr is not None else ""
        print(
            f"  {r.name}: test PSNR {r.test_psnr:.2f} dB{half} after {last['step']} steps, {last['seconds']:.1f} s of training"
        )


def print_time_to(runs: list[CurveRun], target: float) -> None:
    print(f"\ntime to {target} dB val PSNR:")
    base = runs[0].time_to(target)
    for r in runs:
        hit = r.time_to(target)
        if hit is None:
            print(f"  {r.name}: not reached (best {max((p['psnr'] for p in r.points), default=float('nan')):.2f} dB)")
            continue
        ratio = f", {hit[0] / base[0]:.2f}x the time of {runs[0].name}" if base and r is not runs[0] else ""
        print(f"  {r.name}: {hit[0]:.1f} s, {hit[1]} steps{ratio}")


def plot(runs: list[CurveRun], path: Path, target: float | None, title: str) -> None:
    """PSNR against training seconds and against steps, one line per run, as a PNG (matplotlib: the dev extra)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_t, ax_s) = plt.subplots(1, 2, figsize=(11, 4.2))
    for r in runs:
        ax_t.plot([p["seconds"] for p in r.points], [p["psnr"] for p in r.points], marker=".", label=r.name)
        ax_s.plot([p["step"] for p in r.points], [p["psnr"] for p in r.points], marker=".", label=r.name)
    for ax, xlabel in ((ax_t, "training seconds (validation excluded)"), (ax_s, "training steps")):
        if target is not None:
            ax.axhline(target, color="grey", lw=0.8, ls="--")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("val PSNR [dB]")
        ax.grid(alpha=0.3)
    ax_t.legend(fontsize=8)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    print(f"plot: {path}")
