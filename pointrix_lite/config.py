"""Typed configs: YAML mappings -> dataclasses, strictly.

Components declare their options as dataclasses; :func:`from_dict` converts a plain mapping
(from YAML or the command line) into one. An unknown key or a value of the wrong type is a
:class:`~pointrix_lite.errors.ConfigError` naming the full key path and the valid keys, so a
typo never silently falls back to a default.

A ``Config`` checks its own values in ``__post_init__`` by raising :class:`OptionError`; since
every component's config is built here while the experiment config loads, a bad value fails
then, before any data is read, and :func:`from_dict` puts the key path it is loading in front
(``hooks[1].max_keep: must be >= 1 or null, got 0``).
"""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from collections.abc import Mapping
from pathlib import PurePath
from typing import Any, TypeVar, Union

from .errors import ConfigError, brief, shorten

T = TypeVar("T")


class OptionError(ConfigError):
    """A value a ``Config.__post_init__`` refuses: ``key`` (relative to that config) and the problem.

    Args:
        key: The option, relative to its config (``max_keep``, ``lr.means``).
        problem: What is wrong, e.g. ``must be >= 1, got 0``.
        home: Where the config usually sits (``hooks.CheckPointHook``), for a config built
            directly in Python; :func:`from_dict` replaces it by the key path it loads.
    """

    def __init__(self, key: str, problem: str, home: str = "") -> None:
        self.key, self.problem, self.home = key, problem, home
        super().__init__(f"{home}.{key}: {problem}" if home else f"{key}: {problem}")

    def __reduce__(self) -> tuple:  # pickles (e.g. across processes) with its three arguments
        return type(self), (self.key, self.problem, self.home)


def at_least(config: Any, minimum: float, *keys: str, home: str = "") -> None:
    """OptionError for the first of ``keys`` whose value on ``config`` is below ``minimum`` (or NaN)."""
    for key in keys:
        value = getattr(config, key)
        if not value >= minimum:
            raise OptionError(key, f"must be >= {minimum:g}, got {brief(value)}", home)


def check_relative_path(key: str, value: str, home: str = "") -> None:
    """OptionError unless ``value`` is a non-empty relative path (a file or folder inside exp_dir)."""
    if not value or PurePath(value).is_absolute():
        raise OptionError(key, f"must be a path relative to exp_dir, got {brief(value)}", home)


_NAMES = {bool: "true/false", int: "an integer", float: "a number", str: "a string", type(None): "null"}


def _type_name(tp: Any) -> str:
    """How an error names ``tp``: ``int | Literal["auto"]`` -> ``an integer or 'auto'`` (not ``Union``)."""
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        return " or ".join(_type_name(arg) for arg in typing.get_args(tp))
    if origin is typing.Literal:
        return " or ".join(map(repr, typing.get_args(tp)))
    if tp in _NAMES:
        return _NAMES[tp]
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def convert(tp: Any, value: Any, key_path: str) -> Any:
    """Convert ``value`` to the annotated type ``tp`` or raise a ConfigError naming ``key_path``."""
    if tp is Any:
        return value
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        for arg in args:
            if arg is type(None):
                continue
            try:
                return convert(arg, value, key_path)
            except ConfigError:
                pass  # the next member may take it; the error names them all
        raise ConfigError(f"{key_path}: expected {_type_name(tp)}, got {brief(value)}")
    if origin is typing.Literal:
        if value in args:
            return value
        raise ConfigError(f"{key_path}: expected one of {', '.join(map(repr, args))}, got {brief(value)}")
    if dataclasses.is_dataclass(tp):
        if isinstance(value, tp):
            return value
        if not isinstance(value, Mapping):
            raise ConfigError(f"{key_path}: expected a mapping, got {brief(value)}")
        return from_dict(tp, value, key_path)
    if origin in (list, tuple, typing.Sequence) or tp in (list, tuple):
        if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
            raise ConfigError(f"{key_path}: expected a list, got {brief(value)}")
        if origin is tuple and args and args[-1] is not Ellipsis:
            if len(args) != len(value):
                raise ConfigError(f"{key_path}: expected {len(args)} values, got {len(value)}")
            return tuple(convert(a, v, f"{key_path}[{i}]") for i, (a, v) in enumerate(zip(args, value)))
        item = args[0] if args else Any
        out = [convert(item, v, f"{key_path}[{i}]") for i, v in enumerate(value)]
        return tuple(out) if origin is tuple or tp is tuple else out
    if origin in (dict, Mapping) or tp is dict:
        if not isinstance(value, Mapping):
            raise ConfigError(f"{key_path}: expected a mapping, got {brief(value)}")
        vt = args[1] if len(args) == 2 else Any
        return {k: convert(vt, v, f"{key_path}.{k}") for k, v in value.items()}
    if tp is bool:
        if isinstance(value, bool):
            return value
        raise ConfigError(f"{key_path}: expected {_type_name(tp)}, got {brief(value)}")
    if tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        raise ConfigError(f"{key_path}: expected {_type_name(tp)}, got {brief(value)}")
    if tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            # PyYAML follows YAML 1.1, which reads `4e-4` (no dot) as a string; users mean a number.
            try:
                return float(value)
            except ValueError:
                pass
        raise ConfigError(f"{key_path}: expected {_type_name(tp)}, got {brief(value)}")
    if tp is str:
        if isinstance(value, str):
            return value
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)  # YAML reads `name: 001` as 1; a path or name is still meant
        raise ConfigError(f"{key_path}: expected {_type_name(tp)}, got {brief(value)}")
    if isinstance(tp, type) and isinstance(value, tp):
        return value
    raise ConfigError(f"{key_path}: expected {_type_name(tp)}, got {brief(value)}")


def from_dict(cls: type[T], data: Mapping[str, Any] | None, key_path: str = "") -> T:
    """Build dataclass ``cls`` from ``data``; missing keys keep their defaults.

    Raises:
        ConfigError: unknown key (with the valid keys and the closest match), wrong type, or a
            required field that is missing.
    """
    data = dict(data or {})
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    prefix = f"{key_path}." if key_path else ""
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        if key not in fields:
            close = difflib.get_close_matches(str(key), fields, n=1, cutoff=0.6)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            # the key as written, cut: YAML's `? key` form takes a key of any length
            raise ConfigError(f"{prefix}{shorten(str(key), 80)}: unknown key{hint}; valid keys: {', '.join(fields)}")
        kwargs[key] = convert(hints[key], value, f"{prefix}{key}")
    for name, f in fields.items():
        if name not in kwargs and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ConfigError(f"{prefix}{name}: required key is missing")
    try:
        return cls(**kwargs)
    except OptionError as exc:  # the config's own check: name the key where the user wrote it
        raise OptionError(exc.key, exc.problem, key_path) from None


def to_dict(obj: Any) -> Any:
    """Dataclass (possibly nested) -> plain YAML-serialisable data."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, (list, tuple)):
        return [to_dict(v) for v in obj]
    if isinstance(obj, Mapping):
        return {k: to_dict(v) for k, v in obj.items()}
    return obj
