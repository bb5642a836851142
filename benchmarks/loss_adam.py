"""Loss SSIM (torch vs C++), masked loss, and Adam step (default per-tensor loop vs fused) on the CPU, side by side.

    .venv/bin/python -m benchmarks loss_adam [--reps 20] [--rounds 3] [--threads 2] [--parts ssim masked adam]

SSIM: forward + backward of the training loss's ``ssim(rgb, gt, padding="same")`` at 160x160
and 400x300 (3 channels), ``backend="torch"`` against ``backend="native"``. Masked loss: forward +
backward of the whole photometric loss ``0.8 L1 + 0.2 (1 - SSIM)`` of a 400x300 and an 800x800 view
against its uint8 photo with an occluder's mask (``model/loss.py``): the torch definition (the path
masked views took before the native kernel had a mask), the native kernel with the mask, and the
same view unmasked. Adam: one
``optimizer.step()`` over the model's six parameter groups for 60k Gaussians at SH degree 1 and
200k at SH degree 3, today's ``torch.optim.Adam`` (per-tensor loop) against ``foreach=True`` and
``build_adam``'s fused kernel, with each one's largest parameter difference from today's after 6 steps. Both variants run in the same process in alternating rounds (these machines are
noisy: only the ratio of one run counts); each figure is the median over all rounds.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from benchmarks._common import cpu_name, load_average, parser

PARTS = ("ssim", "masked", "adam")

if TYPE_CHECKING:
    import torch


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
    import torch

    from pointrix_lite.metrics.ssim import ssim

    g = torch.Generator().manual_seed(0)
    gt = torch.rand(1, height, width, 3, generator=g)
    rgb = (0.8 * gt + 0.2 * torch.rand(1, height, width, 3, generator=g)).requires_grad_(True)

    def run(backend: str) -> Callable[[], None]:
        def step() -> None:
            rgb.grad = None
            (1.0 - ssim(rgb, gt, padding="same", backend=backend)).backward()

        return step

    return _alternate({"torch": run("torch"), "native": run("native")}, reps, rounds)


def bench_masked_loss(width: int, height: int, reps: int, rounds: int) -> dict[str, float]:
    """Median ms of the loss's forward + backward: masked on torch, masked native, unmasked native."""
    import torch

    from pointrix_lite.model.loss import masked_l1, masked_l1_and_ssim, masked_ssim

    g = torch.Generator().manual_seed(0)
    photo = torch.randint(0, 256, (1, height, width, 3), generator=g, dtype=torch.uint8)
    rgb = (0.8 * photo / 255.0 + 0.2 * torch.rand(photo.shape, generator=g)).requires_grad_(True)
    mask = torch.ones(1, height, width, dtype=torch.bool)
    mask[:, height // 4 : 2 * height // 3, width // 3 : 3 * width // 4] = False  # an occluder, ~18% of the view

    def torch_terms(m: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        gt = photo.float() / 255.0  # as masked_l1_and_ssim converted the photo for the torch path
        return masked_l1(rgb, gt, m), masked_ssim(rgb, gt, m)

    def run(terms: Callable[[torch.Tensor | None], tuple[torch.Tensor, torch.Tensor]], m: torch.Tensor | None):
        def step() -> None:
            rgb.grad = None
            l1, s = terms(m)
            (0.8 * l1 + 0.2 * (1.0 - s)).backward()

        return step

    def native_terms(m: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        return masked_l1_and_ssim(rgb, photo, m)  # the loss's path: the kernel reads the uint8 photo

    variants = {
        "masked torch": run(torch_terms, mask),
        "masked native": run(native_terms, mask),
        "unmasked native": run(native_terms, None),
    }
    return _alternate(variants, reps, rounds)


def _adam(params: dict, variant: str) -> torch.optim.Adam:
    from pointrix_lite.model.optimizer import LearningRates, build_adam

    opt = build_adam(params, vars(LearningRates()))
    if variant != "fused":  # today's optimizer: torch's default on CPU is the per-tensor loop
        for group in opt.param_groups:
            group["fused"], group["foreach"] = None, variant == "foreach"
    return opt


def bench_adam(n: int, sh_degree: int, reps: int, rounds: int) -> tuple[dict[str, float], dict[str, float]]:
    """Median ms per step of each variant, and each variant's largest parameter difference from
    the default after 6 steps with fresh random gradients (half the rows zero)."""
    import torch

    k = (sh_degree + 1) ** 2
    shapes = {
        "means": (n, 3),
        "scales": (n, 3),
        "quats": (n, 4),
        "opacities": (n,),
        "sh0": (n, 1, 3),
        "shN": (n, k - 1, 3),
    }
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


def main(argv: list[str] | None = None) -> int:
    ap = parser(__name__, __doc__)
    ap.add_argument("--reps", type=int, default=20, help="timed calls per variant per round")
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS), help="which comparisons to run")
    args = ap.parse_args(argv)
    import torch  # after the parse: --help stays instant; torch before pointrix_lite, as this benchmark always did

    from pointrix_lite.renderer.native._build import load_extension

    torch.set_num_threads(args.threads)
    if load_extension() is None:
        raise SystemExit("error: the native extension is unavailable")
    print(f"threads {args.threads}, torch {torch.__version__}, {cpu_name()}, load {load_average()}; median ms per call")
    for w, h in ((160, 160), (400, 300)) if "ssim" in args.parts else ():
        r = bench_ssim(w, h, args.reps, args.rounds)
        print(
            f"SSIM loss fwd+bwd {w}x{h}: torch {r['torch']:.2f}  native {r['native']:.2f}  "
            f"speed-up {r['torch'] / r['native']:.2f}x"
        )
    for w, h in ((400, 300), (800, 800)) if "masked" in args.parts else ():
        r = bench_masked_loss(w, h, args.reps, args.rounds)
        print(
            f"L1+SSIM loss fwd+bwd {w}x{h}: masked torch {r['masked torch']:.2f}  masked native "
            f"{r['masked native']:.2f}  unmasked native {r['unmasked native']:.2f}; masked native / unmasked "
            f"{r['masked native'] / r['unmasked native']:.2f}x, speed-up over torch {r['masked torch'] / r['masked native']:.2f}x"
        )
    for n, deg in ((60_000, 1), (200_000, 3)) if "adam" in args.parts else ():
        r, diffs = bench_adam(n, deg, args.reps, args.rounds)
        print(
            f"Adam step {n // 1000}k Gaussians SH{deg}: default {r['default']:.2f}  foreach {r['foreach']:.2f}  "
            f"fused {r['fused']:.2f}  speed-up fused {r['default'] / r['fused']:.2f}x; max |param - default| "
            f"after 6 steps: foreach {diffs['foreach']:.2g}, fused {diffs['fused']:.2g}"
        )
    return 0
