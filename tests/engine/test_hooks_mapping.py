"""`hooks:` as a mapping (Pointrix / MMEngine default_hooks style) resolves and builds like the list form."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pointrix_lite.cli.train import main
from pointrix_lite.components import import_all
from pointrix_lite.engine.experiment import dump_config, load_experiment, save_config
from pointrix_lite.engine.hooks import build_hooks
from pointrix_lite.errors import ConfigError
from tests.engine.engine_helpers import TOY_PLUGIN, toy_raw_config

import_all()  # the configs name PlyExportHook, which export/ registers (the file also runs alone)

LIST_FORM = [
    {"type": "LogHook", "interval": 50},
    {"type": "CheckPointHook", "max_keep": 2},
    {"type": "PlyExportHook", "every": 10, "priority": "LOW"},
]
MAPPING_FORMS = {
    # Pointrix: the key is the hook type.
    "type keys": {
        "LogHook": {"interval": 50},
        "CheckPointHook": {"max_keep": 2},
        "PlyExportHook": {"every": 10, "priority": "LOW"},
    },
    # MMEngine default_hooks: the key is a label, `type` inside.
    "label keys": {
        "logger": {"type": "LogHook", "interval": 50},
        "checkpoint": {"type": "CheckPointHook", "max_keep": 2},
        "export": {"type": "PlyExportHook", "every": 10, "priority": "LOW"},
    },
}


def _load(tmp_path: Path, hooks, overrides: list[str] = ()):
    raw = toy_raw_config(tmp_path)
    raw["hooks"] = hooks
    return load_experiment(None, list(overrides), data=raw)


def _built(cfg) -> list[tuple]:
    return [(type(h).__name__, h.priority, h.config) for h in build_hooks(cfg.hooks)]


@pytest.mark.parametrize("form", sorted(MAPPING_FORMS))
def test_mapping_builds_and_resolves_like_the_list(form, tmp_path):
    from_list = _load(tmp_path, LIST_FORM)
    from_mapping = _load(tmp_path, MAPPING_FORMS[form])
    assert from_mapping.hooks == from_list.hooks  # the resolved list form
    assert dump_config(from_mapping) == dump_config(from_list)  # so the same config.yaml
    built = _built(from_mapping)
    assert built == _built(from_list)
    assert [name for name, _, _ in built] == [
        "NaNGuardHook",
        "IterTimerHook",
        "LogHook",
        "PlyExportHook",
        "CheckPointHook",
    ]
    by_type = {name: (prio, config) for name, prio, config in built}
    assert by_type["LogHook"][1].interval == 50 and by_type["CheckPointHook"][1].max_keep == 2
    assert by_type["PlyExportHook"][0] == 70 and by_type["PlyExportHook"][1].every == 10


def test_mapping_config_yaml_reloads_to_the_same_config(tmp_path):
    cfg = _load(tmp_path, MAPPING_FORMS["type keys"])
    path = save_config(cfg, tmp_path / "exp")
    saved = yaml.safe_load(path.read_text())
    assert isinstance(saved["hooks"], list)  # written in the resolved list form
    assert load_experiment(path) == cfg


def test_mapping_form_takes_overrides_by_key(tmp_path):
    cfg = _load(
        tmp_path, {"LogHook": {"interval": 50}}, ["hooks.LogHook.interval=7", "hooks.CheckPointHook.enabled=false"]
    )
    by_type = {h["type"]: h for h in cfg.hooks}
    assert by_type["LogHook"]["interval"] == 7 and by_type["CheckPointHook"]["enabled"] is False
    assert "CheckPointHook" not in [type(h).__name__ for h in build_hooks(cfg.hooks)]


@pytest.mark.parametrize(
    "hooks, message",
    [
        ({"LogHok": {}}, "hooks.LogHok: unknown hook 'LogHok'; did you mean 'LogHook'?"),
        ({"logger": {"type": "LoggerHook"}}, "hooks.logger.type: unknown hook 'LoggerHook'; did you mean 'LogHook'?"),
        ({"LogHook": 50}, "hooks.LogHook: expected a mapping of options, e.g. LogHook: {interval: 50}"),
        ({"LogHook": None}, "hooks.LogHook: expected a mapping of options"),
        ({"LogHook": [1]}, "hooks.LogHook: expected a mapping of options"),
        ({"LogHook": {"intervl": 5}}, "hooks.LogHook.intervl: unknown key (did you mean 'interval'?)"),
        ({"LogHook": {"priority": "HIHG"}}, "hooks.LogHook.priority: unknown priority 'HIHG'"),
        ({"LogHook": {"name": "LogHook"}}, "hooks.LogHook.name: Pointrix's `name:` is the key itself here"),
        (
            {"LogHook": {}, "logger": {"type": "LogHook"}},
            "hooks.logger: configures LogHook again (already configured by hooks.LogHook)",
        ),
        ("LogHook", "hooks: expected a list ([{type: LogHook, interval: 50}]) or a mapping"),
    ],
)
def test_bad_mapping_entries_are_one_line_errors_naming_the_key(hooks, message, tmp_path):
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, hooks)
    assert str(info.value).startswith(message), str(info.value)
    assert "\n" not in str(info.value)


def test_duplicate_key_in_the_yaml_file_names_key_and_line(tmp_path, capsys):
    raw = toy_raw_config(tmp_path)
    del raw["hooks"]
    config = tmp_path / "scene.yaml"
    config.write_text(
        yaml.safe_dump(raw) + "hooks:\n  LogHook: {interval: 5}\n  CheckPointHook: {}\n  LogHook: {interval: 7}\n"
    )
    line = config.read_text().splitlines().index("  LogHook: {interval: 7}") + 1
    assert main(["--config", str(config), "--plugin", str(TOY_PLUGIN)]) == 2
    err = capsys.readouterr().err
    assert err == f"error: {config}:{line}: invalid YAML (duplicate key 'LogHook')\n"
    assert not (tmp_path / "outputs").exists()


def test_mapping_form_trains_through_the_command_line(tmp_path, capsys):
    raw = toy_raw_config(tmp_path)
    raw["hooks"] = {"LogHook": {"interval": 4}, "CheckPointHook": {"interval": 4, "max_keep": 1}}
    raw["trainer"] = {"max_steps": 8, "val_interval": 0, "test_at_end": False}
    config = tmp_path / "scene.yaml"
    config.write_text(yaml.safe_dump(raw))
    assert main(["--config", str(config), "--plugin", str(TOY_PLUGIN)]) == 0
    exp = tmp_path / "outputs" / "toy"
    saved = yaml.safe_load((exp / "config.yaml").read_text())
    ckpt = next(h for h in saved["hooks"] if h["type"] == "CheckPointHook")
    assert ckpt["interval"] == 4 and ckpt["max_keep"] == 1
    # max_keep 1 of the periodic saves (step 4 was pruned), plus the final one at step 8
    assert sorted(p.name for p in (exp / "checkpoints").glob("*.pth")) == ["step_000008.pth"]
