"""Native modules shipped prebuilt in a wheel, one per target ISA, and the choice among them at import.

A wheel built with ``POINTRIX_WHEEL_TARGETS`` (setup.py, docs/native.md "Wheels") carries, beside the
sources, ``prebuilt/MODULE.so`` for each target (``x86-64-v2``, ``-v3``, ``-v4``) and
``prebuilt/manifest.json``: the sources' hash, the torch release they were compiled against, and per
target its module name and the CPU flags its code may use (read from the compiler when the wheel was
built: the machine that installs the wheel may have no compiler to ask). At import the first target,
highest level first, whose flags this CPU has is loaded; nothing is compiled.

A manifest that does not fit (sources edited since, another torch release, another machine type) is
passed over with the reason, and the source build (``_build.py``) takes over as without a wheel.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import platform
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

PREBUILT_DIR = Path(__file__).resolve().parent / "prebuilt"
MANIFEST = "manifest.json"


@dataclass(frozen=True)
class Target:
    """One prebuilt module: its ``-march`` value, module name and the CPU flags its code may use."""

    arch: str
    module: str
    flags: tuple[str, ...]


@dataclass(frozen=True)
class Manifest:
    """What ``prebuilt/manifest.json`` says; ``targets`` are ordered highest level first."""

    source_tag: str
    torch: str
    machine: str
    targets: tuple[Target, ...]

    def to_json(self) -> str:
        data = {
            "source_tag": self.source_tag,
            "torch": self.torch,
            "machine": self.machine,
            "targets": [{"arch": t.arch, "module": t.module, "flags": list(t.flags)} for t in self.targets],
        }
        return json.dumps(data, indent=2) + "\n"


def read_manifest(folder: Path | None = None) -> Manifest | None:
    """The manifest in ``folder`` (default ``PREBUILT_DIR``); None when there is none (a source checkout, a
    pure wheel).

    Raises:
        ValueError: the file exists but is not a manifest (one line naming it).
    """
    path = (folder or PREBUILT_DIR) / MANIFEST
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
        targets = tuple(Target(t["arch"], t["module"], tuple(t["flags"])) for t in data["targets"])
        return Manifest(data["source_tag"], data["torch"], data["machine"], targets)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{path}: not a prebuilt-module manifest ({type(exc).__name__}: {exc})") from None


def unusable(manifest: Manifest, source_tag: str, torch_version: str) -> str | None:
    """Why ``manifest``'s modules cannot serve these sources, this torch and this machine; None if they can."""
    if manifest.machine != platform.machine():
        return f"built for {manifest.machine}, this machine is {platform.machine()}"
    if manifest.source_tag != source_tag:
        return "the native sources changed since they were built"
    if _release(manifest.torch) != _release(torch_version):
        return f"built against torch {manifest.torch}, this is torch {torch_version}"
    return None


def _release(version: str) -> str:
    # The local label (+cpu, +cu130) names the accelerator build; the modules use only the CPU
    # libraries (c10, torch_cpu, torch_python), which one release builds alike in every variant.
    return version.split("+", 1)[0]


def choose(manifest: Manifest, cpu_flags: frozenset[str], arch: str | None = None) -> Target | None:
    """The target to load: ``arch``'s when given (None if the wheel lacks it), else the highest level
    whose flags this CPU has. An empty ``cpu_flags`` (a kernel that does not list them) gets the lowest
    level, the one least likely to stop with an illegal instruction."""
    if arch is not None:
        return next((t for t in manifest.targets if t.arch == arch), None)
    if not cpu_flags:
        return manifest.targets[-1] if manifest.targets else None
    return next((t for t in manifest.targets if set(t.flags) <= cpu_flags), None)


def module_path(target: Target, folder: Path | None = None) -> Path:
    """Where ``target``'s module file is in ``folder`` (default ``PREBUILT_DIR``; this Python's extension suffix)."""
    return (folder or PREBUILT_DIR) / (target.module + sysconfig.get_config_var("EXT_SUFFIX"))


def load(target: Target, folder: Path | None = None) -> ModuleType:
    """Import ``target``'s module from its file (torch must be imported first: the module links its libraries).

    Raises:
        ImportError: the file is missing or does not load.
    """
    path = module_path(target, folder)
    if not path.is_file():
        raise ImportError(f"{path} is missing")
    loader = importlib.machinery.ExtensionFileLoader(target.module, str(path))
    spec = importlib.util.spec_from_file_location(target.module, path, loader=loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module
