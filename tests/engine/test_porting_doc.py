"""Every code block of docs/porting.md runs, and does what the page says.

"Before" blocks keep their ``pointrix`` / ``mmengine`` imports; a stand-in for those packages maps
their base classes and registry decorators onto pointrix_lite's (the first edit of a port), so the
blocks run unchanged and must end the way the page says (refused, or which methods no longer fit).
"""

from __future__ import annotations

import csv
import inspect
import json
import re
import sys
import types
from pathlib import Path

import pytest
import yaml

from pointrix_lite.cli.plugins import load_plugin
from pointrix_lite.cli.train import main
from pointrix_lite.components import import_all
from pointrix_lite.engine.experiment import load_experiment
from pointrix_lite.engine.hooks import Hook, build_hooks, format_hook_table
from pointrix_lite.errors import ConfigError
from pointrix_lite.registry import HOOKS, WRITERS
from pointrix_lite.writers import Writer
from tests.engine.engine_helpers import TOY_PLUGIN, toy_raw_config

import_all()  # the configs on the page name the built-in model, renderer and datasets
DOC_PATH = Path(__file__).resolve().parents[2] / "docs" / "porting.md"
DOC = DOC_PATH.read_text()
EXAMPLE = re.compile(r"<!-- example: ([\w-]+) -->\n```(\w+)\n(.*?)```", re.S)


def examples() -> dict[str, str]:
    found: dict[str, str] = {}
    for name, _, code in EXAMPLE.findall(DOC):
        assert name not in found, f"two examples named {name}"
        found[name] = code
    return found


EX = examples()


def _module(monkeypatch, name: str, **attrs) -> None:
    module = types.ModuleType(name)
    module.__dict__.update(attrs)
    monkeypatch.setitem(sys.modules, name, module)


@pytest.fixture
def port(monkeypatch, tmp_path):
    """Scratch registries, the pointrix / mmengine stand-ins, and helpers to run doc blocks."""
    for registry in (HOOKS, WRITERS):  # what a test registers is gone after it
        monkeypatch.setattr(
            registry, "_table", {k: v for k, v in registry._table.items() if k not in ("PointCountHook", "CsvWriter")}
        )
    mm_hooks = types.SimpleNamespace(register_module=HOOKS.register, build=HOOKS.build, get=HOOKS.get)
    for name, attrs in {
        "pointrix": {},
        "pointrix.hook": {"Hook": Hook, "HOOK_REGISTRY": HOOKS},
        "pointrix.logger": {},
        "pointrix.logger.writer": {"Writer": Writer, "LOGGER_REGISTRY": WRITERS},
        "mmengine": {},
        "mmengine.hooks": {"Hook": Hook},
        "mmengine.registry": {"HOOKS": mm_hooks},
    }.items():
        _module(monkeypatch, name, **attrs)

    class Port:
        def plugin(self, example: str, filename: str) -> Path:
            path = tmp_path / filename
            path.write_text(EX[example])
            return path

        def load(self, example: str, filename: str) -> types.ModuleType:
            return load_plugin(self.plugin(example, filename))

        def yaml(self, example: str) -> dict:
            return yaml.safe_load(EX[example])

        def toy(self, **extra) -> dict:
            raw = toy_raw_config(tmp_path)
            raw.update(extra)
            return raw

        def train(self, argv_config: dict, *plugins: Path) -> tuple[int, str]:
            config = tmp_path / "scene.yaml"
            config.write_text(yaml.safe_dump(argv_config))
            argv = ["--config", str(config), "--plugin", str(TOY_PLUGIN)]
            for p in plugins:
                argv += ["--plugin", str(p)]
            return main(argv), config

    return Port()


# --- hook sites ----------------------------------------------------------------------------------
def _where(example: str, has: str) -> str:
    """``(self, trainner) (point_count.py:6)``: the signature and the line of its def in the block."""
    lines = EX[example].splitlines()
    line = next(i for i, x in enumerate(lines, 1) if "def after_train_iter" in x)
    return f"{has} (point_count.py:{line})"


POINTRIX_HAS = "(self, trainner)"


def _refused(port, capsys, tmp_path, example: str, has: str) -> None:
    plugin = port.plugin(example, "point_count.py")
    rc, _ = port.train(port.toy(hooks={"PointCountHook": {}}), plugin)
    err = capsys.readouterr().err
    documented = EX["hook-error"].strip()
    pointrix_where = _where("pointrix-hook", POINTRIX_HAS)
    assert pointrix_where in documented  # the page shows the Pointrix hook's error, line number included
    assert rc == 2 and err == documented.replace(pointrix_where, _where(example, has)) + "\n"
    assert not (tmp_path / "outputs").exists()  # refused before the trainer was built: no step ran


