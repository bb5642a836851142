"""The top-level experiment config: schema, YAML loading, command-line overrides.

``load_experiment(path, overrides)`` is the whole path from a YAML file plus ``key=value``
arguments to a validated :class:`ExperimentConfig`. Every component section is checked against
the selected registered class's ``Config`` here, before anything is built, so a typo such as
``model.sh_degre`` fails in a second instead of after the data set has loaded.

The returned config is *resolved*: default hooks and DI-engine shorthand keys are folded into
``hooks``, every section carries all its options, and ``exp_dir`` is filled in. Saving it as
``<exp_dir>/config.yaml`` and loading that file again gives the same config.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .. import writers as _builtin_writers  # noqa: F401 - registers the default writers
from ..config import OptionError, at_least, from_dict, to_dict
from ..errors import ConfigError, brief, shorten
from ..io.atomic import atomic_write_text
from ..registry import DATASETS, MODELS, RENDERERS, STRATEGIES, WRITERS
from . import hooks as _builtin_hooks  # noqa: F401 - registers the default hooks
from .hooks.resolve import DEFAULT_HOOKS, SHORTHANDS, hook_entries, resolve_hooks  # noqa: F401 - re-exported


@dataclass
class TrainerConfig:
    max_steps: int = 30_000
    val_interval: int = 1_000  # validate every N steps; 0 disables periodic validation
    batch_size: int = 1  # views per optimizer step
    test_at_end: bool = True  # run test() on the test split after training
    val_images: int = 2  # how many validation views are sent to the writers as images
    save_test_renders: bool = True  # PNGs under <exp_dir>/renders/test/{render,gt}/
    # Each training step renders on a random colour (gsplat's `random_bkgd`, splatfacto's "random"):
    # a photo's pixels are then only matched by covering them, never by the background showing
    # through. Evaluation keeps the data set's background.
    random_background: bool = False

    def __post_init__(self) -> None:
        at_least(self, 0, "max_steps", "val_interval", "val_images", home="trainer")
        at_least(self, 1, "batch_size", home="trainer")


def _default_writers() -> list[dict[str, Any]]:
    # No ConsoleWriter by default: LogHook already shows progress, printing every scalar again
    # would bury it.
    return [{"type": "TensorboardWriter"}, {"type": "JsonlWriter"}]


NAME_BYTES = 255


@dataclass(kw_only=True)
class ExperimentConfig:
    name: str = "experiment"
    output_dir: str = "outputs"
    exp_dir: str | None = None  # default: <output_dir>/<name>
    seed: int = 0
    device: str = "auto"  # "auto" -> cuda if available else cpu; or any torch device string
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    # Component sections: a mapping {type, **options} as written; resolve() turns each into a
    # registry.Component (still a Mapping) holding the class's checked Config.
    dataset: Mapping[str, Any]
    model: Mapping[str, Any] = field(default_factory=lambda: {"type": "GaussianModel"})
    renderer: Mapping[str, Any] = field(default_factory=lambda: {"type": "GaussianRenderer"})
    strategy: Mapping[str, Any] | None = None
    # A list of {type, ...} entries, or a mapping {HookType: {options}} (Pointrix / MMEngine
    # default_hooks style); resolves to the list form either way. Checked by hook_entries, which
    # names the entry at fault (a union type here would name its members, not the entry).
    hooks: Any = field(default_factory=list)
    writers: list[Mapping[str, Any]] = field(default_factory=_default_writers)
    # DI-engine shorthand keys; folded into `hooks` (or the run's start) when the config resolves.
    save_ckpt_after_iter: int | None = None  # -> CheckPointHook.interval
    save_ckpt_after_run: bool | None = None  # -> CheckPointHook.save_last
    log_show_after_iter: int | None = None  # -> LogHook.interval
    load_ckpt_before_run: str | None = None  # checkpoint loaded (full resume) after before_run

    def __post_init__(self) -> None:
        # numpy and torch seed generators take 0 .. 2**32 - 1; outside it they fail deep in the run
        if not 0 <= self.seed < 2**32:
            raise OptionError("seed", f"must be in 0 .. 2**32 - 1, got {self.seed}")
        # name becomes a folder name: most file systems stop at 255 bytes (a longer one fails at the first write)
        if len(self.name.encode()) > NAME_BYTES:
            raise OptionError("name", f"is {len(self.name.encode())} bytes; a folder name takes at most {NAME_BYTES}")


class DuplicateKeyError(yaml.MarkedYAMLError):
    """A key given twice in one YAML mapping."""


MAX_CONFIG_BYTES = 1 << 20  # the shipped configs are a few KB; a larger file is the wrong file, or an attack
MAX_CONFIG_VALUES = 100_000  # values after YAML aliases expand: a 300-byte "billion laughs" file is billions
_MERGE = "tag:yaml.org,2002:merge"


class _TooManyValues(Exception):
    """Merge keys would copy more than MAX_CONFIG_VALUES pairs (raised inside the loader, reported by _load_yaml)."""


class _StrictLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # libyaml's parser where present: fast, safe
    """``yaml.SafeLoader`` (libyaml's ``CSafeLoader`` where installed) that refuses a key repeated in one mapping.

    Plain YAML keeps the last value, so a second ``LogHook:`` under ``hooks:`` would silently
    replace the first; here it is an error naming the key and its line.
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._merged = 0  # pairs merge keys copied so far, over the whole document
        self._flattening: set[int] = set()  # mapping nodes whose merges are being counted (a mapping can merge itself)

    def flatten_mapping(self, node: yaml.MappingNode) -> None:
        # `<<: *base` copies base's pairs into this mapping, and PyYAML before 6.0.2 copies repeats too
        # (`<<: [*a, *a, *a]`), so merges of merges grow geometrically. Count what would be copied, the merged
        # mappings flattened first, before anything is copied.
        if id(node) in self._flattening:
            return
        self._flattening.add(id(node))
        try:
            for key_node, value_node in node.value:
                if key_node.tag != _MERGE:
                    continue
                merged = value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node]
                for sub in merged:
                    if isinstance(sub, yaml.MappingNode):
                        self.flatten_mapping(sub)
                        self._merged += len(sub.value)
                        if self._merged > MAX_CONFIG_VALUES:
                            raise _TooManyValues
            super().flatten_mapping(node)
        finally:
            self._flattening.discard(id(node))

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep)
        except ValueError as exc:  # a date like 2001-13-01, an integer of over 4300 digits: the line, not a traceback
            raise yaml.constructor.ConstructorError(
                problem=f"cannot read {shorten(repr(node.value), 60)} ({str(exc).split(';')[0]})",
                problem_mark=node.start_mark,
            ) from None

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen = set()
        for key_node, _ in node.value:
            if key_node.tag == _MERGE:  # `<<: *base` merges, later keys override it
                continue
            key = self.construct_object(key_node, deep=True)
            if key in seen:
                raise DuplicateKeyError(problem=f"duplicate key {brief(key)}", problem_mark=key_node.start_mark)
            try:
                seen.add(key)
            except TypeError:  # an unhashable key: let the base class report it
                pass
        return super().construct_mapping(node, deep)


