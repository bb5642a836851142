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
from collections.abc import Callable, Iterator, Mapping
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

    def build(self, cfg: Component | Mapping[str, Any], key_path: str = "", **extra: Any) -> Any:
        """Instantiate the selected class with its typed ``Config``.

        Args:
            cfg: A :class:`Component` (from a resolved experiment config: its ``Config`` was
                checked once, while the config loaded, and is passed on as it is), or a mapping
                with ``type`` and the component's options (checked here).
            key_path: Where ``cfg`` sits in the whole config (``"hooks[2]"``), for error messages.
            **extra: Runtime objects the component needs (trainer, dataset, ...), passed as keywords.
        """
        component = cfg if isinstance(cfg, Component) else self.resolve(cfg, key_path)
        cls = self.get(component.type, f"{key_path or self.name}.type")
        return cls(**extra) if component.config is None else cls(component.config, **extra)

    def resolve(self, cfg: Mapping[str, Any], key_path: str = "", **extra: Any) -> Component:
        """Check ``cfg`` against the selected class's ``Config`` without building it.

        ``extra``: engine keys kept beside the options (a hook's ``priority`` and ``enabled``).

        Raises:
            ConfigError: no ``type``, an unknown type, an unknown option or a bad value.
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
            return Component(cfg["type"], None, extra)
        return Component(cfg["type"], from_dict(config_cls, options, where), extra)


class Component(Mapping[str, Any]):
    """A component chosen in YAML: its registered ``type`` and its checked ``Config`` object.

    What a resolved experiment config holds for each section: the ``Config`` is built once, while
    the config loads, and :meth:`Registry.build` hands that same object to the class. It reads as
    the mapping it came from (``type``, then ``extra``, then every option), so ``to_dict`` writes
    the same ``config.yaml`` and code that reads ``cfg.dataset["data_path"]`` keeps working.
    """

    __slots__ = ("type", "config", "extra")

    def __init__(self, type: str, config: Any, extra: Mapping[str, Any] | None = None) -> None:
        self.type = type
        self.config = config
        self.extra = dict(extra or {})

    def _fields(self) -> tuple[str, ...]:
        import dataclasses

        return tuple(f.name for f in dataclasses.fields(self.config)) if self.config is not None else ()

    def __getitem__(self, key: str) -> Any:
        if key == "type":
            return self.type
        if key in self.extra:
            return self.extra[key]
        if key in self._fields():
            return getattr(self.config, key)
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return iter(("type", *self.extra, *self._fields()))

    def __len__(self) -> int:
        return 1 + len(self.extra) + len(self._fields())

    def __repr__(self) -> str:
        return f"Component({dict(self)!r})"

    def replace(self, **options: Any) -> Component:
        """A copy with ``options`` changed; the ``Config`` checks the new values as at load.

        Raises:
            ConfigError: an option the class does not have, or a value its ``Config`` refuses.
        """
        import dataclasses

        unknown = [k for k in options if k not in self._fields()]
        if unknown:
            raise ConfigError(f"{self.type} has no option {', '.join(unknown)}")
        return Component(self.type, dataclasses.replace(self.config, **options), self.extra)


# One registry per kind of component; each lives here so a newcomer finds all of them at once.
HOOKS = Registry("hook")
WRITERS = Registry("writer")
DATASETS = Registry("dataset")
RENDERERS = Registry("renderer")
MODELS = Registry("model")
STRATEGIES = Registry("strategy")
