"""``hooks:`` from config -> the resolved hook list: defaults, shorthand keys, list and mapping forms.

Everything a hook entry can get wrong is found here, while the config loads and before any data
does: an unknown type, a bad option (the hook's ``Config`` and its ``__post_init__``), a bad
priority or ``enabled``, and a site signature the trainer could not call. Each hook class is
checked once per resolution, here; ``build_hooks`` and ``register_hook`` only guard hooks that
never went through it (:func:`check_once`).
"""

from __future__ import annotations

import dataclasses
import weakref
from collections.abc import Mapping
from typing import Any

from ...errors import ConfigError, brief
from ...hook.base import HOOK_ENGINE_KEYS
from ...hook.priority import get_priority, priority_name
from ...registry import HOOKS, Component
from .signature import check_hook_class

# Hooks every run has unless a `hooks:` entry says `enabled: false` (see docs/extending.md).
# NaNGuardHook is a default because a NaN that reaches a checkpoint silently ruins a long run.
DEFAULT_HOOKS: tuple[str, ...] = ("IterTimerHook", "LogHook", "CheckPointHook", "NaNGuardHook")

# Shorthand key -> (hook type, option). load_ckpt_before_run stays a top-level key: loading is
# the trainer's job (it must happen before before_train and fire after_load_checkpoint).
SHORTHANDS: dict[str, tuple[str, str]] = {
    "save_ckpt_after_iter": ("CheckPointHook", "interval"),
    "save_ckpt_after_run": ("CheckPointHook", "save_last"),
    "log_show_after_iter": ("LogHook", "interval"),
}

# Classes whose sites passed the check. A class is inspected once: the resolved config, then
# build_hooks and register_hook for the same classes would repeat the same answer. Weak, so a
# class a test or plugin drops is not kept alive; only passes are kept, so a bad class fails
# again, each time naming the caller's key path.
_CHECKED: weakref.WeakSet[type] = weakref.WeakSet()


def check_once(cls: type, key_path: str) -> None:
    """:func:`check_hook_class` unless ``cls`` already passed it in this process."""
    if cls in _CHECKED:
        return
    check_hook_class(cls, key_path)
    _CHECKED.add(cls)


def _split_entry(entry: Any, key_path: str) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """``{type, priority, enabled, **options}`` -> (type, engine keys, options)."""
    if not isinstance(entry, dict) or "type" not in entry:
        raise ConfigError(f"{key_path}: expected a mapping with 'type', e.g. {{type: LogHook, interval: 100}}")
    engine = {k: entry[k] for k in HOOK_ENGINE_KEYS if k in entry}
    options = {k: v for k, v in entry.items() if k not in HOOK_ENGINE_KEYS}
    return str(entry["type"]), engine, options


def _mapping_entry(key: Any, value: Any) -> tuple[str, dict[str, Any]]:
    """One item of the mapping form -> (key path, list-form entry).

    The key is the hook type (Pointrix: ``LogHook: {interval: 50}``) or a label with ``type``
    inside (MMEngine's ``default_hooks``: ``logger: {type: LogHook, interval: 50}``).
    """
    key_path = f"hooks.{key}"
    if not isinstance(value, dict):
        # null too: MMEngine reads `checkpoint: None` as "off", a YAML user writing `LogHook:` as "on";
        # neither guess is safe, so the user says which.
        raise ConfigError(
            f"{key_path}: expected a mapping of options, e.g. {key}: {{interval: 50}} ({{}} for the defaults, "
            f"{{enabled: false}} to turn it off), got {brief(value)}"
        )
    type_name = str(value.get("type", key))
    cls = HOOKS.get(type_name, f"{key_path}.type" if "type" in value else key_path)
    config_cls = getattr(cls, "Config", None)
    options = {f.name for f in dataclasses.fields(config_cls)} if config_cls is not None else set()
    if "name" in value and "name" not in options:
        raise ConfigError(
            f"{key_path}.name: Pointrix's `name:` is the key itself here (or `type:`); drop it (see docs/porting.md#config-keys)"
        )
    return key_path, {"type": type_name, **{k: v for k, v in value.items() if k != "type"}}


