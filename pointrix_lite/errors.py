"""User-facing errors.

Every mistake a user can make (bad config key, missing file, corrupt image, ...) raises a
:class:`PointrixError` whose message is one line naming the offending file or config key.
The command-line scripts catch it, print ``error: <message>`` and exit with code 2, so a
user never sees a bare traceback for their own input.
"""

from __future__ import annotations

import reprlib

MESSAGE_CHARS = 1000  # a message longer than this is cut in the middle: it quoted something huge
VALUE_CHARS = 120

_REPR = reprlib.Repr()
_REPR.maxstring, _REPR.maxother, _REPR.maxlist, _REPR.maxdict, _REPR.maxlevel = VALUE_CHARS, VALUE_CHARS, 8, 8, 3


def shorten(text: str, limit: int = MESSAGE_CHARS) -> str:
    """``text`` cut in the middle to about ``limit`` characters, saying how long it was."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]} ... ({len(text):,} characters) ... {text[-half // 2 :]}"


def brief(value: object) -> str:
    """``repr(value)`` for a message, bounded: a config value can be megabytes (a long string, or YAML
    aliases that expand a few lines into millions of items), and reprlib stops walking it early."""
    text = _REPR.repr(value)
    # reprlib marks a cut with "..." but not how much was left out: say the whole length, so a user can tell a
    # typo from a value of megabytes.
    if isinstance(value, (str, bytes)) and len(value) > VALUE_CHARS:
        text += f" ({len(value):,} characters)"
    elif isinstance(value, (list, tuple, dict, set)) and len(value) > _REPR.maxlist:
        text += f" ({len(value):,} items)"
    return shorten(text, VALUE_CHARS + 40)


class PointrixError(Exception):
    """A problem with the user's input (config, data, checkpoint), reported in one line."""

    def __init__(self, message: str) -> None:
        # Fold to one line: callers sometimes format paths or values that contain newlines; and cut it,
        # as the last guard against a message quoting a value whole.
        super().__init__(shorten(" ".join(str(message).split())))


class ConfigError(PointrixError):
    """Unknown key, wrong type or unknown registered name in a config."""


class DataError(PointrixError):
    """Missing, corrupt or inconsistent scene data."""


class CheckpointError(PointrixError):
    """Missing, truncated or mismatching checkpoint."""
