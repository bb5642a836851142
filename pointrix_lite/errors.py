"""User-facing errors.

Every mistake a user can make (bad config key, missing file, corrupt image, ...) raises a
:class:`PointrixError` whose message is one line naming the offending file or config key.
The command-line scripts catch it, print ``error: <message>`` and exit with code 2, so a
user never sees a bare traceback for their own input.
"""

from __future__ import annotations


class PointrixError(Exception):
    """A problem with the user's input (config, data, checkpoint), reported in one line."""

    def __init__(self, message: str) -> None:
        # Fold to one line: callers sometimes format paths or values that contain newlines.
        super().__init__(" ".join(str(message).split()))


class ConfigError(PointrixError):
    """Unknown key, wrong type or unknown registered name in a config."""


class DataError(PointrixError):
    """Missing, corrupt or inconsistent scene data."""


class CheckpointError(PointrixError):
    """Missing, truncated or mismatching checkpoint."""
