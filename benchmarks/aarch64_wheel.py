"""The aarch64 wheel run on an emulated aarch64 machine (qemu-user): it trains the tiny scene as this machine's build does.

    pip download --no-deps --only-binary=:all: --platform manylinux_2_28_aarch64 --python-version 3.11 \\
        torch==2.14.1 -d /tmp/arm                                  # PyPI's aarch64 torch (~450 MB)
    python scripts/build_wheel.py --machine aarch64 --out /tmp/arm
    sudo python -m benchmarks aarch64_wheel --wheels /tmp/arm      # root: apt-get, a private mount

What a user on an Arm server does, emulated: an aarch64 CPython 3.11 (Debian's arm64 packages, unpacked
into ``--cache``), the aarch64 torch and the project's dependencies for aarch64 (``pip install --target
--platform``), the wheel; then the tiny scene of the tests trains with no compiler on the PATH and an
empty torch extensions cache, and this machine's source build trains the same config. Printed: the
build line, whether anything compiled, the per-view PSNR of both, and the largest parameter difference.

Two stand-ins make PyPI's torch run under qemu on a machine without a GPU, neither touching what is
measured: (1) that torch is a CUDA build whose libraries need NVIDIA's (GBs); empty libraries with their
names and versioned symbols (returning an error code, never called on the CPU path) take their place;
(2) torch's CPU probe (cpuinfo) stops on the host's x86 ``/proc/cpuinfo``, so an aarch64 one is mounted
over it in a private mount namespace (``unshare -m``).
"""

from __future__ import annotations

import glob
import json
import os
import platform
import re
import shlex
import subprocess
import sys
from pathlib import Path

from benchmarks._common import REPO, parser

DEBS = (
    "python3.11-minimal libpython3.11-minimal libpython3.11-stdlib libexpat1 zlib1g libffi8 libssl3 libbz2-1.0 "
    "liblzma5 libsqlite3-0 libncursesw6 libtinfo6 libreadline8 libuuid1 libcrypt1 libgomp1 libstdc++6 libgcc-s1 "
    "libc6 libdb5.3 libnsl2 libtirpc3"
).split()
# what the tiny scene's training imports besides torch (and torch's own pure-Python dependencies)
DEPS = (
    "typing-extensions filelock sympy mpmath networkx jinja2 markupsafe fsspec numpy scipy plyfile tensorboard "
    "tensorboard-data-server absl-py grpcio markdown protobuf werkzeug packaging six lpips tqdm rich "
    "markdown-it-py mdurl pygments pyyaml imageio pillow torchvision==0.29.1 setuptools"
).split()
PLATFORMS = ("manylinux_2_35_aarch64", "manylinux_2_28_aarch64", "manylinux_2_17_aarch64", "manylinux2014_aarch64")
CPUINFO = (
    "processor\t: {i}\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp "
    "asimdhp cpuid asimdrdm lrcpc dcpop asimddp\nCPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x3\n"
    "CPU part\t: 0xd0c\nCPU revision\t: 1\n"
)


def sh(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, check=True, **kw)


def sysroot(cache: Path) -> Path:
    """Debian's arm64 CPython 3.11 and its libraries unpacked into ``cache/sysroot`` (once)."""
    root = cache / "sysroot"
    if (root / "usr/bin/python3.11").is_file():
        return root
    debs = cache / "debs"
    debs.mkdir(parents=True, exist_ok=True)
    sh(["dpkg", "--add-architecture", "arm64"])
    sh(["apt-get", "update", "-qq"])
    sh(["apt-get", "download", *(f"{d}:arm64" for d in DEBS)], cwd=debs, stdout=subprocess.DEVNULL)
    for deb in debs.glob("*.deb"):
        sh(["dpkg", "-x", str(deb), str(root)])
    return root


