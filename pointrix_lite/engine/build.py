"""Building a run's components from its resolved config.

What rendering a model needs (data set, model, renderer: :func:`build_scene`) is built apart from
what only training needs (optimizer, strategy, writers, hooks: :mod:`engine.trainer`), so
``render.py``, ``view.py`` and the benchmarks get a scene without an optimizer or a strategy.
Each section arrives as a :class:`~pointrix_lite.registry.Component` whose ``Config`` was checked
once, when the config loaded; the registries pass that object on.
"""

from __future__ import annotations

import inspect
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .. import device_policy
from ..data import cameras
from ..data.orientation import save_orientation
from ..errors import ConfigError
from ..registry import DATASETS, MODELS, RENDERERS
from .experiment import ExperimentConfig


@dataclass
class Scene:
    """A model on a data set, and the renderer that draws it (all on ``device``)."""

    dataset: Any
    model: Any
    renderer: Any
    device: torch.device


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)  # also seeds every CUDA device


def _dataset_kw(dataset_cfg: Any, device: torch.device) -> dict[str, Any]:
    """``device=`` for a dataset class that takes it (the built-in ones: ``scale: auto`` picks the
    training resolution by device, ``data/resolution.py``); a custom dataset without it is built as before."""
    try:
        cls = DATASETS.get(dataset_cfg.get("type", ""), "dataset.type")
        takes = "device" in inspect.signature(cls).parameters
    except (ConfigError, TypeError, ValueError, AttributeError):  # let build() report a bad type
        return {}
    return {"device": device.type} if takes else {}


def build_scene(
    cfg: ExperimentConfig,
    device: torch.device,
    exp_dir: Path | None = None,
    announce: Callable[[str], None] | None = None,
    after_dataset: Callable[[Any], None] | None = None,
    model: Any | None = None,
) -> Scene:
    """Seed, then build the data set, the model on it and the renderer, in that order.

    1. seeds (python, numpy, torch) from ``cfg.seed``
    2. ``DATASETS.build(cfg.dataset, device=...)``; its training images pinned when training on
       CUDA (``device_policy.pin_host_images``); a turned data set (``dataset.orientation``)
       saves its rotation into ``exp_dir`` (when given)
    3. ``model.seeding`` (when the model's config has it) adds points to the data set's cloud
       (``data/seeding``; kept in ``exp_dir`` for a resumed run), then
       ``MODELS.build(cfg.model, dataset=dataset).to(device)``
    4. ``RENDERERS.build(cfg.renderer)`` (moved to ``device`` if a Module), then
       ``renderer.prepare(device, announce=announce)`` if it has one (the native CPU build)

    Args:
        exp_dir: Where the data set's rotation goes; None (another rank, or a caller that keeps
            no folder): not written.
        after_dataset: Called with the data set before the model is built (the trainer builds its
            data pipeline there, keeping the order in which a run draws random numbers).
        model: A model to use instead of building ``cfg.model`` (one read from a PLY file).
    """
    seed_everything(cfg.seed)
    dataset = DATASETS.build(cfg.dataset, "dataset", **_dataset_kw(cfg.dataset, device))
    turned = getattr(dataset, "world_rotation", None)  # dataset.orientation
    if turned is not None and exp_dir is not None:
        save_orientation(exp_dir, turned)
    if device_policy.pin_host_images(device) and hasattr(dataset, "train_views"):
        cameras.pin_images(dataset.train_views)
    if after_dataset is not None:
        after_dataset(dataset)
    if model is None:
        _seed(cfg, dataset, exp_dir)
    model = (MODELS.build(cfg.model, "model", dataset=dataset) if model is None else model).to(device)
    renderer = RENDERERS.build(cfg.renderer, "renderer")
    if isinstance(renderer, torch.nn.Module):
        renderer = renderer.to(device)
    prepare = getattr(renderer, "prepare", None)
    if callable(prepare):  # e.g. the native CPU build: here, not in the first step's train_seconds
        prepare(device, announce=announce)
    return Scene(dataset, model, renderer, device)


def _seed(cfg: ExperimentConfig, dataset: Any, exp_dir: Path | None) -> None:
    """Apply ``model.seeding`` to ``dataset.point_cloud`` (a model type without the option: nothing)."""
    from ..config import from_dict
    from ..data.seeding import SeedingConfig, seeded_cloud
    from ..data.seeding.spread import auto_views

    if cfg.model.get("init_ply"):  # the model starts from a PLY, not from the data set's points
        return
    seeding = cfg.model.get("seeding")
    if isinstance(seeding, Mapping):  # a plain dict config written in Python
        seeding = from_dict(SeedingConfig, seeding, "model.seeding")
    if isinstance(seeding, SeedingConfig) and seeding.enabled and getattr(dataset, "point_cloud", None) is not None:
        if seeding.mvs_views == "auto":  # resolved here, where the run's length is known; the cache keys the number
            seeding = replace(seeding, mvs_views=auto_views(cfg.trainer.max_steps))
        dataset.point_cloud = seeded_cloud(dataset, seeding, int(cfg.model.get("seed", 0)), exp_dir)
