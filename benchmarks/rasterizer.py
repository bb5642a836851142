"""Benchmark the native C++ rasterizer against the pure-torch reference, side by side.

    .venv/bin/python -m benchmarks rasterizer [--scenes small,large] [--reps 5] [--threads 2]
    .venv/bin/python -m benchmarks rasterizer --against 1c2aacc [--rounds 3] [--threads 1]
    .venv/bin/python -m benchmarks rasterizer --arch native,x86-64-v3,x86-64-v2,scalar [--against REV]

Scenes (``benchmarks/scenes.py``): ``small`` 160x160/20k and ``large`` 400x300/200k (a cube of
Gaussians), ``photo540`` 960x540/300k and ``photo1080`` 1080x1920/500k (surfels shaped like a
trained real capture), all SH 3.

``--against REV`` and ``--arch LIST`` compare *variants* of the native backend with the same
measurement code, alternating between them ``--rounds`` times in one run: revision REV (a cached git
worktree with its own extension build, see ``benchmarks/revision.py``) and the working tree built for each
target of LIST (``POINTRIX_NATIVE_ARCH``: each target is its own cached module, so an AVX-512 machine
also measures the x86-64-v3 and v2 code). It prints, per variant, the median forward and
forward+backward wall time, the wall time of each native stage (each extension call timed around the
call, so it works for any revision's bindings) and the forward's alpha evaluations per pixel (one per
in-image pixel of each visited Gaussian block or row), then the first variant's time over each other's.
Run time on 2 Zen 3 cores, 4 targets x 3 rounds: small and large ~3 min, photo540 ~4 min,
photo1080 ~6 min (photo scenes default to 2 reps).

For each fixed seeded scene and backend a fresh subprocess measures (so peak memory is
per measurement): median forward ms, median forward+backward ms, peak memory, and the
Gaussian-pixel alpha evaluations per second of the native forward. Peak memory is the
growth of the process's peak RSS (``resource.getrusage(...).ru_maxrss``) over its RSS just
before the first render, i.e. what rendering itself allocated, torch's allocations included.
"""

from __future__ import annotations

import os
import resource
import statistics
import time
from pathlib import Path

from benchmarks import revision, workers
from benchmarks._common import REPO, parser
from benchmarks.scenes import SCENES, check_scene, scene, scene_info


def _rss_mb() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


# extension function -> stage name (the same names on every revision since the native backend landed)
STAGES = {
    "project_fwd": "projection",
    "sh_fwd": "SH",
    "bin_tiles": "binning",
    "raster_fwd": "raster fwd",
    "raster_bwd": "raster bwd",
    "sh_bwd": "SH bwd",
    "project_bwd": "projection bwd",
}


def _time_stages(totals: dict) -> None:
    """Wrap the loaded extension's functions so each call adds its wall ms to ``totals[stage]``.

    Wrapping the module attributes (rather than profiling autograd nodes) measures the C++ call
    alone and needs nothing from the revision under test but its function names.
    """
    from pointrix_lite.renderer.native._build import load_extension

    ext = load_extension()
    for fn_name, stage in STAGES.items():
        fn = getattr(ext, fn_name, None)
        if fn is None:
            continue

        def timed(*args, _fn=fn, _stage=stage):
            t0 = time.perf_counter()
            try:
                return _fn(*args)
            finally:
                totals[_stage] = totals.get(_stage, 0.0) + 1e3 * (time.perf_counter() - t0)

        setattr(ext, fn_name, timed)


def worker(spec: dict) -> dict:
    """Worker: ``spec["reps"]`` timed renders (after a warm-up) of one scene with one backend."""
    import torch

    backend, reps = spec["backend"], spec["reps"]
    torch.set_num_threads(spec["threads"])
    from pointrix_lite.renderer import rasterization

    s = scene(spec["scene"])
    if backend == "native":
        from pointrix_lite.renderer import native

        assert native.is_available(), native.unavailable_reason()
    stage_ms: dict = {}
    if backend == "native":
        _time_stages(stage_ms)
    stage_runs: list[dict] = []
    params = {k: s[k].clone().requires_grad_(True) for k in ("means", "quats", "scales", "opacities", "colors")}

    def render():
        return rasterization(
            params["means"],
            params["quats"],
            params["scales"],
            params["opacities"],
            params["colors"],
            s["viewmats"],
            s["Ks"],
            s["width"],
            s["height"],
            sh_degree=s["sh_degree"],
            backend=backend,
        )

    base_rss = _rss_mb()
    fwd, fwdbwd = [], []
    meta = {}
    for _ in range(reps + 1):  # first round is warm-up (allocator, lazy init)
        with torch.no_grad():
            t0 = time.perf_counter()
            _, _, meta = render()
            fwd.append(time.perf_counter() - t0)
        stage_ms.clear()
        t0 = time.perf_counter()
        colors, alphas, meta = render()
        meta["means2d"].retain_grad()
        (colors.sum() + alphas.sum()).backward()
        fwdbwd.append(time.perf_counter() - t0)
        stage_runs.append(dict(stage_ms))
        for p in params.values():
            p.grad = None
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 - base_rss
    return dict(
        fwd_ms=1e3 * statistics.median(fwd[1:] if reps else fwd),
        fwdbwd_ms=1e3 * statistics.median(fwdbwd[1:] if reps else fwdbwd),
        peak_mb=peak_mb,
        n_evals=meta.get("n_evaluations"),
        n_pairs=int(meta["tiles_per_gauss"].sum()) if "tiles_per_gauss" in meta else None,
        stages_ms={
            k: statistics.median(r.get(k, 0.0) for r in stage_runs[1:] or stage_runs)
            for k in STAGES.values()
            if any(k in r for r in stage_runs)
        },
        visible=int((meta["radii"] > 0).all(-1).sum()),
        isa=_isa() if backend == "native" else None,
    )