def hook_entries(hooks: Any) -> list[tuple[str, Any]]:
    """``hooks:`` in list or mapping form -> ``[(key path, entry)]`` in the order written.

    In the mapping form a default hook may be configured once only: two keys setting
    ``LogHook`` options would otherwise merge silently.
    """
    if isinstance(hooks, list):
        return [(f"hooks[{i}]", entry) for i, entry in enumerate(hooks)]
    if not isinstance(hooks, dict):
        raise ConfigError(
            f"hooks: expected a list ([{{type: LogHook, interval: 50}}]) or a mapping ({{LogHook: {{interval: 50}}}}), got {brief(hooks)}"
        )
    entries, seen = [], {}
    for key, value in hooks.items():
        key_path, entry = _mapping_entry(key, value)
        if entry["type"] in DEFAULT_HOOKS:
            if entry["type"] in seen:
                raise ConfigError(
                    f"{key_path}: configures {entry['type']} again (already configured by {seen[entry['type']]}); keep one"
                )
            seen[entry["type"]] = key_path
        entries.append((key_path, entry))
    return entries


def _priority_for_yaml(value: int) -> str | int:
    name = priority_name(value)
    return value if name.isdigit() else name  # a level name when there is one, else the int


def resolve_hooks(hooks: Any, shorthands: Mapping[str, Any] | None = None) -> list[Component]:
    """Merge default hooks, the user's ``hooks:`` (list or mapping) and shorthand keys into one resolved list.

    Order: the default hooks first (in :data:`DEFAULT_HOOKS` order), then the user's other hooks
    in the order written; ties in priority keep this order. A user entry whose type is a default
    hook configures that default instead of adding a second one. Each resolved entry carries
    ``type``, ``priority`` (level name or int), ``enabled`` and every option of the hook's Config.

    Args:
        hooks: The config's ``hooks:`` value.
        shorthands: The top-level :data:`SHORTHANDS` keys and their values (None: not given).
    """
    merged: dict[str, dict[str, Any]] = {}  # key -> entry; dicts keep insertion order
    origin: dict[str, str] = {}  # key -> where the options came from, for error messages
    for name in DEFAULT_HOOKS:
        merged[name] = {"type": name}
        origin[name] = f"default {name}"
    for i, (key_path, entry) in enumerate(hook_entries(hooks)):
        type_name, engine, options = _split_entry(entry, key_path)
        HOOKS.get(type_name, f"{key_path}.type")
        if "enabled" in engine and not isinstance(engine["enabled"], bool):
            raise ConfigError(f"{key_path}.enabled: expected true/false, got {brief(engine['enabled'])}")
        if "priority" in engine:
            get_priority(engine["priority"], f"{key_path}.priority")
        key = type_name if type_name in DEFAULT_HOOKS else f"{type_name}#{i}"
        merged[key] = {**merged.get(key, {}), **engine, **options}
        origin[key] = key_path
    for short, (type_name, option) in SHORTHANDS.items():
        value = (shorthands or {}).get(short)
        if value is None:
            continue
        entry = merged.get(type_name)
        if entry is None or entry.get("enabled") is False:
            raise ConfigError(f"{short}: sets {type_name}.{option}, but {type_name} is disabled in hooks")
        if option in entry and entry[option] != value:
            raise ConfigError(
                f"{short}: {value!r} conflicts with {origin[type_name]}.{option}: {entry[option]!r}; keep one"
            )
        entry[option] = value
    return [_resolve_entry(entry, origin[key]) for key, entry in merged.items()]


def _resolve_entry(entry: dict[str, Any], origin: str) -> Component:
    """One merged entry -> its resolved form, every option checked and the class's sites too."""
    type_name = entry["type"]
    where = origin if not origin.startswith("default") else f"hooks.{type_name}"
    cls = HOOKS.get(type_name)
    check_once(cls, where)  # before the data loads
    options = {k: v for k, v in entry.items() if k not in HOOK_ENGINE_KEYS}
    priority = entry.get("priority", getattr(cls, "priority", 50))
    return HOOKS.resolve(
        {"type": type_name, **options},
        where,
        priority=_priority_for_yaml(get_priority(priority, f"{where}.priority")),
        enabled=entry.get("enabled", True),
    )