def check_pointrix_hook(port, capsys, tmp_path):
    _refused(port, capsys, tmp_path, "pointrix-hook", POINTRIX_HAS)


def check_mmengine_hook(port, capsys, tmp_path):
    _refused(port, capsys, tmp_path, "mmengine-hook", "(self, runner, batch_idx, data_batch=None, outputs=None)")


def _scalars(path: Path, name: str) -> list[tuple[int, float]]:
    records = [json.loads(line) for line in path.read_text().splitlines()]
    return [(r["step"], r["value"]) for r in records if r.get("kind") == "scalar" and r["name"] == name]


def check_ported_hook(port, capsys, tmp_path):
    plugin = port.plugin("ported-hook", "point_count.py")
    raw = port.toy(
        hooks={"PointCountHook": {"interval": 4}}, trainer={"max_steps": 8, "val_interval": 0, "test_at_end": False}
    )
    rc, _ = port.train(raw, plugin)
    assert rc == 0, capsys.readouterr().err
    assert _scalars(tmp_path / "outputs" / "toy" / "log.jsonl", "num_pt") == [(4, 64.0), (8, 64.0)]
    assert HOOKS.get("PointCountHook").priority == "LOW"


# --- config keys ---------------------------------------------------------------------------------
def _load_yaml(tmp_path: Path, text: str):
    path = tmp_path / "ported.yaml"
    path.write_text(text)
    return load_experiment(path)


def check_pointrix_config(port, capsys, tmp_path):
    with pytest.raises(ConfigError) as info:
        _load_yaml(tmp_path, EX["pointrix-config"])
    assert f"`{info.value}`" in DOC
    hooks = port.yaml("pointrix-config")["trainer"]["hooks"]
    with pytest.raises(ConfigError) as info:
        load_experiment(None, data=port.toy(hooks=hooks))
    assert str(info.value).startswith("hooks.LogHook.name: ")
    assert f"``{str(info.value).split(' (see ')[0]}``" in DOC


def check_mmengine_config(port, capsys, tmp_path):
    ns: dict = {}
    exec(EX["mmengine-config"], ns)
    with pytest.raises(ConfigError) as info:
        load_experiment(None, data=port.toy(hooks=ns["default_hooks"]))
    assert f"`{str(info.value).split(' registered: ')[0]} registered: <names>`" in DOC
    port.load("ported-hook", "point_count.py")  # custom_hooks entries are valid list-form entries as they are
    cfg = load_experiment(None, data=port.toy(hooks=ns["custom_hooks"]))
    entry = next(h for h in cfg.hooks if h["type"] == "PointCountHook")
    assert entry == {"type": "PointCountHook", "priority": "ABOVE_NORMAL", "enabled": True, "interval": 100}


def check_pointrix_config_ported(port, capsys, tmp_path):
    cfg = _load_yaml(tmp_path, EX["pointrix-config-ported"])
    before = port.yaml("pointrix-config")["trainer"]
    assert cfg.exp_dir == before["output_path"] and cfg.trainer.max_steps == before["max_steps"]
    assert cfg.trainer.val_interval == before["val_interval"]
    assert (
        cfg.dataset["type"] == before["datapipeline"]["data_set"]
        and cfg.dataset["data_path"] == before["datapipeline"]["data_path"]
    )
    assert [w["type"] for w in cfg.writers] == [before["writer"]["writer_type"]]
    as_list = yaml.safe_load(EX["pointrix-config-ported"])
    as_list["hooks"] = [{"type": "LogHook"}, {"type": "CheckPointHook"}]
    assert load_experiment(None, data=as_list) == cfg
    assert {h["type"] for h in cfg.hooks if h["enabled"]} >= set(before["hooks"])


def check_mmengine_config_ported(port, capsys, tmp_path):
    port.load("ported-hook", "point_count.py")
    cfg = _load_yaml(tmp_path, EX["mmengine-config-ported"])
    ns: dict = {}
    exec(EX["mmengine-config"], ns)
    assert cfg.exp_dir == ns["work_dir"] and cfg.seed == ns["randomness"]["seed"]
    assert (cfg.trainer.max_steps, cfg.trainer.val_interval) == (
        ns["train_cfg"]["max_iters"],
        ns["train_cfg"]["val_interval"],
    )
    hooks = {h["type"]: h for h in cfg.hooks}
    mm = ns["default_hooks"]
    assert hooks["LogHook"]["interval"] == mm["logger"]["interval"]
    ckpt = hooks["CheckPointHook"]
    assert (ckpt["interval"], ckpt["max_keep"]) == (mm["checkpoint"]["interval"], mm["checkpoint"]["max_keep_ckpts"])
    assert (ckpt["best_metric"], ckpt["best_mode"]) == (mm["checkpoint"]["save_best"], "max")
    custom = {k: v for k, v in ns["custom_hooks"][0].items()}
    assert {k: hooks["PointCountHook"][k] for k in custom} == custom


