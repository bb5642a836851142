"""Build hooks from resolved config entries, order them, and print the hook table."""

from __future__ import annotations

from typing import Any, Iterable

from ...errors import ConfigError
from ...registry import HOOKS
from ..priority import get_priority, priority_name
from .base import HOOK_ENGINE_KEYS, SITES, Hook
from .resolve import check_once


def sort_hooks(hooks: Iterable[Hook]) -> list[Hook]:
    """Lower priority first; ``sorted`` is stable, so ties keep the order hooks were given in."""
    return sorted(hooks, key=lambda h: h.priority)


def build_hooks(entries: Iterable[dict[str, Any]]) -> list[Hook]:
    """Resolved ``hooks`` entries (see ``resolve.resolve_hooks``) -> enabled hooks, sorted.

    Hooks are not bound to a trainer here (``--show-hooks`` builds them without one); the
    trainer sets ``hook.trainer`` itself.

    Raises:
        ConfigError: unknown type or option; ``HookSignatureError`` for a site the trainer could
            not call (a hook ported with the trainer as an argument), before anything runs.
    """
    hooks = []
    for entry in entries:
        if not entry.get("enabled", True):
            continue
        type_name = entry["type"]
        options = {k: v for k, v in entry.items() if k not in HOOK_ENGINE_KEYS}
        hook = HOOKS.build({"type": type_name, **options}, f"hooks.{type_name}")
        if not isinstance(hook, Hook):
            raise ConfigError(f"hooks.{type_name}: registered class is not a pointrix_lite Hook subclass")
        check_once(type(hook), f"hooks.{type_name}")  # a no-op for entries resolve_hooks checked
        if "priority" in entry:
            hook.priority = get_priority(entry["priority"], f"hooks.{type_name}.priority")
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