def site(cache: Path, wheels: Path) -> Path:
    """The aarch64 torch (from ``wheels``) and the dependencies for aarch64 in ``cache/site`` (once)."""
    target = cache / "site"
    if (target / "torch").is_dir():
        return target
    (torch_wheel,) = wheels.glob("torch-*aarch64.whl")
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--only-binary=:all:", "--target", str(target)]
    plat = [a for p in PLATFORMS for a in ("--platform", p)] + ["--python-version", "3.11", "--implementation", "cp"]
    sh([*pip, *plat, str(torch_wheel), *DEPS])
    return target


def stand_ins(cache: Path, root: Path, site_dir: Path) -> Path:
    """Empty libraries for the CUDA libraries torch names (``soname`` and symbol version alike), defining
    every symbol torch and torchvision take from them as a function that returns an error code."""
    from pointrix_lite.renderer.native.cross import dynamic_symbols

    out = cache / "cuda-stand-ins"
    out.mkdir(exist_ok=True)
    users = [Path(p) for p in glob.glob(f"{site_dir}/torch/lib/*.so*") + glob.glob(f"{site_dir}/torch/*.so")]
    users += [Path(p) for p in glob.glob(f"{site_dir}/torchvision/*.so")]
    system = [Path(p) for p in glob.glob(f"{root}/lib/aarch64-linux-gnu/*.so*") + glob.glob(f"{root}/usr/lib/*/*.so*")]
    defined, undefined, needed, versions = set(), set(), set(), {}
    for lib in users + system:
        if lib.is_symlink() or not lib.is_file():
            continue
        d, u = dynamic_symbols(lib)
        defined |= d
        if lib in users:
            undefined |= u
            text = subprocess.run(["readelf", "-d", "-V", "-W", str(lib)], capture_output=True, text=True).stdout
            needed.update(re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", text))
            for file, block in re.findall(r"File: (\S+)\s+Cnt: \d+\n((?:\s+0x\w+:\s+Name: .+\n)+)", text):
                versions.setdefault(file, set()).update(re.findall(r"Name: (\S+)", block))
    have = {p.name for p in users + system}
    missing = sorted(f for f in needed if f not in have)
    names = sorted(s for s in undefined - defined if not s.startswith(("Py", "_Py")))
    src = out / "stand_in.c"
    src.write_text(
        "".join(f'int s{i}(void) __asm__("{n}");\nint s{i}(void) {{ return 100; }}\n' for i, n in enumerate(names))
    )
    for soname in missing:
        script = out / f"{soname}.map"
        # one version node per library (what torch asks of each): every symbol in it
        version = sorted(versions.get(soname, ()))[:1]
        script.write_text("".join(f"{v} {{ global: *; }};\n" for v in version))
        link = [f"-Wl,--version-script={script}"] if version else []
        sh(
            [
                "aarch64-linux-gnu-gcc",
                "-shared",
                "-fPIC",
                str(src),
                f"-Wl,-soname,{soname}",
                *link,
                "-o",
                str(out / soname),
            ]
        )
    return out


def run_arm(cache: Path, root: Path, paths: list[Path], libs: Path, env: dict[str, str], code: str) -> str:
    """``code`` run by the aarch64 CPython under qemu-user with an aarch64 /proc/cpuinfo mounted over the host's."""
    cpuinfo = cache / "cpuinfo"
    cpuinfo.write_text("\n".join(CPUINFO.format(i=i) for i in range(os.cpu_count() or 1)))
    qemu = [
        "qemu-aarch64",
        "-L",
        str(root),
        "-E",
        f"LD_LIBRARY_PATH={libs}",
        "-E",
        f"PYTHONPATH={':'.join(map(str, paths))}",
    ]
    qemu += [a for k, v in env.items() for a in ("-E", f"{k}={v}")]
    inner = shlex.join([*qemu, str(root / "usr/bin/python3.11"), "-c", code])
    cmd = [
        "unshare",
        "-m",
        "--propagation",
        "private",
        "sh",
        "-c",
        f"mount --bind {shlex.quote(str(cpuinfo))} /proc/cpuinfo && exec {inner}",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=cache)  # not the checkout: the wheel's package
    if proc.returncode != 0:
        raise SystemExit(f"error: the aarch64 run failed ({proc.returncode}):\n{(proc.stdout + proc.stderr)[-3000:]}")
    return proc.stdout


def main(argv: list[str] | None = None) -> int:
    p = parser(__name__, __doc__)
    p.add_argument("--wheels", type=Path, required=True, help="folder with the aarch64 torch wheel and this project's")
    p.add_argument("--cache", type=Path, default=Path("/tmp/pointrix_aarch64"), help="sysroot and site (kept)")
    args = p.parse_args(argv)
    if platform.machine() == "aarch64":
        raise SystemExit("error: on an aarch64 machine, install the wheel and run the tests instead")
    sys.path.insert(0, str(REPO))
    from tests.reliability.cli_helpers import write_config
    from tests.reliability.scene import real_raw_config, write_tiny_scene

    (ours,) = args.wheels.glob("pointrix_lite-*aarch64.whl")
    cache, run = args.cache, args.cache / "run"
    root = sysroot(cache)
    site_dir = site(cache, args.wheels)
    project = cache / "project"
    sh([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--upgrade", "--target", str(project),
        *(a for pl in PLATFORMS for a in ("--platform", pl)), "--only-binary=:all:", str(ours)])  # fmt: skip
    libs = stand_ins(cache, root, site_dir)
    scene = write_tiny_scene(run / "scene")
    configs = {}
    for label in ("aarch64", "x86_64"):
        configs[label] = write_config(
            run / f"{label}.yaml", real_raw_config(run / label, scene, "native", test_at_end=True)
        )
    ext = run / "torch_extensions"
    ext.mkdir(parents=True, exist_ok=True)
    code = f"import sys; from pointrix_lite.cli.train import main; sys.exit(main(['--config', '{configs['aarch64']}', '--overwrite']))"
    env = {
        "TORCH_EXTENSIONS_DIR": str(ext),
        "PATH": "/nonexistent",
        "POINTRIX_LPIPS_DOWNLOAD": "0",
        "PYTHONUNBUFFERED": "1",
    }
    arm_out = run_arm(cache, root, [project, site_dir], libs, env, code)
    host_env = {**os.environ, "POINTRIX_LPIPS_DOWNLOAD": "0"}
    host = [sys.executable, str(REPO / "scripts/train.py"), "--config", str(configs["x86_64"]), "--overwrite"]
    host_out = subprocess.run(host, capture_output=True, text=True, check=True, env=host_env).stdout

    import torch

    metrics, params = {}, {}
    for label in configs:
        exp = run / label / "tiny"
        metrics[label] = json.loads((exp / "metrics.json").read_text())
        (ckpt,) = sorted((exp / "checkpoints").glob("step_*.pth"))[-1:]
        params[label] = torch.load(ckpt, weights_only=False)["model"]
    diff = max((params["aarch64"][k] - v).abs().max().item() for k, v in params["x86_64"].items() if torch.is_tensor(v))
    build_line = next((ln for ln in arm_out.splitlines() if ln.startswith("native rasterizer:")), "(none)")
    print(f"aarch64 (qemu): {build_line}; compiled: {'yes' if any(ext.iterdir()) else 'nothing'}")
    print(
        f"x86_64 (here):  {next((ln for ln in host_out.splitlines() if ln.startswith('native rasterizer:')), '(none)')}"
    )
    for view in metrics["x86_64"]["per_view"]:
        a, b = (metrics[k]["per_view"][view]["psnr"] for k in ("aarch64", "x86_64"))
        print(f"  {view}: PSNR aarch64 {a:.5f} dB, x86_64 {b:.5f} dB")
    counts = {k: m["num_gaussians"] for k, m in metrics.items()}
    print(f"Gaussians {counts['aarch64']} / {counts['x86_64']}; largest parameter difference {diff:.2e}")
    return 0