# --- priorities ----------------------------------------------------------------------------------
def check_priorities(port, capsys, tmp_path):
    port.load("ported-hook", "point_count.py")
    cfg = load_experiment(None, data=port.toy(**port.yaml("priority-ported")))
    table = format_hook_table(build_hooks(cfg.hooks))
    section = re.search(r"^after_train_iter:\n(.*?)\n-{40}", table, re.S | re.M).group(0).rsplit("\n", 1)[0]
    assert section == EX["priority-table"].strip()
    ns: dict = {}
    exec(EX["mmengine-priority"], ns)
    assert load_experiment(None, data=port.toy(hooks=ns["custom_hooks"])).hooks == cfg.hooks


# --- writers -------------------------------------------------------------------------------------
def check_pointrix_writer(port, capsys, tmp_path):
    cls = port.load("pointrix-writer", "csv_writer.py").CsvWriter

    def fits(method: str, *args, **kwargs) -> bool:
        try:
            inspect.signature(getattr(cls, method)).bind(object(), *args, **kwargs)
        except TypeError:
            return False
        return True

    # What the page says: __init__ and write_config no longer fit, write_scalar does; finish is never called.
    assert not fits("__init__", exp_dir=tmp_path)
    assert not fits("write_config", {"name": "x"})
    assert fits("write_scalar", "train/loss", 0.5, 3)
    assert not hasattr(Writer, "finish") and "finish" not in inspect.getsource(
        sys.modules["pointrix_lite.writers.base"]
    )


def check_ported_writer(port, capsys, tmp_path):
    hook = port.plugin("ported-hook", "point_count.py")
    writer = port.plugin("ported-writer", "csv_writer.py")
    raw = port.toy(
        hooks={"PointCountHook": {"interval": 4}, "LogHook": {"interval": 4}},
        trainer={"max_steps": 8, "val_interval": 0, "test_at_end": False},
        **port.yaml("ported-writer-config"),
    )
    rc, _ = port.train(raw, hook, writer)
    assert rc == 0, capsys.readouterr().err
    rows = list(csv.reader((tmp_path / "outputs" / "toy" / "scalars.csv").open()))
    assert [r for r in rows if r[1] == "num_pt"] == [["4", "num_pt", "64.0"], ["8", "num_pt", "64.0"]]
    assert [r[0] for r in rows if r[1] == "train/loss"] == ["4", "8"], rows  # LogHook's records reach it too


# --- registry ------------------------------------------------------------------------------------
def check_mmengine_registry(port, capsys, tmp_path):
    ns: dict = {}
    exec(EX["mmengine-registry"], ns)
    assert type(ns["hook"]).__name__ == "LogHook" and ns["hook"].config.interval == 10


def check_ported_registry(port, capsys, tmp_path):
    exec(EX["ported-registry"], {})


CHECKS = {
    "pointrix-hook": check_pointrix_hook,
    "mmengine-hook": check_mmengine_hook,
    "hook-error": check_pointrix_hook,
    "ported-hook": check_ported_hook,
    "pointrix-config": check_pointrix_config,
    "mmengine-config": check_mmengine_config,
    "pointrix-config-ported": check_pointrix_config_ported,
    "mmengine-config-ported": check_mmengine_config_ported,
    "mmengine-priority": check_priorities,
    "priority-ported": check_priorities,
    "priority-table": check_priorities,
    "pointrix-writer": check_pointrix_writer,
    "ported-writer": check_ported_writer,
    "ported-writer-config": check_ported_writer,
    "mmengine-registry": check_mmengine_registry,
    "ported-registry": check_ported_registry,
}


def test_every_code_block_is_a_checked_example():
    fences = re.findall(r"^```\w+$", DOC, re.M)
    assert len(fences) == len(EX), "a code block without <!-- example: NAME --> is not run by this test"
    assert set(EX) == set(CHECKS)


@pytest.mark.parametrize("check", sorted(set(CHECKS.values()), key=lambda f: f.__name__), ids=lambda f: f.__name__[6:])
def test_example(check, port, capsys, tmp_path):
    check(port, capsys, tmp_path)