def _isa() -> str | None:
    # revisions before issue 29 have no isa_level()
    from pointrix_lite.renderer import native

    return native.isa_level() if hasattr(native, "isa_level") else None


def measure(backend: str, scene: str, reps: int, threads: int, tree: Path = REPO, arch: str = "native") -> dict:
    """Run :func:`worker` in a fresh subprocess importing ``pointrix_lite`` from ``tree`` (default: here),
    its native extension built for ``arch`` (``POINTRIX_NATIVE_ARCH``); ``{"error": ...}`` when it failed."""
    spec = {"backend": backend, "scene": scene, "reps": reps, "threads": threads}
    proc = workers.run("benchmarks.rasterizer:worker", spec, tree, env={"POINTRIX_NATIVE_ARCH": arch})
    results = workers.results(proc.stdout)
    if proc.returncode != 0 or not results:
        return {"error": workers.stderr_tail(proc) if proc.stderr.strip() else f"exit {proc.returncode}"}
    return results[-1]


def variants(rev: str | None, archs: list[str]) -> list[tuple[str, Path, str]]:
    """(label, code tree, target) of each variant: revision ``rev`` (built with -march=native) first,
    then the working tree once per target of ``archs``."""
    out = []
    if rev:
        out.append((revision.label(rev), revision.tree_for(rev), "native"))
    for arch in archs:
        out.append(("working tree" if archs == ["native"] else arch, REPO, arch))
    return out


def default_reps(scene_name: str, reps: int | None) -> int:
    return reps if reps is not None else (2 if scene_name.startswith(("photo", "ply:")) else 5)


def compare(
    variant_list: list[tuple[str, Path, str]], scenes: list[str], reps: int | None, rounds: int, threads: int
) -> None:
    """Time the native backend of every variant in alternating rounds, one table per scene; ratios are
    the first variant's time over each other variant's (speed-ups over the first)."""
    names = [name for name, _, _ in variant_list]
    base = names[0]
    print(
        f"threads={threads}, {rounds} alternating rounds per variant; medians over all rounds; "
        f"ratio = {base} / variant; stages: wall ms inside each extension call"
    )
    for scene_name in scenes:
        w, h, n, sh = scene_info(scene_name)
        runs: dict = {name: [] for name in names}
        for _ in range(rounds):
            for name, tree, arch in variant_list:
                r = measure("native", scene_name, default_reps(scene_name, reps), threads, tree, arch)
                if "error" in r:
                    raise SystemExit(f"error: {name}: {r['error']}")
                runs[name].append(r)
        rows = {"fwd (wall)": "fwd_ms", "fwd+bwd (wall)": "fwdbwd_ms"}
        med = {}
        for name, rs in runs.items():
            m = {label: statistics.median(r[key] for r in rs) for label, key in rows.items()}
            for stage in STAGES.values():
                vals = [r["stages_ms"][stage] for r in rs if stage in r.get("stages_ms", {})]
                if vals:
                    m[stage] = statistics.median(vals)
            m["raster fwd+bwd"] = m.get("raster fwd", 0.0) + m.get("raster bwd", 0.0)
            med[name] = m
        width = max(14, *(len(nm) + 2 for nm in names))
        print(f"\n{w}x{h}, {n:,} Gaussians, SH {sh}")
        print(
            f"{'ms':<18}"
            + "".join(f"{nm:>{width}}" for nm in names)
            + "".join(f"{'x ' + nm:>{width}}" for nm in names[1:])
        )
        for label in med[names[-1]]:
            if all(label in med[nm] for nm in names):
                vals = [med[nm][label] for nm in names]
                ratios = [vals[0] / v if v else float("nan") for v in vals[1:]]
                print(
                    f"{label:<18}"
                    + "".join(f"{v:{width}.2f}" for v in vals)
                    + "".join(f"{q:{width - 1}.2f}x" for q in ratios)
                )
        first = {name: rs[0] for name, rs in runs.items()}
        print(f"{'evals/px (fwd)':<18}" + "".join(f"{first[nm]['n_evals'] / (w * h):{width}.1f}" for nm in names))
        if all(first[k].get("n_pairs") for k in first):
            print(f"{'(Gauss, tile) pairs':<18}" + "".join(f"{first[nm]['n_pairs']:{width},}" for nm in names))
        isas = [first[nm].get("isa") for nm in names]
        if any(isas):
            print("builds: " + "; ".join(f"{nm}: {isa or '?'}" for nm, isa in zip(names, isas)))


