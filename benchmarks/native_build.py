"""The native rasterizer's first (cold-cache) build: its wall time and each translation unit's.

    python -m benchmarks native_build                       # this tree
    python -m benchmarks native_build --against main        # ... and REV's (or a folder's), side by side
    python -m benchmarks native_build --arch x86-64-v3      # the build of one target (POINTRIX_NATIVE_ARCH)

A cold build is what README command 1 waits for on a fresh machine: ``load_extension()`` in a fresh
process with an empty ``TORCH_EXTENSIONS_DIR`` (torch's ninja build, every core). Then each source
file is compiled alone, one at a time, with the flags that build used (read from its ``build.ninja``),
so the table says which file bounds the build: with as many cores as files, the slowest one does.
The trees are built alternately, ``--repeat`` times each (the best wall time is reported).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks._common import REPO, code_tree, cpu_name, load_average, parser

RECORDS_ITSELF = True  # one row per tree (docs/results.md), not the closing lines

PROBE = (
    "import sys, time; sys.path.insert(0, sys.argv[1]); t = time.perf_counter()\n"
    "from pointrix_lite.renderer.native import _build\n"
    "m = _build.load_extension()\n"
    "print('built' if m is not None else 'failed: ' + str(_build.unavailable_reason()), time.perf_counter() - t)\n"
)


def cold_build(tree: Path, arch: str | None) -> tuple[float, Path]:
    """Seconds of ``tree``'s build for ``arch`` (None: -march=native) into an empty cache, and that build's folder."""
    cache = Path(tempfile.mkdtemp(prefix="pointrix_native_build_"))
    env = {**os.environ, "TORCH_EXTENSIONS_DIR": str(cache)}
    env.pop("POINTRIX_NATIVE_ARCH", None)
    if arch:
        env["POINTRIX_NATIVE_ARCH"] = arch
    out = subprocess.run([sys.executable, "-c", PROBE, str(tree)], capture_output=True, text=True, env=env)
    status, _, seconds = (out.stdout.strip().splitlines() or ["failed: no output"])[-1].rpartition(" ")
    if out.returncode != 0 or status != "built":
        raise SystemExit(f"error: the native build of {tree} failed: {status or out.stderr.strip()[-300:]}")
    (ninja,) = cache.glob("*/build.ninja")
    return float(seconds), ninja.parent


def per_file(build_dir: Path, tree: Path) -> dict[str, float]:
    """Each source file of the build in ``build_dir`` compiled alone with its flags: name -> seconds."""
    text = (build_dir / "build.ninja").read_text()
    cxx = re.search(r"^cxx = (.*)$", text, re.M).group(1)
    cflags = shlex.split(re.search(r"^cflags = (.*)$", text, re.M).group(1))
    sources = re.findall(r"^build \S+\.o: compile (\S+)$", text, re.M)
    times = {}
    for src in sources:
        start = time.perf_counter()
        subprocess.run([cxx, *cflags, "-c", src, "-o", os.devnull], check=True, cwd=tree)
        times[Path(src).name] = time.perf_counter() - start
    return times


def main(argv: list[str] | None = None) -> int:
    p = parser(__name__, __doc__)
    p.add_argument("--against", metavar="REV|TREE", help="also build this code (a git revision or a folder)")
    p.add_argument("--repeat", type=int, default=1, help="cold builds per tree (best reported)")
    p.add_argument("--arch", help="build this target (POINTRIX_NATIVE_ARCH: x86-64-v3, scalar, ...), not -march=native")
    p.add_argument("--record", action="store_true", help="store the figures (docs/results.md)")
    args = p.parse_args(argv)
    trees = [("working tree", REPO)]
    other = code_tree(args.against)
    if other:
        trees.append(other)
    walls: dict[str, list[float]] = {label: [] for label, _ in trees}
    files: dict[str, dict[str, float]] = {}
    for _ in range(args.repeat):
        for label, tree in trees:
            seconds, build_dir = cold_build(tree, args.arch)
            walls[label].append(seconds)
            print(f"{label}: cold build {seconds:.1f} s (load {load_average()})", flush=True)
            if label not in files:
                files[label] = per_file(build_dir, tree)
    target = args.arch or "native"
    print(f"\nCPU: {cpu_name()}, {os.cpu_count()} cores; target {target}; each file compiled alone, seconds")
    names = sorted({n for t in files.values() for n in t}, key=lambda n: -max(t.get(n, 0) for t in files.values()))
    print(f"{'file':<20}" + "".join(f"{label[:22]:>24}" for label, _ in trees))
    for n in names:
        print(f"{n:<20}" + "".join(f"{files[label].get(n, float('nan')):>24.1f}" for label, _ in trees))
    print(f"{'sum of files':<20}" + "".join(f"{sum(files[label].values()):>24.1f}" for label, _ in trees))
    best = {label: min(w) for label, w in walls.items()}
    line = f"cold build (best of {args.repeat}): " + ", ".join(f"{label} {s:.1f} s" for label, s in best.items())
    if other:
        line += f"; {best[trees[1][0]] / best['working tree']:.2f}x faster"
    print(line)
    if args.record:
        argv = [a for a in (argv if argv is not None else sys.argv[1:]) if a != "--record"]
        _record(trees, target, best, files, argv)
    return 0


def _record(
    trees: list, target: str, best: dict[str, float], files: dict[str, dict[str, float]], argv: list[str]
) -> None:
    from benchmarks.results import Table, record

    table = Table(
        "native_build",
        "Native rasterizer: first build",
        "A cold-cache `load_extension()` (torch's ninja build, every core) and `bindings.cpp`, the file that "
        "bounds it, compiled alone; another tree built alternately in the same run.",
        ("tree", "target", "cold build s", "bindings.cpp s", "sum of files s", "cores"),
        order=45,
    )
    command = ["python", "-m", "benchmarks", "native_build", *argv]
    for label, _ in trees:
        cells = {
            "tree": label,
            "target": target,
            "cold build s": round(best[label], 1),
            "bindings.cpp s": round(files[label].get("bindings.cpp", float("nan")), 1),
            "sum of files s": round(sum(files[label].values()), 1),
            "cores": os.cpu_count(),
        }
        mine = label == "working tree"
        key = f"{target} {'this tree' if mine else 'against'}"
        path = record(table, key, cells, command, at=None if mine else label)
    print(f"recorded in {path.relative_to(REPO)}; python -m benchmarks results rewrites docs/results.md")


if __name__ == "__main__":
    raise SystemExit(main())
