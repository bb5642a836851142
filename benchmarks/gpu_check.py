"""Check this checkout on a CUDA machine: gsplat builds, the CUDA tests pass, training runs, a step's cost.

    python -m benchmarks gpu_check                      # the demo scene (generated on first use)
    python -m benchmarks gpu_check --scene DIR          # a COLMAP scene of yours (images/ + sparse/0/)
    python -m benchmarks gpu_check --scene DIR --budget 540 --record   # ... and store the figures (docs/results.md)

Stages, in order, each a subprocess cut off so that the whole check ends within ``--budget`` seconds:

1. ``first_run``: ``configs/colmap_cpu.yaml`` at a GPU's budget (SH 3, MCMC up to ``--cap`` Gaussians) for
   ``--steps`` steps. gsplat compiles its CUDA kernels on the first use on a machine (announced, then cached),
   so this stage also tells how long that takes. Gives a trained model for stage 3.
2. ``cuda_tests``: ``pytest -m cuda`` on the test files that hold CUDA tests (gsplat against the CPU
   rasterizers, the Triton kernels against their references), when ``tests/`` and pytest are there.
3. ``step``: ``benchmarks gpu_step`` on that model: a training step's wall time against the time of gsplat's
   own kernels in it (projection, SH, tile intersection and sort, rasterization forward and backward). The
   ratio is what the project's CUDA step adds to gsplat: loss, SSIM, Adam, densification noise, copies.
4. ``recipe``: ``configs/colmap_gpu.yaml`` (gsplat's recipe) for ``--recipe-steps`` steps: test PSNR and time.

Prints one summary table at the end; ``--record`` also stores it in benchmarks/results/gpu_check.json
(``python -m benchmarks results`` then rewrites docs/results.md). Needs a CUDA device; without one it says so
and exits 2.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

from benchmarks._common import REPO, fresh_run, parser
from benchmarks.results import Table, record

RECORDS_ITSELF = True  # --record stores its own structured row (python -m benchmarks leaves it the flag)
TABLE = Table(
    name="gpu_check",
    title="GPU check",
    about=(
        "`python -m benchmarks gpu_check`: a first training run (gsplat's kernels built inside it), a CUDA "
        "step's wall time against gsplat's kernel time on the trained model, and gsplat's recipe "
        "(`configs/colmap_gpu.yaml`). The step ratio is what the project adds to gsplat's kernels per step."
    ),
    columns=(
        "scene",
        "first run",
        "first-run PSNR",
        "Gaussians",
        "step ms",
        "gsplat kernels ms",
        "step / gsplat",
        "recipe",
        "recipe PSNR",
        "recipe s",
        "CUDA tests",
    ),
    order=90,
)
GPU_BUDGET = ["model.sh_degree=3", "strategy.growth_rate=0.05", "strategy.steps_scaler=0.25", "dataset.scale=1"]
STEP_LINE = re.compile(r"step wall ([\d.]+) ms .* gsplat's kernels ([\d.]+) ms \| wall / gsplat ([\d.]+)x")
PYTEST_LINE = re.compile(r"(\d+ passed[^\n=]*)")


class Stages:
    """Runs the stages as subprocesses within one time budget, each logged under ``out/<name>.log``."""

    def __init__(self, budget: float, out: Path) -> None:
        self.deadline = time.monotonic() + budget
        self.out = out
        out.mkdir(parents=True, exist_ok=True)

    def run(self, name: str, cap: float, cmd: list[str], env: dict[str, str] | None = None) -> tuple[int, str]:
        """Run ``cmd`` for at most ``cap`` seconds (less if the budget is nearly spent); (exit code, output)."""
        left = self.deadline - time.monotonic()
        limit = min(cap, left)
        if limit < 15:
            print(f"== {name}: skipped, the budget is spent", flush=True)
            return -1, ""
        print(f"== {name} (up to {limit:.0f} s): {shlex.join(cmd)}", flush=True)
        start = time.monotonic()
        try:
            proc = subprocess.run(
                cmd, cwd=REPO, capture_output=True, text=True, timeout=limit, env={**os.environ, **(env or {})}
            )
            rc, text = proc.returncode, proc.stdout + proc.stderr
        except subprocess.TimeoutExpired as exc:
            rc, text = 124, _text(exc.stdout) + _text(exc.stderr) + f"\n(cut off after {limit:.0f} s)"
        (self.out / f"{name}.log").write_text(text)
        tail = "\n".join("   | " + line for line in text.strip().splitlines()[-8:])
        print(f"   rc={rc} in {time.monotonic() - start:.0f} s; last lines:\n{tail}", flush=True)
        return rc, text


def _text(data: bytes | str | None) -> str:
    return data.decode(errors="replace") if isinstance(data, bytes) else (data or "")


def _metrics(exp_dir: Path) -> dict:
    try:
        return json.loads((exp_dir / "metrics.json").read_text())
    except (OSError, json.JSONDecodeError):
        return {}


def _cuda_test_files() -> list[str]:
    """The test files that hold CUDA-marked tests (collecting the whole suite needs every dev package)."""
    tests = REPO / "tests"
    marks = ("needs_cuda", "CUDA_ONLY", "ON_CUDA")
    return sorted(str(p.relative_to(REPO)) for p in tests.rglob("test_*.py") if any(m in p.read_text() for m in marks))


def main(argv: list[str] | None = None) -> int:
    p = parser(__name__, __doc__)
    p.add_argument("--scene", type=Path, help="a COLMAP scene (default: the demo scene's COLMAP layout)")
    p.add_argument("--steps", type=int, default=3000, help="first run's steps")
    p.add_argument("--cap", type=int, default=1_000_000, help="the first run's Gaussian budget (MCMC cap)")
    p.add_argument("--recipe-steps", type=int, default=7000, help="configs/colmap_gpu.yaml's steps (0: skip)")
    p.add_argument("--budget", type=float, default=900.0, help="seconds for the whole check")
    p.add_argument("--out", type=Path, default=Path("/tmp/pointrix_gpu_check"))
    p.add_argument("--record", action="store_true", help="store the summary in benchmarks/results/gpu_check.json")
    p.add_argument("--skip", action="append", default=[], choices=["first_run", "cuda_tests", "step", "recipe"])
    p.add_argument("--device", default="cuda", help=argparse.SUPPRESS)  # cpu: a dry run of the plumbing
    args = p.parse_args(argv)
    os.environ.setdefault("PYTHONUNBUFFERED", "1")

    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        print("error: gpu_check needs a CUDA device, and torch finds none", file=sys.stderr)
        return 2
    if args.scene is None:
        from pointrix_lite.data.demo import ensure_demo

        scene = ensure_demo(REPO / "data" / "demo") / "colmap"
    else:
        scene = args.scene.resolve()
    gpu = torch.cuda.get_device_name(0) if args.device == "cuda" else "no GPU (dry run)"
    import gsplat

    print(f"{gpu}; torch {torch.__version__}, gsplat {gsplat.__version__}; scene {scene}", flush=True)
    stages = Stages(args.budget, args.out)
    py = sys.executable
    device = [f"device={args.device}"]
    row: dict[str, object] = {"scene": scene.name if args.scene else "demo"}

    first = args.out / "first_run"
    if "first_run" not in args.skip:
        fresh_run(first)  # this check's own scratch run, not a user's
        train = [py, "scripts/train.py", "--config", "configs/colmap_cpu.yaml"]
        cmd = [*train, f"dataset.data_path={scene}", *GPU_BUDGET, f"strategy.cap_max={args.cap}"]
        cmd += [f"trainer.max_steps={args.steps}", "save_ckpt_after_iter=0", f"exp_dir={first}", *device]
        rc, _ = stages.run("first_run", 300, cmd)
        m = _metrics(first)
        if m:
            row["first run"] = f"{m['steps']} steps, {m['train_seconds']:.0f} s"
            row["first-run PSNR"] = round(m["mean"]["psnr"], 2)
            row["Gaussians"] = m.get("num_gaussians")

    if "cuda_tests" not in args.skip and (REPO / "tests").is_dir() and args.device == "cuda":
        cmd = [py, "-m", "pytest", "-m", "cuda", "-q", "-ra", "-p", "no:cacheprovider", *_cuda_test_files()]
        rc, text = stages.run("cuda_tests", 120, cmd)
        found = PYTEST_LINE.findall(text)
        row["CUDA tests"] = found[-1].strip() if found else f"exit {rc}"

    if "step" not in args.skip and (first / "point_cloud.ply").exists():
        cmd = [py, "-m", "benchmarks", "gpu_step", "--ply", str(first / "point_cloud.ply"), "--data", str(scene)]
        cmd += ["--tree", "this=.", "--rounds", "1", "--steps", "40", "--start-step", str(args.steps)]
        cmd += ["--device", args.device, f"strategy.cap_max={args.cap}"]
        rc, text = stages.run("step", 150, cmd)
        found = STEP_LINE.search(text)
        if found:
            row["step ms"], row["gsplat kernels ms"] = float(found.group(1)), float(found.group(2))
            row["step / gsplat"] = f"{float(found.group(3)):.2f}x"

    recipe = args.out / "recipe"
    if "recipe" not in args.skip and args.recipe_steps > 0:
        fresh_run(recipe)
        cmd = [py, "scripts/train.py", "--config", "configs/colmap_gpu.yaml"]
        cmd += [f"dataset.data_path={scene}", f"trainer.max_steps={args.recipe_steps}", f"exp_dir={recipe}", *device]
        stages.run("recipe", 240, cmd)
        m = _metrics(recipe)
        if m:
            row["recipe"] = f"colmap_gpu.yaml, {m['steps']} steps"
            row["recipe PSNR"] = round(m["mean"]["psnr"], 2)
            row["recipe s"] = round(m["train_seconds"], 1)

    print("\n== summary (" + gpu + ")")
    for col in TABLE.columns:
        print(f"  {col:18s} {row.get(col, '-')}")
    if args.record:
        command = ["python", "-m", "benchmarks", "gpu_check", *(argv if argv is not None else sys.argv[1:])]
        command = [c for c in command if c != "--record"]
        path = record(TABLE, f"{row['scene']}", row, command, on=gpu)
        print(f"recorded in {path.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
