"""Hook site signatures are checked when hooks are built, before anything runs (Pointrix / MMEngine ports)."""

from __future__ import annotations

import textwrap
from pathlib import Path
from re import escape as re_escape

import pytest
import yaml

from pointrix_lite.cli.train import main
from pointrix_lite.engine.hooks import Hook, HookSignatureError, build_hooks, check_hook_class
from pointrix_lite.errors import ConfigError
from pointrix_lite.registry import HOOKS
from tests.engine.engine_helpers import TOY_PLUGIN, make_trainer, toy_raw_config

# What a user ports first: the trainer comes in as an argument, as in Pointrix and MMEngine.
PORTED = {
    "pointrix": (
        "PointrixStyleHook",
        "def after_train_iter(self, trainner):\n        trainner.writer.write_scalar('x', 1.0, trainner.global_step)",
        "PointrixStyleHook.after_train_iter(self, trainner)",
    ),
    "mmengine": (
        "MMEngineStyleHook",
        "def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None):\n        runner.visualizer.add_scalar('x', 1.0, runner.iter + 1)",
        "MMEngineStyleHook.after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None)",
    ),
}


def _plugin(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / f"{name.lower()}.py"
    path.write_text(
        textwrap.dedent(f"""
        from pointrix_lite.engine.hooks import Hook
        from pointrix_lite.registry import HOOKS


        @HOOKS.register()
        class {name}(Hook):
            calls = 0

            {{body}}
    """).replace("{body}", body)
    )
    return path


@pytest.fixture
def scratch_registry(monkeypatch):
    """Hooks registered by a test (from its plugin files) are gone after it."""
    monkeypatch.setattr(HOOKS, "_table", dict(HOOKS._table))


@pytest.mark.parametrize("style", sorted(PORTED))
def test_ported_hook_is_one_line_error_before_training(style, tmp_path, capsys, scratch_registry, monkeypatch):
    name, body, has = PORTED[style]
    plugin = _plugin(tmp_path, name, body)
    raw = toy_raw_config(tmp_path)
    raw["hooks"] = {name: {}, "LogHook": {"interval": 4}}
    config = tmp_path / "scene.yaml"
    config.write_text(yaml.safe_dump(raw))
    # Each plugin file gets its own module name (per path), so a fresh tmp_path registers anew.
    rc = main(["--config", str(config), "--plugin", str(TOY_PLUGIN), "--plugin", str(plugin)])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.count("\n") == 1, err
    assert err.startswith(f"error: hooks.{name}: {has} ({plugin.name}:")
    assert "cannot be called as the trainer calls it, after_train_iter(self, batch_idx, batch)" in err
    assert "self.trainer" in err and "docs/porting.md#hook-sites-and-their-arguments" in err
    # Refused while the config loads: the trainer was never built, so no step ran and nothing was
    # written (no experiment folder: no config.yaml, log or checkpoint).
    assert not (tmp_path / "outputs").exists()


@pytest.mark.parametrize("style", sorted(PORTED))
def test_ported_hook_registered_from_python_fails_before_run(style, tmp_path, toy_config, scratch_registry):
    name, body, has = PORTED[style]
    from pointrix_lite.cli.plugins import load_plugin

    cls = getattr(load_plugin(_plugin(tmp_path, name, body)), name)
    trainer = make_trainer(toy_config({"trainer": {"max_steps": 4, "val_interval": 0}}))
    with pytest.raises(HookSignatureError) as info:
        trainer.register_hook(cls())
    assert str(info.value).startswith(f"hook {name}: {has} (")
    assert trainer.global_step == 0 and all(type(h) is not cls for h in trainer.hooks)
    # build_hooks (what --show-hooks and the trainer use) refuses it the same way.
    with pytest.raises(HookSignatureError, match=rf"hooks.{name}: "):
        build_hooks([{"type": name}])


def _check(cls: type) -> None:
    check_hook_class(cls, f"hooks.{cls.__name__}")


def test_signatures_the_trainer_can_call_pass():
    class Fine(Hook):
        def after_train_iter(self, batch_idx, batch, extra=None): ...
        def before_train_iter(self, **kwargs): ...
        def after_val_epoch(self, metrics: dict, *args) -> None: ...
        def before_save_checkpoint(self, *, checkpoint): ...

        @staticmethod
        def before_run(): ...

        @classmethod
        def after_run(cls): ...

    for cls in (Fine, Hook):
        _check(cls)


@pytest.mark.parametrize(
    "site, source, has",
    [
        ("before_train", "def before_train(self, runner): ...", "(self, runner)"),
        ("after_val_epoch", "def after_val_epoch(self, runner, metrics=None): ...", "(self, runner, metrics=None)"),
        (
            "after_load_checkpoint",
            "def after_load_checkpoint(self, runner, checkpoint): ...",
            "(self, runner, checkpoint)",
        ),
        ("after_train_iter", "def after_train_iter(self, *args): ...", "(self, *args)"),
        ("after_train_iter", "def after_train_iter(self, idx, batch): ...", "(self, idx, batch)"),
        ("before_run", "def before_run(): ...", "()"),  # forgot self
        ("after_run", "@staticmethod\ndef after_run(trainer): ...", "(trainer)"),
    ],
)
def test_wrong_signatures_name_class_site_and_both_signatures(site, source, has):
    namespace: dict = {}
    exec(f"class Ported(Hook):\n{textwrap.indent(source, '    ')}", {"Hook": Hook}, namespace)
    with pytest.raises(HookSignatureError) as info:
        _check(namespace["Ported"])
    message = str(info.value)
    assert message.startswith(f"hooks.Ported: Ported.{site}{has}")
    from pointrix_lite.engine.hooks.signature import site_keywords

    needs = ", ".join(("self", *site_keywords(site)))
    assert f"as the trainer calls it, {site}({needs});" in message
    assert "\n" not in message and isinstance(info.value, (ConfigError, TypeError))


def test_a_site_name_that_is_not_a_method_is_refused():
    class Shadowed(Hook):
        after_train = True

    with pytest.raises(HookSignatureError, match=r"Shadowed.after_train is bool True, not a method"):
        _check(Shadowed)


def test_subclass_inherits_the_check():
    class Base(Hook):
        def before_train(self, trainner): ...

    class Child(Base):
        pass

    with pytest.raises(HookSignatureError, match=r"^hooks.Child: Child.before_train\(self, trainner\)"):
        _check(Child)


def test_each_hook_class_is_inspected_once_from_config_to_running_trainer(toy_config, monkeypatch):
    """Resolving the config checks every hook; building and registering them must not inspect again."""
    import weakref

    from pointrix_lite.engine.hooks import resolve

    seen: list[type] = []
    real = resolve.check_hook_class

    def counting(cls: type, key_path: str) -> None:
        seen.append(cls)
        real(cls, key_path)

    monkeypatch.setattr(resolve, "check_hook_class", counting)
    monkeypatch.setattr(resolve, "_CHECKED", weakref.WeakSet())  # as in a fresh process
    cfg = toy_config({"hooks": {"LogHook": {"interval": 4}, "ProfilerHook": {"enabled": False}}})
    assert sorted(c.__name__ for c in seen) == sorted(h["type"] for h in cfg.hooks)  # disabled ones too
    assert len(seen) == len(set(seen))
    trainer = make_trainer(cfg)
    trainer.register_hook(HOOKS.get("ProfilerHook")(HOOKS.get("ProfilerHook").Config()))  # from Python
    assert len(seen) == len(set(seen)) == len(cfg.hooks)
    assert {type(h) for h in trainer.hooks} <= set(seen)


def test_a_refused_class_is_refused_again_with_each_callers_key_path(tmp_path, scratch_registry):
    """Only passes are remembered: a bad class fails wherever it turns up next."""
    from pointrix_lite.engine.hooks.resolve import check_once

    name, body, has = PORTED["pointrix"]
    from pointrix_lite.cli.plugins import load_plugin

    cls = getattr(load_plugin(_plugin(tmp_path, name, body)), name)
    for where in ("hooks[0]", "hook PointrixStyleHook"):
        with pytest.raises(HookSignatureError, match=rf"^{re_escape(where)}: {re_escape(has)}"):
            check_once(cls, where)