def table(
    scenes: list[str], reps: int | None, ref_reps: int, large_ref_reps: int, threads: int, skip_ref: bool
) -> None:
    """Native against the torch reference, one row per scene and backend."""
    print(f"threads={threads}  (medians; fwd+bwd = forward with autograd + backward of sum(colors)+sum(alphas))")
    header = f"{'scene':<22}{'backend':<8}{'fwd ms':>10}{'fwd+bwd ms':>12}{'peak MB':>9}{'Mevals/s':>10}"
    print(header)
    print("-" * len(header))
    for scene_name in scenes:
        w, h, n, sh = scene_info(scene_name)
        label = f"{scene_name} {w}x{h} {n // 1000}k"
        results = {"native": measure("native", scene_name, default_reps(scene_name, reps), threads)}
        if not skip_ref:
            results["torch"] = measure(
                "torch", scene_name, ref_reps if scene_name == "small" else large_ref_reps, threads
            )
        for backend, r in results.items():
            if "error" in r:
                print(f"{label:<22}{backend:<8}  failed: {r['error']}")
                continue
            evals = results["native"].get("n_evals") if "error" not in results["native"] else None
            rate = f"{evals / r['fwd_ms'] / 1e3:10.1f}" if evals else f"{'':>10}"
            print(f"{label:<22}{backend:<8}{r['fwd_ms']:10.1f}{r['fwdbwd_ms']:12.1f}{r['peak_mb']:9.0f}{rate}")
        if "torch" in results and "error" not in results["torch"] and "error" not in results["native"]:
            nat, ref = results["native"], results["torch"]
            print(
                f"{'':<22}{'speed-up':<8}{ref['fwd_ms'] / nat['fwd_ms']:9.1f}x{ref['fwdbwd_ms'] / nat['fwdbwd_ms']:11.1f}x"
            )
        if "error" not in results["native"]:
            nat = results["native"]
            print(
                f"{'':<22}evals/frame={nat['n_evals']:,} ({nat['n_evals'] / (w * h):.0f}/px), "
                f"visible Gaussians={nat['visible']:,}"
            )


def main(argv: list[str] | None = None) -> int:
    ap = parser(__name__, __doc__)
    ap.add_argument(
        "--scenes",
        default="small,large",
        help="comma list of: " + ", ".join(SCENES) + ", ply:PLY@COLMAP[#I] (a trained model, benchmarks/scenes.py)",
    )
    ap.add_argument(
        "--reps",
        type=int,
        default=None,
        help="timed repetitions for the native backend (default 5, 2 on the photo scenes)",
    )
    ap.add_argument("--ref-reps", type=int, default=2, help="timed repetitions for the torch reference")
    ap.add_argument("--large-ref-reps", type=int, default=1, help="reference repetitions on 'large' (slow)")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--skip-ref", action="store_true", help="native only")
    ap.add_argument(
        "--train",
        action="store_true",
        help="also time training steps on the demo scene for both backends (python -m benchmarks train)",
    )
    ap.add_argument("--train-steps", type=int, default=30, help="timed training steps per backend with --train")
    ap.add_argument("--against", metavar="REV", help="compare the native backend with git revision REV")
    ap.add_argument(
        "--arch",
        metavar="LIST",
        help="compare builds of the working tree for these targets (POINTRIX_NATIVE_ARCH values: "
        "native, x86-64-v3, x86-64-v2, scalar, ...); with --against, REV comes first",
    )
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds per variant with --against / --arch")
    args = ap.parse_args(argv)

    scenes = args.scenes.split(",")
    problems = [p for p in map(check_scene, scenes) if p]
    if problems:
        raise SystemExit(f"error: --scenes: {'; '.join(problems)}")
    if args.against or args.arch:
        archs = [a.strip() for a in (args.arch or "native").split(",") if a.strip()]
        compare(variants(args.against, archs), scenes, args.reps, args.rounds, args.threads)
        return 0
    table(scenes, args.reps, args.ref_reps, args.large_ref_reps, args.threads, args.skip_ref)
    if args.train:
        # One implementation of "a training step" lives in the train benchmark (DefaultTrainer.train_step);
        # reuse it rather than timing a second, possibly different, loop here.
        from benchmarks import train

        print("\ntraining on the demo scene (configs/demo.yaml, fixed N, no densification):")
        backends = ["native"] if args.skip_ref else ["torch", "native"]
        train.main(["--backends", *backends, "--steps", str(args.train_steps)])
    return 0
