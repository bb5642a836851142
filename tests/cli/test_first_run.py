"""A newcomer's first run explains itself: demo generation says so, the summary says what to run next."""

from __future__ import annotations

import importlib
import shlex
import sys
import types
from pathlib import Path

import pytest
import tomllib
import yaml

from pointrix_lite.cli.train import main
from pointrix_lite.data.base import require_dir
from pointrix_lite.data.demo import make
from tests.engine.engine_helpers import TOY_PLUGIN, toy_raw_config

REPO = Path(__file__).resolve().parents[2]


def test_demo_generation_prints_one_line_saying_where(tmp_path, monkeypatch, capsys):
    written = []

    def fake_generate(out: Path) -> None:  # the real scene takes seconds; its content is tested in tests/data
        written.append(out)
        for layout in make.LAYOUTS:
            (out / layout).mkdir(parents=True)

    monkeypatch.setattr(make, "generate_demo", fake_generate)
    demo = tmp_path / "data" / "demo"
    assert require_dir(demo / "nerf_synthetic") == demo / "nerf_synthetic"
    assert (
        capsys.readouterr().out == f"generating the demo scene in {demo.resolve()} (only once: later runs reuse it)\n"
    )
    assert len(written) == 1
    require_dir(demo / "colmap")  # already there: silent
    assert capsys.readouterr().out == "" and len(written) == 1


def _train(tmp_path: Path, capsys, argv: list[str]) -> str:
    assert main(argv) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("viewer", [False, True])
def test_summary_prints_view_and_resume_commands_that_work(viewer, tmp_path, capsys, monkeypatch):
    # The viewer is another package's: stand in for "installed" / "not installed" either way.
    monkeypatch.setitem(
        sys.modules, "pointrix_lite.viewer", types.ModuleType("pointrix_lite.viewer") if viewer else None
    )
    raw = toy_raw_config(tmp_path)
    raw["trainer"] = {"max_steps": 8, "val_interval": 0}
    config = tmp_path / "scene.yaml"
    config.write_text(yaml.safe_dump(raw))
    out = _train(tmp_path, capsys, ["--config", str(config), "--plugin", str(TOY_PLUGIN)])
    exp = tmp_path / "outputs" / "toy"
    nxt = out[out.index("\nnext:\n") + 1 :].splitlines()
    expected = ["next:"]
    if viewer:
        expected.append(f"  view         python scripts/view.py --exp-dir {exp}")
    resume = (
        f"python scripts/train.py --config {exp / 'config.yaml'} --resume trainer.max_steps=16 --plugin {TOY_PLUGIN}"
    )
    expected.append(f"  train longer {resume}")
    assert nxt == expected
    if viewer:
        return
    # The printed command runs as printed and continues from step 8 to 16.
    argv = shlex.split(resume)
    assert argv[:2] == ["python", "scripts/train.py"]
    out = _train(tmp_path, capsys, argv[2:])
    assert "done: 16 steps" in out
    assert (exp / "checkpoints" / "step_000016.pth").is_file()
    assert (exp / "checkpoints" / "latest.txt").read_text().strip().endswith("step_000016.pth")


def test_console_entry_points_are_callable_commands(capsys, monkeypatch):
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert {"pointrix-train", "pointrix-render"} <= set(scripts)
    for name, target in scripts.items():
        module, _, attr = target.partition(":")
        fn = getattr(importlib.import_module(module), attr)
        assert callable(fn), name
        monkeypatch.setattr(sys, "argv", [name, "--help"])
        with pytest.raises(SystemExit) as info:  # what the installed `pointrix-xxx --help` does: fn()
            fn()
        assert info.value.code == 0, name
        assert capsys.readouterr().out.startswith("usage:"), name
