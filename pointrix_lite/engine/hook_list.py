"""Hook dispatch: the priority-ordered hook list and ``call(site, ...)``.

One object used by the training loop, the evaluation and the checkpoints alike, so the order a
site runs its hooks in is decided in one place: lower priority first, ties in the order the
hooks were added (MMEngine's rule; a config's hooks keep the order they were written in).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from typing import Any

from ..hook.base import Hook
from .hooks.builder import format_hook_table
from .hooks.resolve import check_once


class HookList:
    """The hooks of one trainer (or evaluation), in the order they run.

    Args:
        owner: What the hooks see as ``hook.trainer`` (held weakly by each hook).
    """

    def __init__(self, owner: Any) -> None:
        self._owner = owner
        self._hooks: list[Hook] = []

    def add(self, hook: Hook) -> None:
        """Attach ``hook`` at its priority, after the hooks already there with the same priority."""
        check_once(type(hook), f"hook {hook.name}")  # a wrong site signature fails now, not mid-run
        hook.trainer = self._owner
        # bisect_right over the priorities: the insertion point after every equal one, so adding
        # hooks one by one gives the order a stable sort of the whole list would.
        at = bisect.bisect_right([h.priority for h in self._hooks], hook.priority)
        # A new list, not an insert: a site running now (a hook adding another) goes on over the old one.
        self._hooks = [*self._hooks[:at], hook, *self._hooks[at:]]

    def call(self, site: str, **kwargs: Any) -> None:
        """Call ``site`` on every hook that has it, in priority order.

        Any name works: the built-in sites and a custom site a hook announces
        (``trainer.call_hook("after_densify", n_new=...)``).

        Raises:
            TypeError: a hook raised one (usually a wrong site signature); re-raised naming the hook.
        """
        for hook in self._hooks:
            fn = getattr(hook, site, None)
            if fn is None:
                continue
            try:
                fn(**kwargs)
            except TypeError as exc:
                raise TypeError(f"hook {hook.name} ({type(hook).__module__}) failed at site {site!r}: {exc}") from exc

    def keys(self) -> list[str]:
        """Stable names for hook states in checkpoints: the type name, ``#k`` for repeats."""
        seen: dict[str, int] = {}
        keys = []
        for hook in self._hooks:
            k = seen.get(hook.name, 0)
            seen[hook.name] = k + 1
            keys.append(hook.name if k == 0 else f"{hook.name}#{k}")
        return keys

    def state_dict(self) -> dict[str, Any]:
        return {key: hook.state_dict() for key, hook in zip(self.keys(), self._hooks)}

    def load_state_dict(self, states: dict[str, Any]) -> None:
        """Give each hook its saved state; a hook the checkpoint has no state for keeps its own."""
        for key, hook in zip(self.keys(), self._hooks):
            if key in states:
                hook.load_state_dict(states[key])

    def table(self) -> str:
        return format_hook_table(self._hooks)

    def as_list(self) -> list[Hook]:
        return list(self._hooks)

    def __iter__(self) -> Iterator[Hook]:
        return iter(self._hooks)

    def __len__(self) -> int:
        return len(self._hooks)