def read_yaml(path: str | Path) -> dict[str, Any]:
    """Read a YAML mapping; a missing file or bad YAML is a one-line ConfigError naming the file."""
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > MAX_CONFIG_BYTES:
            raise ConfigError(
                f"{path}: {size:,} bytes; a config is at most {MAX_CONFIG_BYTES:,} (is it the right file?)"
            )
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not a text file (a config is UTF-8 YAML)") from None
    data = _load_yaml(text, str(path))
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level, got {type(data).__name__}")
    return data


class _InvalidYaml(ConfigError):
    """Text that is not YAML (as opposed to YAML refused for what it holds)."""


def _load_yaml(text: str, where: str) -> Any:
    """One YAML document, safely: no Python tags, no repeated key, no alias expansion past
    :data:`MAX_CONFIG_VALUES` values (``where`` names the file or override in the one-line error)."""
    try:
        # What yaml.load does, spelt out so the loader is visibly the safe one (tests/reliability/test_safe_loading.py).
        loader = _StrictLoader(text)
        try:
            data = loader.get_single_data()
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f":{mark.line + 1}" if mark is not None and not where.startswith("override") else ""
        problem = shorten(str(getattr(exc, "problem", None) or exc), 200)  # a problem can quote a tag of megabytes
        raise _InvalidYaml(f"{where}{at}: invalid YAML ({problem})") from None
    except _TooManyValues:
        data = _TooManyValues  # reported below, with the expansion the count finds
    except RecursionError:  # the pure-Python parser (no libyaml) has no nesting limit of its own
        raise _InvalidYaml(f"{where}: invalid YAML (nested too deeply)") from None
    # Aliases share one object, so loading is cheap; what reads the config (copies, dumps, messages) expands
    # them. Count values as expanded, without a memo, and stop at the limit.
    stack, seen = [data], 0
    while stack:
        node = stack.pop()
        seen += 1
        if seen > MAX_CONFIG_VALUES or node is _TooManyValues:
            raise ConfigError(
                f"{where}: expands to more than {MAX_CONFIG_VALUES:,} values (YAML aliases repeating aliases?)"
            )
        if isinstance(node, dict):
            stack.extend(node.values())
            stack.extend(node.keys())
        elif isinstance(node, list):
            stack.extend(node)
    return data


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply ``a.b.c=value`` overrides to a copy of ``data``; values are parsed as YAML scalars.

    A numeric part indexes a list (``hooks.0.interval=5``). Missing intermediate mappings are
    created so the schema check, not this function, reports an unknown key with its valid keys.
    """
    data = copy.deepcopy(data)
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"override {brief(item)}: expected key=value, e.g. trainer.max_steps=500")
        name = shorten(key, 80)  # the key as the messages quote it
        if len(raw) > MAX_CONFIG_BYTES:
            raise ConfigError(f"{name}: override value of {len(raw):,} characters; at most {MAX_CONFIG_BYTES:,}")
        try:
            value = _load_yaml(raw, f"override {name}") if raw.strip() else None
        except _InvalidYaml:
            raise ConfigError(f"{name}: cannot parse override value {brief(raw)} as YAML") from None
        parts = key.split(".")
        node: Any = data
        for depth, part in enumerate(parts):
            path = ".".join(parts[: depth + 1])
            last = depth == len(parts) - 1
            if isinstance(node, list):
                if not part.isdigit() or int(part) >= len(node):
                    raise ConfigError(
                        f"{shorten(path, 80)}: no list item {brief(part)} (the list has {len(node)} items)"
                    )
                if last:
                    node[int(part)] = value
                else:
                    node = node[int(part)]
            elif isinstance(node, dict):
                if last:
                    node[part] = value
                else:
                    if node.get(part) is None:
                        node[part] = {}
                    node = node[part]
            else:
                raise ConfigError(f"{shorten(path, 80)}: cannot set a key inside {type(node).__name__} {brief(node)}")
    return data


@functools.cache
def resolve_device(device: str) -> str:
    """``"auto"`` -> ``"cuda"`` when available else ``"cpu"``; other strings are checked by torch.

    Cached: the config check, the command and the trainer ask for the same run's device, and
    CUDA is probed once per process.
    """
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    try:
        parsed = torch.device(device)
    except (RuntimeError, ValueError):
        raise ConfigError(f"device: invalid torch device {brief(device)} (use auto, cpu, cuda, cuda:1, ...)") from None
    if parsed.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"device: {brief(device)} requested but torch finds no CUDA device (use auto or cpu)")
    return device


def resolve(cfg: ExperimentConfig) -> ExperimentConfig:
    """Validate every component section against its registry and fill in derived values.

    Each section becomes a :class:`~pointrix_lite.registry.Component` holding its class's checked
    ``Config``; building the component later passes that object on without converting it again.
    """
    from .. import device_policy  # imports torch: only once a config is resolved, as resolve_device

    device = resolve_device(cfg.device)  # a CUDA request on a machine without CUDA fails here
    if cfg.renderer.get("backend") == "gsplat" and not device_policy.gsplat_runs_on(device):
        raise ConfigError(
            f"renderer.backend: 'gsplat' runs on CUDA only, but device is {device!r}; use auto, native or torch"
        )
    return dataclasses.replace(
        cfg,
        exp_dir=cfg.exp_dir or str(Path(cfg.output_dir) / cfg.name),
        dataset=DATASETS.resolve(cfg.dataset, "dataset"),
        model=MODELS.resolve(cfg.model, "model"),
        renderer=RENDERERS.resolve(cfg.renderer, "renderer"),
        strategy=STRATEGIES.resolve(cfg.strategy, "strategy") if cfg.strategy is not None else None,
        writers=[WRITERS.resolve(w, f"writers[{i}]") for i, w in enumerate(cfg.writers)],
        hooks=resolve_hooks(cfg.hooks, {short: getattr(cfg, short) for short in SHORTHANDS}),
        # Folded into hooks above; cleared so the saved config.yaml does not apply them twice.
        save_ckpt_after_iter=None,
        save_ckpt_after_run=None,
        log_show_after_iter=None,
    )


def load_experiment(path: str | Path | None, overrides: list[str] = (), data: dict | None = None) -> ExperimentConfig:
    """YAML file (or an already-read mapping) + ``key=value`` overrides -> resolved config.

    The registries must already hold the components the config names (call
    ``pointrix_lite.components.import_all()`` and load plugins first).
    """
    raw = read_yaml(path) if path is not None else dict(data or {})
    raw = apply_overrides(raw, list(overrides))
    return resolve(from_dict(ExperimentConfig, raw))


def dump_config(cfg: ExperimentConfig) -> str:
    return yaml.safe_dump(to_dict(cfg), sort_keys=False)


def save_config(cfg: ExperimentConfig, exp_dir: str | Path) -> Path:
    """Write the resolved config to ``<exp_dir>/config.yaml`` (re-loadable with load_experiment)."""
    path = Path(exp_dir) / "config.yaml"
    atomic_write_text(path, dump_config(cfg))  # rewritten on resume: never half a config
    return path
