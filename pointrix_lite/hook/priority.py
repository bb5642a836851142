"""Hook priorities: named levels or an int in [0, 100]; lower runs first.

The levels are MMEngine's (``mmengine/runner/priority.py``) so a hook ported from there keeps its
place in the order. Equal priorities keep registration order (the trainer sorts stably).
"""

from __future__ import annotations

from enum import IntEnum

from ..errors import ConfigError


class Priority(IntEnum):
    HIGHEST = 0
    VERY_HIGH = 10
    HIGH = 30
    ABOVE_NORMAL = 40
    NORMAL = 50
    BELOW_NORMAL = 60
    LOW = 70
    VERY_LOW = 90
    LOWEST = 100


def get_priority(value: int | str | Priority, key_path: str = "priority") -> int:
    """Turn ``"HIGH"`` / ``Priority.HIGH`` / ``30`` into the int 30.

    Raises:
        ConfigError: unknown level name, an int outside [0, 100], or another type.
    """
    if isinstance(value, Priority):
        return int(value)
    if isinstance(value, bool):  # bool is an int subclass; `priority: true` is a mistake
        raise ConfigError(f"{key_path}: expected a level name or an int 0-100, got {value!r}")
    if isinstance(value, int):
        if not 0 <= value <= 100:
            raise ConfigError(f"{key_path}: priority must be in [0, 100], got {value}")
        return value
    if isinstance(value, str):
        name = value.upper()
        if name in Priority.__members__:
            return int(Priority[name])
        raise ConfigError(f"{key_path}: unknown priority {value!r}; levels: {', '.join(Priority.__members__)}")
    raise ConfigError(f"{key_path}: expected a level name or an int 0-100, got {value!r}")


def priority_name(value: int) -> str:
    """``30 -> "HIGH"``, ``35 -> "35"`` (for the hook table)."""
    try:
        return Priority(value).name
    except ValueError:
        return str(value)
