"""``PointrixLite``: the nerfbaselines method (its ``Method`` protocol, nerfbaselines 1.2).

nerfbaselines owns the data, the step loop and the evaluation; this class trains with the project's
own trainer in between, so a run here trains exactly as ``scripts/train.py`` does on the same views:

- ``__init__(train_dataset=...)``: the data set goes into a COLMAP scene folder (``scene.py``) that a
  :class:`~pointrix_lite.engine.trainer.DefaultTrainer` reads with the recipe's data options; the
  recipe is ``configs/colmap_cpu.yaml`` or the file ``--set config=PATH`` names, other ``--set key=value``
  pairs are the recipe's overrides (``--set trainer.max_steps=7000``);
- ``train_iteration(step)``: one step of the trainer's own loop (``engine.loop.steps``: the same hooks,
  schedule and random draws);
- ``render(camera)``: the test camera, turned into the scene's frame when the recipe turned the scene
  (``dataset.orientation``), rendered on the data set's background;
- ``save(path)``: the trainer's checkpoint, its config, the scene's rotation and the scene folder (its
  images hard-linked where the file system allows): ``__init__(checkpoint=path)`` renders from it alone.

nerfbaselines undistorts other camera models to pinhole before the method sees them (the method says
it takes pinhole cameras only), and scores the renders with its own metrics.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import weakref
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ...components import import_all
from ...config import to_dict
from ...data.cameras import Camera
from ...data.orientation import ORIENTATION_FILE, read_orientation
from ...engine import checkpoint as ckpt_io
from ...engine import loop
from ...engine.evaluator import Evaluator
from ...engine.experiment import apply_overrides, load_experiment, read_yaml, save_config
from ...engine.trainer import DefaultTrainer
from ...errors import ConfigError
from .scene import white_background, write_scene

METHOD_ID = "pointrix-lite"
RECIPE = "configs/colmap_cpu.yaml"  # the shipped CPU recipe, beside the package in a source checkout
CHECKPOINT = "checkpoint.pt"
CONFIG = "config.yaml"
SCENE = "scene"
# What the method's own run would write or compute that nerfbaselines does itself (its logs, progress
# bar, evaluation), or that would only fill a folder deleted at the end.
METHOD_OVERRIDES = ["writers=[]", "trainer.val_interval=0", "trainer.test_at_end=false", "log_show_after_iter=0"]


def recipe_path(overrides: Mapping[str, Any]) -> Path:
    """The YAML the run starts from: ``config`` among the overrides, else the shipped CPU recipe.

    A relative path is looked up in the working directory, then in the source checkout the package is in
    (nerfbaselines may run the method elsewhere): ``--set config=configs/demo_colmap.yaml`` works from anywhere.
    """
    checkout = Path(__file__).resolve().parents[3]
    given = Path(str(overrides.get("config") or RECIPE))
    for path in (given,) if given.is_absolute() else (Path.cwd() / given, checkout / given):
        if path.is_file():
            return path
    raise ConfigError(
        f"config: {given} not found (nerfbaselines --set config=PATH names a pointrix_lite YAML; "
        f"the default is {RECIPE} of a source checkout)"
    )


def method_config(overrides: Mapping[str, Any], scene: Path, white: bool) -> dict[str, Any]:
    """The recipe as a mapping, with ``overrides`` applied and its data set pointed at ``scene``.

    The recipe's data options stay (``scale``, ``orientation``, ``max_points``, its background: white, which
    ``white`` also turns on: nerfbaselines' white ``background_color``, or else the recipe's
    ``mean_background``); its split is nerfbaselines' (``eval: false``: every view of ``scene`` trains). On
    white, training keeps white too (``trainer.random_background`` off): such scenes' images are RGBA,
    composited on white, which a random training background would contradict.
    """
    data = read_yaml(recipe_path(overrides))
    data = apply_overrides(data, [f"{k}={v}" for k, v in overrides.items() if k != "config"])
    dataset = dict(data.get("dataset") or {})
    white = white or bool(dataset.get("white_background", False))
    keep = ("scale", "upsample", "max_points", "seed", "orientation", *(() if white else ("mean_background",)))
    data["dataset"] = {
        "type": "ColmapDataset",
        "data_path": str(scene),
        "white_background": white,
        "eval": False,
        **{k: dataset[k] for k in keep if k in dataset},
    }
    if white:
        data["trainer"] = {**(data.get("trainer") or {}), "random_background": False}
    return apply_overrides(data, METHOD_OVERRIDES)


def link_or_copy(src: str, dst: str) -> None:
    """A hard link (no second copy of the images) where the file system allows one, else a copy."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def pinhole_camera(cameras: Any, rotation: np.ndarray) -> Camera:
    """nerfbaselines' single camera (``poses`` [3, 4] camera-to-world, OpenCV axes) as a :class:`Camera` in
    the model's frame (model point = ``rotation`` @ data set point)."""
    c2w = np.vstack([np.asarray(cameras.poses, np.float64).reshape(3, 4), [0.0, 0.0, 0.0, 1.0]])
    turn = np.eye(4)
    turn[:3, :3] = np.asarray(rotation, np.float64).T
    viewmat = np.linalg.inv(c2w) @ turn
    fx, fy, cx, cy = (float(v) for v in np.asarray(cameras.intrinsics).reshape(4))
    w, h = (int(v) for v in np.asarray(cameras.image_sizes).reshape(2))
    return Camera(fx, fy, cx, cy, w, h, torch.from_numpy(viewmat).float())


