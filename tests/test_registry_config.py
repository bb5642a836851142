"""Registry errors, typed configs, overrides, DI shorthand keys, priorities, saved config."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

import pytest
import yaml

from pointrix_lite.engine.experiment import apply_overrides, load_experiment, save_config
from pointrix_lite.engine.hooks import Hook
from pointrix_lite.errors import ConfigError
from pointrix_lite.hook import Priority, get_priority
from pointrix_lite.registry import HOOKS, Registry


# --- registry ---------------------------------------------------------------------------------
def test_duplicate_registration_is_an_error():
    reg = Registry("thing")

    @reg.register()
    class A: ...

    with pytest.raises(KeyError, match="'A' is already registered"):  # also a ConfigError (one line)
        reg.register("A")(type("B", (), {}))


def test_unknown_type_lists_names_and_closest_match():
    with pytest.raises(ConfigError) as exc:
        HOOKS.get("LogHok", "hooks[0].type")
    msg = str(exc.value)
    assert msg.startswith("hooks[0].type: unknown hook 'LogHok';")
    assert "did you mean 'LogHook'?" in msg
    assert "CheckPointHook" in msg and "ProfilerHook" in msg and "\n" not in msg


def test_build_passes_typed_config_and_extras():
    reg = Registry("widget")

    @reg.register()
    class Widget:
        @dataclass
        class Config:
            size: int = 1
            name: str = "w"

        def __init__(self, config, owner):
            self.config, self.owner = config, owner

    w = reg.build({"type": "Widget", "size": 3.0}, "widgets[0]", owner="me")
    assert isinstance(w.config, Widget.Config) and w.config.size == 3 and type(w.config.size) is int
    assert w.owner == "me"
    with pytest.raises(ConfigError, match=r"^widgets\[0\]\.size: expected an integer, got 'big'$"):
        reg.build({"type": "Widget", "size": "big"}, "widgets[0]", owner="me")


# --- experiment config errors name the key path --------------------------------------------------
def test_unknown_key_in_component_section(toy_config):
    with pytest.raises(ConfigError) as exc:
        toy_config({"model": {"lrr": 0.1}})
    msg = str(exc.value)
    assert msg.startswith("model.lrr: unknown key (did you mean 'lr'?)")
    assert "valid keys: lr, lr_final_factor, nan_at_step, channels" in msg


def test_wrong_type_names_nested_path(toy_config):
    with pytest.raises(ConfigError, match=r"^trainer\.max_steps: expected an integer, got 'many'$"):
        toy_config({"trainer": {"max_steps": "many"}})


@pytest.mark.parametrize(
    ("tp", "named"),
    [
        (int | Literal["auto"], "an integer or 'auto'"),
        (bool | Literal["auto"], "true/false or 'auto'"),
        (float | Literal["auto", "max"], "a number or 'auto' or 'max'"),
        (str | None, "a string or null"),
    ],
)
def test_a_union_is_named_by_its_members(tp, named):
    """A value no member of a union takes names what each member would take, not "expected Union"."""
    from pointrix_lite.config import convert

    with pytest.raises(ConfigError, match=rf"^seeding\.mvs_views: expected {re.escape(named)}, got \[1\]$"):
        convert(tp, [1], "seeding.mvs_views")
    assert convert(tp, "auto" if "auto" in named else "x", "k") in ("auto", "x")


def test_unknown_top_level_key_lists_valid_keys(toy_config):
    with pytest.raises(ConfigError, match=r"^tranier: unknown key \(did you mean 'trainer'\?\); valid keys: name,"):
        toy_config({"tranier": {}})


def test_unknown_registry_type_in_section(toy_config):
    with pytest.raises(
        ConfigError, match=r"^renderer\.type: unknown renderer 'ToyRenderr'; did you mean 'ToyRenderer'\?"
    ):
        toy_config({"renderer": {"type": "ToyRenderr"}})


def test_hook_option_error_names_user_index(toy_config):
    with pytest.raises(ConfigError, match=r"^hooks\[1\]\.intervl: unknown key \(did you mean 'interval'\?\)"):
        toy_config({"hooks": [{"type": "LogHook"}, {"type": "CheckPointHook", "intervl": 3}]})
    with pytest.raises(ConfigError, match=r"^hooks\[0\]\.priority: unknown priority 'SUPER'"):
        toy_config({"hooks": [{"type": "LogHook", "priority": "SUPER"}]})


def test_missing_yaml_file_and_bad_yaml(tmp_path):
    with pytest.raises(ConfigError, match="nope.yaml: cannot read config"):
        load_experiment(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [1, 2\nb: 3\n")
    with pytest.raises(ConfigError, match=r"bad\.yaml:\d+: invalid YAML"):
        load_experiment(bad)


# --- overrides ---------------------------------------------------------------------------------
def test_overrides_parse_yaml_scalars_and_nest():
    data = {"trainer": {"max_steps": 10}, "hooks": [{"type": "LogHook"}]}
    out = apply_overrides(
        data,
        [
            "trainer.max_steps=500",
            "dataset.data_path=/x/y",
            "seed=007",
            "hooks.0.interval=5",
            "trainer.test_at_end=false",
            "strategy=null",
            "name='001'",
        ],
    )
    assert out["trainer"]["max_steps"] == 500
    assert out["dataset"] == {"data_path": "/x/y"}
    assert out["seed"] == 7 and out["name"] == "001" and out["strategy"] is None
    assert out["hooks"][0]["interval"] == 5 and out["trainer"]["test_at_end"] is False
    assert data["trainer"]["max_steps"] == 10  # input not mutated
    with pytest.raises(ConfigError, match="expected key=value"):
        apply_overrides(data, ["trainer.max_steps"])
    with pytest.raises(ConfigError, match=r"^hooks\.3: no list item"):
        apply_overrides(data, ["hooks.3.interval=1"])


def test_override_of_unknown_key_is_reported_by_schema(toy_config):
    with pytest.raises(ConfigError, match=r"^model\.sh_degre: unknown key"):
        toy_config(overrides=["model.sh_degre=3"])


# --- hooks from YAML, defaults, DI shorthand keys -----------------------------------------------
def _hook(cfg, type_name):
    return next(h for h in cfg.hooks if h["type"] == type_name)


def test_default_hooks_present_and_disable(toy_config):
    cfg = toy_config({"hooks": []})
    assert [h["type"] for h in cfg.hooks] == ["IterTimerHook", "LogHook", "CheckPointHook", "NaNGuardHook"]
    assert all(h["enabled"] for h in cfg.hooks)
    cfg = toy_config(
        {"hooks": [{"type": "LogHook", "enabled": False}, {"type": "NaNGuardHook", "check_params": False}]}
    )
    assert _hook(cfg, "LogHook")["enabled"] is False
    assert [h["type"] for h in cfg.hooks] == ["IterTimerHook", "LogHook", "CheckPointHook", "NaNGuardHook"]
    assert _hook(cfg, "NaNGuardHook")["priority"] == "VERY_HIGH"  # class default, resolved
    assert _hook(cfg, "NaNGuardHook")["check_params"] is False  # configures the default, no second copy


def test_di_shorthand_keys_in_yaml_and_command_line(toy_config):
    cfg = toy_config({"hooks": [], "save_ckpt_after_iter": 20, "log_show_after_iter": 7, "save_ckpt_after_run": False})
    assert _hook(cfg, "CheckPointHook")["interval"] == 20
    assert _hook(cfg, "CheckPointHook")["save_last"] is False
    assert _hook(cfg, "LogHook")["interval"] == 7
    cfg = toy_config({"hooks": []}, overrides=["save_ckpt_after_iter=20", "load_ckpt_before_run=/tmp/x.pth"])
    assert _hook(cfg, "CheckPointHook")["interval"] == 20
    assert cfg.load_ckpt_before_run == "/tmp/x.pth"
    assert cfg.save_ckpt_after_iter is None  # folded into hooks, so the saved config won't re-apply it


def test_shorthand_conflicts_are_errors(toy_config):
    with pytest.raises(ConfigError, match=r"^save_ckpt_after_iter: 20 conflicts with hooks\[1\]\.interval: 8"):
        toy_config(overrides=["save_ckpt_after_iter=20"])  # toy config sets CheckPointHook interval 8
    with pytest.raises(ConfigError, match="LogHook is disabled"):
        toy_config({"hooks": [{"type": "LogHook", "enabled": False}], "log_show_after_iter": 3})


def test_saved_config_round_trips(toy_config, tmp_path):
    cfg = toy_config({"hooks": [{"type": "ProfilerHook", "priority": 5}]}, overrides=["save_ckpt_after_iter=3"])
    path = save_config(cfg, cfg.exp_dir)
    assert path == tmp_path / "outputs" / "toy" / "config.yaml"
    saved = yaml.safe_load(path.read_text())
    assert saved["model"] == {"type": "ToyModel", "lr": 0.5, "lr_final_factor": 0.1, "nan_at_step": None, "channels": 3}
    assert load_experiment(path) == cfg


def test_exp_dir_default_and_override(toy_config, tmp_path):
    assert toy_config().exp_dir == str(tmp_path / "outputs" / "toy")
    assert toy_config(overrides=[f"exp_dir={tmp_path / 'elsewhere'}"]).exp_dir == str(tmp_path / "elsewhere")


def test_device_auto_resolves(toy_config):
    import torch

    from pointrix_lite.engine.experiment import resolve_device

    assert resolve_device("auto") == ("cuda" if torch.cuda.is_available() else "cpu")
    with pytest.raises(ConfigError, match="^device: invalid torch device 'gpu0'"):
        resolve_device("gpu0")


# --- priorities --------------------------------------------------------------------------------
def test_priority_levels_and_ints():
    assert [
        get_priority(n)
        for n in ("HIGHEST", "very_high", "HIGH", "ABOVE_NORMAL", "NORMAL", "BELOW_NORMAL", "LOW", "VERY_LOW", "LOWEST")
    ] == [0, 10, 30, 40, 50, 60, 70, 90, 100]
    assert get_priority(Priority.LOW) == 70 and get_priority(42) == 42
    for bad in (101, -1, True, 1.5, "MEDIUM"):
        with pytest.raises(ConfigError):
            get_priority(bad)


def test_builder_orders_by_priority_keeping_ties_stable():
    from pointrix_lite.engine.hooks import build_hooks

    hooks = build_hooks(
        [
            {"type": "LogHook", "priority": "NORMAL"},
            {"type": "IterTimerHook", "priority": 50},
            {"type": "CheckPointHook", "priority": "HIGHEST"},
            {"type": "NaNGuardHook", "priority": 50},
            {"type": "ProfilerHook", "priority": 99, "enabled": False},
        ]
    )
    assert [(h.name, h.priority) for h in hooks] == [
        ("CheckPointHook", 0),
        ("LogHook", 50),
        ("IterTimerHook", 50),
        ("NaNGuardHook", 50),
    ]
    assert all(isinstance(h, Hook) for h in hooks)


def test_float_option_accepts_yaml11_exponent_string() -> None:
    # yaml.safe_load("x: 4e-4") gives the string "4e-4"; a float field must still read it as 4e-4.
    from pointrix_lite.config import from_dict

    @dataclass
    class C:
        lr: float = 1.0

    raw = yaml.safe_load("lr: 4e-4")
    assert isinstance(raw["lr"], str)
    assert from_dict(C, raw).lr == pytest.approx(4e-4)
    with pytest.raises(ConfigError, match="lr: expected a number"):
        from_dict(C, {"lr": "fast"})
