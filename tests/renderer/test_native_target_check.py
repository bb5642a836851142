"""Issue 47: an explicit native target is checked against the CPU before it is built or loaded, a
failed build is remembered, and a run that asked for the extension never falls back silently."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pointrix_lite.errors import ConfigError
from pointrix_lite.renderer import native
from pointrix_lite.renderer.native import _build, cpu_check

needs_compiler = pytest.mark.skipif(shutil.which(cpu_check.compiler()) is None, reason="no C++ compiler")
AVX2_ONLY = frozenset("fpu sse sse2 pni ssse3 sse4_1 sse4_2 popcnt avx avx2 fma f16c bmi1 bmi2 abm movbe".split())


@needs_compiler
def test_target_flags_come_from_the_compilers_macros() -> None:
    v3 = cpu_check.target_flags("x86-64-v3") if "x86" in _machine() else ()
    if v3:
        assert {"avx", "avx2", "fma", "bmi2", "sse4_2"} <= set(v3) and not any(f.startswith("avx512") for f in v3)
        assert {"avx512f", "avx512bw", "avx512vl"} <= set(cpu_check.target_flags("x86-64-v4"))
    assert cpu_check.target_flags("scalar") == ()
    with pytest.raises(
        ValueError, match=r"^POINTRIX_NATIVE_ARCH=no-such-cpu: the compiler rejects -march=no-such-cpu: "
    ):
        cpu_check.target_flags("no-such-cpu")


@needs_compiler
def test_a_target_the_cpu_lacks_is_refused_naming_the_flags(monkeypatch) -> None:
    if "x86" not in _machine():
        pytest.skip("x86 targets")
    monkeypatch.setattr(cpu_check, "cpu_flags", lambda: AVX2_ONLY)  # an AVX2-only node
    assert cpu_check.check_target("x86-64-v3")  # it has everything v3 may use
    with pytest.raises(ValueError) as err:
        cpu_check.check_target("sapphirerapids")  # AMX and AVX512-FP16
    message = str(err.value)
    assert message.startswith("POINTRIX_NATIVE_ARCH=sapphirerapids: this CPU lacks ") and "\n" not in message
    assert "amx_tile" in message and "avx512_fp16" in message and "avx2," not in message
    assert isinstance(_build._build_variant("sapphirerapids"), str)  # refused before any compile or load
    monkeypatch.setattr(cpu_check, "cpu_flags", lambda: frozenset())  # a kernel that lists no flags: not checked
    assert cpu_check.check_target("x86-64-v4")


def test_the_module_name_keys_the_flags_a_target_needs(tmp_path) -> None:
    plain = _build.arch_module_name(_build_dir(), "x86-64-v3")
    keyed = _build.arch_module_name(_build_dir(), "x86-64-v3", ("avx", "avx2"))
    assert keyed.startswith(plain + "_") and keyed != _build.arch_module_name(_build_dir(), "x86-64-v3", ("avx",))


def test_a_failed_build_is_remembered_until_the_compiler_changes(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))
    monkeypatch.setattr(cpu_check, "check_target", lambda arch: ("avx",))
    compiles: list[str] = []

    def failing_load(load, name, flags, src_dir):
        compiles.append(name)
        raise RuntimeError("Error building extension\ncc1plus: error: something broke")

    monkeypatch.setattr(_build, "_load", failing_load)
    version = ["g++ 12.2"]
    monkeypatch.setattr(_build, "_compiler_version", lambda: version[0])
    first = _build._build_variant("x86-64-v3")
    assert first.startswith(
        "POINTRIX_NATIVE_ARCH=x86-64-v3: could not build the native rasterizer: RuntimeError: cc1plus"
    )
    again = _build._build_variant("x86-64-v3")  # a later run: no compile, the same reason, and how to retry
    assert len(compiles) == 1 and again.startswith(first) and "remembered from an earlier run" in again
    version[0] = "g++ 13.1"  # a new compiler: tried again
    _build._build_variant("x86-64-v3")
    assert len(compiles) == 2


def test_asking_for_the_extension_is_an_error_and_auto_says_why_it_falls_back(monkeypatch) -> None:
    import importlib

    from pointrix_lite.renderer.renderer import GaussianRenderer

    entry = importlib.import_module("pointrix_lite.renderer.rasterization")  # the module, not the function

    monkeypatch.setattr(native, "is_available", lambda: False)
    monkeypatch.setattr(native, "unavailable_reason", lambda: "could not build the native rasterizer: no c++")
    monkeypatch.setattr(native, "prepare", lambda announce: False)
    monkeypatch.delenv(_build.ARCH_ENV, raising=False)
    with pytest.raises(
        ConfigError, match=r"^renderer.backend: native, but the native rasterizer is unavailable \(could not"
    ):
        GaussianRenderer(GaussianRenderer.Config(backend="native")).prepare("cpu", announce=print)
    monkeypatch.setenv(_build.ARCH_ENV, "x86-64-v4")  # a target was asked for: no fallback under auto either
    with pytest.raises(ConfigError):
        GaussianRenderer(GaussianRenderer.Config(backend="auto")).prepare("cpu", announce=print)
    monkeypatch.delenv(_build.ARCH_ENV)
    monkeypatch.setattr(entry, "_warned_torch_fallback", False)
    lines: list[str] = []
    GaussianRenderer(GaussianRenderer.Config(backend="auto")).prepare("cpu", announce=lines.append)
    assert lines == [native.FALLBACK_LINE] and "30-80x slower" in lines[0] and "apt-get install g++" in lines[0]
    assert entry._warned_torch_fallback  # said once, in the run's own words: no warning on top


def _machine() -> str:
    import platform

    return platform.machine().replace("_", "-").replace("AMD64", "x86-64").lower()


def _build_dir():
    from pathlib import Path

    return Path(_build.__file__).resolve().parent


def test_a_remembered_failure_names_the_compilers_error_and_does_not_announce_a_build(monkeypatch, tmp_path) -> None:
    """torch's build error ends with ninja's summary; the line kept is the compiler's first error, and a run
    that will not try again (the failure is remembered) does not say "building ... (first run only)"."""
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))
    monkeypatch.setattr(cpu_check, "check_target", lambda arch: ("avx",))
    monkeypatch.setattr(_build, "_compiler_version", lambda: "g++ 12.2")
    log = (
        "Error building extension 'x':\n[1/3] c++ -MMD -c rasterize.cpp\nFAILED: rasterize.o\n"
        "rasterize.cpp:12:5: error: 'foo' was not declared in this scope\n   12 |     foo();\n"
        "rasterize.cpp:20:1: error: expected ';'\nninja: build stopped: subcommand failed.\n"
    )

    def failing_load(load, name, flags, src_dir):
        raise RuntimeError(log)

    monkeypatch.setattr(_build, "_load", failing_load)
    reason = _build._build_variant("x86-64-v3")
    assert reason.endswith("RuntimeError: rasterize.cpp:12:5: error: 'foo' was not declared in this scope")
    assert "ninja" not in reason
    monkeypatch.setenv(_build.ARCH_ENV, "x86-64-v3")
    monkeypatch.setattr(cpu_check, "target_flags", lambda arch: ("avx",))  # the flags the build above was keyed by
    monkeypatch.setattr(_build, "_tried", False)
    assert _build.build_pending() is False  # remembered: nothing will compile, so nothing to announce
    for f in tmp_path.rglob("build_failed.txt"):
        f.unlink()
    assert _build.build_pending() is True  # forgotten: the next run builds, and says so first


FAKE_CXX = """#!/bin/sh
# A toolchain that fails every compile the way a broken install does; anything else (--version, -v) is the
# real compiler's, so torch's checks and the remembered compiler line are as usual.
for a in "$@"; do
  if [ "$a" = "-c" ]; then
    echo "In file included from bindings.cpp:1:" >&2
    echo "common.h:3:10: fatal error: torch/extension.h: No such file or directory" >&2
    echo "compilation terminated." >&2
    exit 1
  fi
