"""Build hooks from resolved config entries, order them, and print the hook table."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ...errors import ConfigError
from ...hook.base import HOOK_ENGINE_KEYS, SITES, Hook
from ...hook.priority import get_priority, priority_name
from ...registry import HOOKS, Component
from .resolve import check_once


def sort_hooks(hooks: Iterable[Hook]) -> list[Hook]:
    """Lower priority first; ``sorted`` is stable, so ties keep the order hooks were given in."""
    return sorted(hooks, key=lambda h: h.priority)


def build_hooks(entries: Iterable[Mapping[str, Any]]) -> list[Hook]:
    """Resolved ``hooks`` entries (see ``resolve.resolve_hooks``) -> enabled hooks, sorted.

    A resolved entry (a :class:`Component`) was checked while the config loaded and its Config
    is passed on as it is; a plain mapping (a hook list written in Python) is checked here.
    Hooks are not bound to a trainer here (``--show-hooks`` builds them without one).

    Raises:
        ConfigError: unknown type or option; ``HookSignatureError`` for a site the trainer could
            not call (a hook ported with the trainer as an argument), before anything runs.
    """
    hooks = []
    for entry in entries:
        if not entry.get("enabled", True):
            continue
        type_name = entry["type"]
        where = f"hooks.{type_name}"
        resolved = isinstance(entry, Component)
        options = {k: v for k, v in entry.items() if k not in HOOK_ENGINE_KEYS}
        hook = HOOKS.build(entry if resolved else {"type": type_name, **options}, where)
        if not isinstance(hook, Hook):
            raise ConfigError(f"{where}: registered class is not a pointrix_lite Hook subclass")
        if not resolved:  # a resolved entry's class was checked when it resolved
            check_once(type(hook), where)
        if "priority" in entry:
            hook.priority = get_priority(entry["priority"], f"{where}.priority")
        hooks.append(hook)
    return sort_hooks(hooks)


def format_hook_table(hooks: list[Hook]) -> str:
    """MMEngine-style listing: every site with its hooks in execution order and their priorities."""
    lines = ["Hooks will be executed in the following order:"]
    width = max((len(priority_name(h.priority)) for h in hooks), default=6)
    for site in SITES:
        users = [h for h in hooks if h.overrides(site)]
        if not users:
            continue
        lines.append(f"{site}:")
        lines.extend(f"({priority_name(h.priority):<{width}}) {h.name}" for h in users)
        lines.append("-" * 40)
    return "\n".join(lines)
