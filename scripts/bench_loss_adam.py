"""Loss SSIM (torch vs C++) and Adam step (default per-tensor loop vs fused) on the CPU, side by side.

    .venv/bin/python scripts/bench_loss_adam.py [--reps 20] [--rounds 3] [--threads 2]

SSIM: forward + backward of the training loss's ``ssim(rgb, gt, padding="same")`` at 160x160
and 400x300 (3 channels), ``backend="torch"`` against ``backend="native"``. Adam: one
``optimizer.step()`` over the model's six parameter groups for 60k Gaussians at SH degree 1 and
200k at SH degree 3, today's ``torch.optim.Adam`` (per-tensor loop) against ``foreach=True`` and
``build_adam``'s fused kernel, with each one's largest parameter difference from today's after 6 steps. Both variants run in the same process in alternating rounds (these machines are
noisy: only the ratio of one run counts); each figure is the median over all rounds.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from pointrix_lite.metrics.ssim import ssim  # noqa: E402
from pointrix_lite.model.optimizer import LearningRates, build_adam  # noqa: E402
from pointrix_lite.renderer.native._build import load_extension  # noqa: E402


def _alternate(variants: dict[str, Callable[[], None]], reps: int, rounds: int) -> dict[str, float]:
    """Median ms per call of each variant, the variants taking turns (``reps`` calls per turn)."""
    times: dict[str, list[float]] = {k: [] for k in variants}
    for fn in variants.values():
        fn()  # warm-up
    for _ in range(rounds):
        for name, fn in variants.items():
            for _ in range(reps):
                t = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - t)
    return {k: 1000 * statistics.median(v) for k, v in times.items()}


def bench_ssim(width: int, height: int, reps: int, rounds: int) -> dict[str, float]:
    g = torch.Generator().manual_seed(0)
    gt = torch.rand(1, height, width, 3, generator=g)
    rgb = (0.8 * gt + 0.2 * torch.rand(1, height, width, 3, generator=g)).requires_grad_(True)

    def run(backend: str) -> Callable[[], None]:
        def step() -> None:
            rgb.grad = None
            (1.0 - ssim(rgb, gt, padding="same", backend=backend)).backward()

        return step

    return _alternate({"torch": run("torch"), "native": run("native")}, reps, rounds)


def _adam(params: dict, variant: str) -> torch.optim.Adam:
    opt = build_adam(params, vars(LearningRates()))
    if variant != "fused":  # today's optimizer: torch's default on CPU is the per-tensor loop
        for group in opt.param_groups:
            group["fused"], group["foreach"] = None, variant == "foreach"
    return opt


def bench_adam(n: int, sh_degree: int, reps: int, rounds: int) -> tuple[dict[str, float], dict[str, float]]:
    """Median ms per step of each variant, and each variant's largest parameter difference from
    the default after 6 steps with fresh random gradients (half the rows zero)."""
    k = (sh_degree + 1) ** 2
    shapes = {"means": (n, 3), "scales": (n, 3), "quats": (n, 4), "opacities": (n,), "sh0": (n, 1, 3), "shN": (n, k - 1, 3)}
    start = {p: torch.randn(s, generator=torch.Generator().manual_seed(i)) for i, (p, s) in enumerate(shapes.items())}
    variants, finals = {}, {}
    for name in ("default", "foreach", "fused"):
        params = {p: torch.nn.Parameter(v.clone()) for p, v in start.items()}
        opt = _adam(params, name)
        g = torch.Generator().manual_seed(1)
        for _ in range(6):
            for p in params.values():
                grad = torch.randn(p.shape, generator=g) * 1e-3
                grad[torch.rand(p.shape[0], generator=g) < 0.5] = 0.0
                p.grad = grad
            opt.step()
        finals[name] = params
        variants[name] = opt.step
    diffs = {
        name: max(float((finals[name][p] - finals["default"][p]).detach().abs().max()) for p in shapes)
        for name in ("foreach", "fused")
    }
    return _alternate(variants, reps, rounds), diffs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=20, help="timed calls per variant per round")
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    if load_extension() is None:
        sys.exit("error: the native extension is unavailable")
    print(f"threads {args.threads}, torch {torch.__version__}; median ms per call")
    for w, h in ((160, 160), (400, 300)):
        r = bench_ssim(w, h, args.reps, args.rounds)
        print(f"SSIM loss fwd+bwd {w}x{h}: torch {r['torch']:.2f}  native {r['native']:.2f}  "
              f"speed-up {r['torch'] / r['native']:.2f}x")
    for n, deg in ((60_000, 1), (200_000, 3)):
        r, diffs = bench_adam(n, deg, args.reps, args.rounds)
        print(f"Adam step {n // 1000}k Gaussians SH{deg}: default {r['default']:.2f}  foreach {r['foreach']:.2f}  "
              f"fused {r['fused']:.2f}  speed-up fused {r['default'] / r['fused']:.2f}x; max |param - default| "
              f"after 6 steps: foreach {diffs['foreach']:.2g}, fused {diffs['fused']:.2g}")

if __name__ == "__main__":
    main()