done
exec {real} "$@"
"""


@needs_compiler
@pytest.mark.skipif(shutil.which("ninja") is None, reason="torch builds extensions with ninja")
def test_a_real_failed_build_keeps_the_compilers_line_and_a_rerun_says_it_is_remembered(tmp_path) -> None:
    """A real build through torch and ninja, with a compiler that fails in a second: the line kept is the
    compiler's (ninja ends its log with "build stopped: subcommand failed"), and the next run does not say
    "building ... (first run only)" but that the failure is remembered, and how to retry."""
    fake = tmp_path / "bin" / "c++"
    fake.parent.mkdir()
    fake.write_text(FAKE_CXX.format(real=shutil.which(cpu_check.compiler())))
    fake.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in (_build.ARCH_ENV, "POINTRIX_NATIVE_DISABLE")}
    env.update(CXX=str(fake), TORCH_EXTENSIONS_DIR=str(tmp_path / "ext"), POINTRIX_NATIVE_VERBOSE="0")
    code = "from pointrix_lite.renderer import native; native.prepare()"
    repo = Path(__file__).resolve().parents[2]

    def run() -> list[str]:
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=repo)
        assert proc.returncode == 0, proc.stderr[-2000:]
        return proc.stdout.splitlines()

    error = "common.h:3:10: fatal error: torch/extension.h: No such file or directory"
    first = run()
    assert first == [
        native.BUILD_MESSAGE,
        f"native rasterizer: unavailable (could not build the native rasterizer: RuntimeError: {error})",
    ]  # three attempts, one line: they failed alike
    (remembered,) = (tmp_path / "ext").rglob("build_failed.txt")
    assert remembered.read_text().splitlines()[1:] == [first[1].removeprefix("native rasterizer: unavailable (")[:-1]]
    again = run()
    assert again == [
        f"native rasterizer: unavailable (could not build the native rasterizer: RuntimeError: {error} "
        f"(remembered from an earlier run with this compiler; delete {remembered} to retry))"
    ]
    assert not any("ninja" in line or "building" in line for line in first[1:] + again)
