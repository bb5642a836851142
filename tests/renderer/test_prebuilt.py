"""The choice among a wheel's prebuilt modules (prebuilt.py), and the loader's use of them (_build.py).

The wheel itself is built, installed without a compiler and trained with in test_wheel.py; these check
the rules with manifests written here and a module file from this process's own build.
"""

from __future__ import annotations

import platform
import shutil

import pytest
import torch

from pointrix_lite.renderer.native import _build, prebuilt
from pointrix_lite.renderer.native.prebuilt import Manifest, Target
from pointrix_lite.renderer.native.wheel import requested_targets

V4 = Target("x86-64-v4", "mod_v4", ("avx2", "avx512f", "fma", "sse4_2"))
V3 = Target("x86-64-v3", "mod_v3", ("avx2", "fma", "sse4_2"))
V2 = Target("x86-64-v2", "mod_v2", ("sse4_2",))
MANIFEST = Manifest("abc12345", "2.14.1", "x86_64", (V4, V3, V2))


def test_the_highest_level_the_cpu_runs_is_chosen() -> None:
    assert prebuilt.choose(MANIFEST, frozenset({"sse4_2", "avx2", "fma", "avx512f", "x"})) == V4
    assert prebuilt.choose(MANIFEST, frozenset({"sse4_2", "avx2", "fma"})) == V3
    assert prebuilt.choose(MANIFEST, frozenset({"sse4_2", "avx2"})) == V2  # AVX2 without FMA: not v3
    assert prebuilt.choose(MANIFEST, frozenset({"sse2"})) is None
    assert prebuilt.choose(MANIFEST, frozenset()) == V2  # flags unknown: the lowest level
    assert prebuilt.choose(MANIFEST, frozenset({"sse4_2"}), arch="x86-64-v3") == V3  # asked: checked by the caller
    assert prebuilt.choose(MANIFEST, frozenset({"sse4_2"}), arch="x86-64-v1") is None


def test_a_manifest_that_does_not_fit_says_why(tmp_path) -> None:
    here = Manifest("abc12345", "2.14.1", platform.machine(), (V2,))
    assert prebuilt.unusable(here, "abc12345", "2.14.1") is None
    assert "sources changed" in prebuilt.unusable(here, "fff00000", "2.14.1")
    assert "torch 2.13.0" in prebuilt.unusable(here, "abc12345", "2.13.0")
    # the accelerator build of the same release links the same CPU libraries; another release does not
    assert prebuilt.unusable(here, "abc12345", "2.14.1+cpu") is None
    assert prebuilt.unusable(Manifest("abc12345", "2.14.1+cu130", here.machine, (V2,)), "abc12345", "2.14.1") is None
    assert "torch 2.14.10+cpu" in prebuilt.unusable(here, "abc12345", "2.14.10+cpu")
    other = Manifest("abc12345", "2.14.1", "riscv64", (V2,))
    assert "riscv64" in prebuilt.unusable(other, "abc12345", "2.14.1")
    (tmp_path / prebuilt.MANIFEST).write_text(here.to_json())
    assert prebuilt.read_manifest(tmp_path) == here  # round trip
    (tmp_path / prebuilt.MANIFEST).write_text("{")
    with pytest.raises(ValueError, match="not a prebuilt-module manifest"):
        prebuilt.read_manifest(tmp_path)
    assert prebuilt.read_manifest(tmp_path / "none") is None


def test_wheel_targets_are_ordered_highest_first_and_checked() -> None:
    if platform.machine() != "x86_64":
        pytest.skip("x86-64 targets")
    assert requested_targets("x86-64-v2,x86-64-v4,x86-64-v3") == ("x86-64-v4", "x86-64-v3", "x86-64-v2")
    assert requested_targets("all") == ("x86-64-v4", "x86-64-v3", "x86-64-v2")
    for bad in ("", "native", "x86-64-v3,;rm"):
        with pytest.raises(ValueError, match="POINTRIX_WHEEL_TARGETS"):
            requested_targets(bad)
    with pytest.raises(ValueError, match="POINTRIX_WHEEL_TARGETS: the compiler rejects -march=nonsense"):
        requested_targets("nonsense")


@pytest.fixture
def fake_wheel(tmp_path, monkeypatch):
    """A prebuilt folder holding this process's native module under a wheel target's name, and a loader
    with no module loaded yet."""
    module = _build.default_module()
    if module is None:
        pytest.skip(f"native extension unavailable: {_build.unavailable_reason()}")
    target = Target("x86-64-v2", module.__name__, ())  # no flags: runs anywhere
    shutil.copy(module.__file__, prebuilt.module_path(target, tmp_path))
    src_tag = _build._source_tag(_build.Path(_build.__file__).resolve().parent)
    manifest = Manifest(src_tag, torch.__version__, platform.machine(), (target,))
    (tmp_path / prebuilt.MANIFEST).write_text(manifest.to_json())
    monkeypatch.setattr(prebuilt, "PREBUILT_DIR", tmp_path)
    for name, value in (("_module", None), ("_tried", False), ("_error", None), ("_default", None)):
        monkeypatch.setattr(_build, name, value)
    monkeypatch.setattr(_build, "_variants", {})
    monkeypatch.setattr(_build, "_wheel_note", None)
    monkeypatch.delenv(_build.ARCH_ENV, raising=False)
    return tmp_path, manifest


def _no_compile(*args, **kwargs):
    raise AssertionError("compiled although a prebuilt module fits")


def test_an_installed_wheel_is_loaded_without_compiling(fake_wheel, monkeypatch) -> None:
    monkeypatch.setattr(_build, "_load", _no_compile)
    assert not _build.build_pending()
    module = _build.load_extension()
    assert module is not None and _build.is_prebuilt(module)
    assert _build.wheel_note() is None
    assert _build.load_variant("x86-64-v2") is not None  # the wheel's target, asked for by name
    assert _build.is_prebuilt(_build.load_variant("x86-64-v2"))


def test_of_several_targets_the_one_this_cpu_runs_is_loaded(fake_wheel, monkeypatch) -> None:
    folder, manifest = fake_wheel
    beyond = Target("x86-64-v9", "not_built", ("a_flag_no_cpu_has",))  # listed first: a higher level
    (folder / prebuilt.MANIFEST).write_text(
        Manifest(**{**manifest.__dict__, "targets": (beyond, *manifest.targets)}).to_json()
    )
    monkeypatch.setattr(_build, "_load", _no_compile)
    module = _build.load_extension()
    assert module is not None and _build.is_prebuilt(module) and module.__name__ == manifest.targets[0].module


def test_native_asked_for_by_name_is_the_source_build(fake_wheel, monkeypatch) -> None:
    calls = []
    monkeypatch.setattr(_build, "_load", lambda load, name, flags, src: calls.append(flags) or f"module {name}")
    monkeypatch.setenv(_build.ARCH_ENV, "native")
    assert _build.load_extension() == "module " + _build._module_name(_build.Path(_build.__file__).parent, 0)
    assert calls == [["-march=native"]]


def test_a_stale_wheel_is_passed_over_with_the_reason(fake_wheel, monkeypatch) -> None:
    folder, manifest = fake_wheel
    stale = Manifest("0" * 8, manifest.torch, manifest.machine, manifest.targets)
    (folder / prebuilt.MANIFEST).write_text(stale.to_json())
    monkeypatch.setattr(_build, "_load", lambda load, name, flags, src: f"module {name}")
    assert _build.load_extension().startswith("module ")
    assert _build.wheel_note() == "prebuilt modules not used: the native sources changed since they were built"