class PointrixLite:
    """nerfbaselines' ``Method`` protocol over the project's trainer (see the module docstring).

    Args:
        checkpoint: A folder written by :meth:`save`: render from it (no training).
        train_dataset: nerfbaselines' training data set: train on it.
        config_overrides: ``--set`` pairs: ``config`` (a recipe YAML) and the recipe's ``key=value`` overrides.
    """

    def __init__(
        self,
        *,
        checkpoint: str | None = None,
        train_dataset: Mapping[str, Any] | None = None,
        config_overrides: Mapping[str, Any] | None = None,
    ) -> None:
        import_all()
        self._work = Path(tempfile.mkdtemp(prefix="pointrix-lite-"))
        weakref.finalize(self, shutil.rmtree, self._work, True)
        self.checkpoint = checkpoint
        self._steps = None
        if checkpoint is not None:
            self._load(Path(checkpoint))
        elif train_dataset is not None:
            scene = write_scene(train_dataset, self._work / SCENE)
            data = method_config(dict(config_overrides or {}), scene, white_background(train_dataset))
            self.trainer = DefaultTrainer(
                load_experiment(None, data=data), self._work / "run", data.get("device", "auto")
            )
            self.trainer.call_hook("before_run")
            self.trainer.call_hook("before_train")
            self._steps = loop.steps(self.trainer)
        else:
            raise ValueError("PointrixLite needs a checkpoint or a train_dataset")
        self.rotation = getattr(self.trainer.dataset, "world_rotation", np.eye(3))

    def _load(self, folder: Path) -> None:
        """An evaluator on the saved scene, its model from the saved checkpoint, the saved rotation."""
        data = read_yaml(folder / CONFIG)
        # The saved model is already seeded and turned: build neither again (the state dict replaces them).
        data = apply_overrides(
            data,
            [
                f"dataset.data_path={folder / SCENE}",
                "dataset.orientation=none",
                "model.seeding.mvs=false",
                "model.seeding.sky=0",
            ],
        )
        self.trainer = Evaluator(load_experiment(None, data=data), self._work / "run", data.get("device", "auto"))
        self.trainer.load_checkpoint(folder / CHECKPOINT)
        rotation = read_orientation(folder / ORIENTATION_FILE)
        self.trainer.dataset.world_rotation = np.eye(3) if rotation is None else rotation

    @classmethod
    def get_method_info(cls) -> dict[str, Any]:
        """What nerfbaselines prepares for the method: colours and SfM points, pinhole cameras."""
        return {
            "method_id": METHOD_ID,
            "required_features": frozenset(("color", "points3D_xyz", "points3D_rgb")),
            "supported_camera_models": frozenset(("pinhole",)),
            "supported_outputs": ("color",),
            "can_resume_training": False,
        }

    def get_info(self) -> dict[str, Any]:
        """The run's length and the config it trains with (nerfbaselines' ``ModelInfo``)."""
        cfg = self.trainer.cfg
        return {
            **self.get_method_info(),
            "num_iterations": cfg.trainer.max_steps,
            "loaded_step": self.trainer.global_step if self.checkpoint is not None else None,
            "loaded_checkpoint": self.checkpoint,
            "batch_size": cfg.trainer.batch_size,
            "hparams": to_dict(cfg),
        }

    def train_iteration(self, step: int) -> dict[str, float]:
        """One training step (``step`` is the trainer's own ``global_step``); its loss and Gaussian count."""
        if self._steps is None:
            raise RuntimeError("PointrixLite: loaded from a checkpoint, it renders only (no train_dataset)")
        if step != self.trainer.global_step:
            raise RuntimeError(f"PointrixLite: asked for step {step}, the trainer is at {self.trainer.global_step}")
        loss_dict = next(self._steps, None)
        if loss_dict is None:  # past trainer.max_steps: nothing left to train
            return {}
        out = {k: float(v) for k, v in loss_dict.items() if torch.is_tensor(v) and v.numel() == 1}
        out["num_gaussians"] = float(getattr(self.trainer.model, "num_gaussians", 0))
        return out

    @torch.no_grad()
    def render(self, camera: Any, *, options: Mapping[str, Any] | None = None) -> dict[str, np.ndarray]:
        """``{"color": [H, W, 3] float32 in 0..1}`` of nerfbaselines' single ``camera``."""
        del options  # color is the one output; embeddings are not used
        trainer = self.trainer
        was_training = trainer.model.training
        trainer.model.eval()
        try:
            cam = pinhole_camera(camera, self.rotation)
            out = trainer.renderer(trainer.model, [cam], trainer.dataset.background)
        finally:
            trainer.model.train(was_training)
        return {"color": out["rgb"][0].clamp(0, 1).float().cpu().numpy()}

    def save(self, path: str) -> None:
        """Write what :meth:`__init__` (``checkpoint=path``) renders from into folder ``path``."""
        out = Path(path)
        out.mkdir(parents=True, exist_ok=True)
        if self._steps is None:  # loaded from a checkpoint folder: nothing changed since, copy it
            if Path(self.checkpoint).resolve() != out.resolve():
                shutil.copytree(self.checkpoint, out, copy_function=link_or_copy, dirs_exist_ok=True)
            return
        saved = self.trainer.save_checkpoint(ckpt_io.checkpoint_name(self.trainer.global_step), update_latest=False)
        shutil.copy2(saved, out / CHECKPOINT)
        save_config(self.trainer.cfg, out)
        orientation = self.trainer.exp_dir / ORIENTATION_FILE
        if orientation.is_file():
            shutil.copy2(orientation, out / ORIENTATION_FILE)
        src = Path(self.trainer.cfg.dataset["data_path"])
        if src.resolve() != (out / SCENE).resolve():
            shutil.rmtree(out / SCENE, ignore_errors=True)
            shutil.copytree(src, out / SCENE, copy_function=link_or_copy)
