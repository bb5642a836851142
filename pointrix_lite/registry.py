"""Name -> class registries: the only way a YAML config chooses code.

A config names a registered type (``type: LogHook``); it never names a module path, so loading
a config can't import arbitrary code. User code reaches a registry only through an explicit
``--plugin file.py`` on the command line, which imports the file before the config is built.

Each registered class declares its options as a dataclass named ``Config``; :meth:`Registry.build`
turns the mapping from YAML into that dataclass (strictly: unknown keys and wrong types are
errors naming the key path) and calls ``cls(config, **extra)``.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from .errors import ConfigError

T = TypeVar("T", bound=type)


class DuplicateNameError(ConfigError, KeyError):
    """A second class registered under a taken name (a KeyError too, as for any mapping)."""

    def __str__(self) -> str:  # KeyError's str() would wrap the message in quotes
        return ConfigError.__str__(self)


class Registry:
    """A named table of classes that configs can select by name.

    Args:
        name: What is registered, used in error messages (``"hook"``, ``"writer"``, ...).
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self._table: dict[str, type] = {}

    def register(self, name: str | None = None) -> Callable[[T], T]:
        """Class decorator: ``@REG.register()`` uses the class name, ``@REG.register("Alias")`` an alias.

        Raises:
            DuplicateNameError: the name is already taken (two plugins silently shadowing each other
                would make a config mean different things depending on import order).
        """

        def deco(cls: T) -> T:
            key = name or cls.__name__
            if key in self._table:
                raise DuplicateNameError(
                    f"{self.name} {key!r} is already registered (by {self._table[key].__module__}); "
                    f"register yours under another name, e.g. @register({('My' + key)!r})"
                )
            self._table[key] = cls
            return cls

        return deco

    def names(self) -> list[str]:
        return sorted(self._table)

    def __contains__(self, name: object) -> bool:
        return name in self._table

    def get(self, name: str, key_path: str = "type") -> type:
        """Look a class up by name.

        Raises:
            ConfigError: unknown name; the message lists the registered names and the closest match.
        """
        if name in self._table:
            return self._table[name]
        close = difflib.get_close_matches(str(name), self._table, n=1, cutoff=0.5)
        hint = f" did you mean {close[0]!r}?" if close else ""
        raise ConfigError(
            f"{key_path}: unknown {self.name} {name!r};{hint} registered: {', '.join(self.names()) or '(none)'}"
        )

    def build(self, cfg: Mapping[str, Any], key_path: str = "", **extra: Any) -> Any:
        """Instantiate ``cfg["type"]`` with its typed ``Config`` built from the other keys.

        Args:
            cfg: Mapping with ``type`` and the component's options.
            key_path: Where ``cfg`` sits in the whole config (``"hooks[2]"``), for error messages.
            **extra: Runtime objects the component needs (trainer, dataset, ...), passed as keywords.
        """
        from .config import from_dict  # local: config imports nothing from here, keep it that way

        where = key_path or self.name
        if not isinstance(cfg, Mapping):
            raise ConfigError(f"{where}: expected a mapping with 'type', got {type(cfg).__name__}")
        if "type" not in cfg:
            raise ConfigError(f"{where}.type: missing; registered {self.name}s: {', '.join(self.names())}")
        cls = self.get(cfg["type"], f"{where}.type")
        options = {k: v for k, v in cfg.items() if k != "type"}
        config_cls = getattr(cls, "Config", None)
        if config_cls is None:
            if options:
                raise ConfigError(f"{where}: {cfg['type']} takes no options, got {', '.join(options)}")
            return cls(**extra)
        return cls(from_dict(config_cls, options, where), **extra)

    def config_of(self, cfg: Mapping[str, Any], key_path: str = "") -> Any:
        """Validate ``cfg`` against the selected class's ``Config`` without building it."""
        from .config import from_dict

        where = key_path or self.name
        if not isinstance(cfg, Mapping) or "type" not in cfg:
            raise ConfigError(f"{where}.type: missing; registered {self.name}s: {', '.join(self.names())}")
        cls = self.get(cfg["type"], f"{where}.type")
        config_cls = getattr(cls, "Config", None)
        options = {k: v for k, v in cfg.items() if k != "type"}
        return from_dict(config_cls, options, where) if config_cls else None


# One registry per kind of component; each lives here so a newcomer finds all of them at once.
HOOKS = Registry("hook")
WRITERS = Registry("writer")
DATASETS = Registry("dataset")
RENDERERS = Registry("renderer")
MODELS = Registry("model")
STRATEGIES = Registry("strategy")
