"""Toy dataset / model / renderer / strategy for the engine tests, loaded as a plugin file.

Tests load this file with ``pointrix_lite.cli.plugins.load_plugin`` (in-process) or
``--plugin`` (CLI subprocess) -- exactly the user workflow -- so it is never imported by module
name and never registers twice.

The "scene" is one small RGB image seen by every camera; the model is a grid of colour logits
(one "Gaussian" per pixel, parameter group named ``means`` like the real model so LogHook finds
its learning rate); the renderer returns ``sigmoid(logits)`` per camera. Fitting it is a real
optimisation whose loss must go down.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from pointrix_lite.data.cameras import Camera, View
from pointrix_lite.registry import DATASETS, MODELS, RENDERERS, STRATEGIES


def target_image(size: int) -> torch.Tensor:
    """[size, size, 3] uint8 smooth colour pattern."""
    y, x = torch.meshgrid(torch.linspace(0, 1, size), torch.linspace(0, 1, size), indexing="ij")
    img = torch.stack([x, y, 0.5 + 0.5 * torch.sin(6.0 * x * y)], dim=-1)
    return (img * 255).round().to(torch.uint8)


@DATASETS.register()
class ToyDataset:
    @dataclass
    class Config:
        num_train: int = 4
        num_val: int = 2
        num_test: int = 2
        size: int = 8

    def __init__(self, config: Config) -> None:
        image = target_image(config.size)

        def view(i: int, split: str) -> View:
            viewmat = torch.eye(4)
            viewmat[0, 3] = 0.1 * i  # distinct cameras; the toy renderer ignores them
            cam = Camera(
                fx=10.0,
                fy=10.0,
                cx=config.size / 2,
                cy=config.size / 2,
                width=config.size,
                height=config.size,
                viewmat=viewmat,
                name=f"{split}_{i:03d}",
            )
            return View(camera=cam, image=image.clone(), name=f"{split}_{i:03d}", index=i)

        self.train_views = [view(i, "train") for i in range(config.num_train)]
        self.val_views = [view(i, "val") for i in range(config.num_val)]
        self.test_views = [view(i, "test") for i in range(config.num_test)]
        self.point_cloud = None
        self.scene_extent = 1.0
        self.background = (0.0, 0.0, 0.0)


@MODELS.register()
class ToyModel(torch.nn.Module):
    @dataclass
    class Config:
        lr: float = 0.5
        lr_final_factor: float = 0.1  # exponential decay to lr * factor at max_steps
        nan_at_step: int | None = None  # 1-based step whose loss is NaN (NaNGuardHook tests)
        channels: int = 3  # != 3 gives a shape mismatch (checkpoint mismatch tests)

    metric_notes = {"lpips": "toy model: LPIPS is not computed"}

    def __init__(self, config: Config, dataset: ToyDataset) -> None:
        super().__init__()
        self.config = config
        h, w = dataset.train_views[0].image.shape[:2]
        self.params = torch.nn.ParameterDict({"means": torch.nn.Parameter(torch.zeros(h, w, config.channels))})
        self.max_steps = 1
        self.step = 0
        self.optimizer: torch.optim.Optimizer | None = None

    @property
    def num_gaussians(self) -> int:
        return self.params["means"].shape[0] * self.params["means"].shape[1]

    def create_optimizer(self, max_steps: int) -> torch.optim.Optimizer:
        self.max_steps = max(max_steps, 1)
        self.optimizer = torch.optim.Adam([{"params": [self.params["means"]], "lr": self.config.lr, "name": "means"}])
        return self.optimizer

    def update_learning_rate(self, step: int) -> None:
        self.step = step
        t = min(step / self.max_steps, 1.0)
        for group in self.optimizer.param_groups:
            group["lr"] = self.config.lr * math.exp(t * math.log(self.config.lr_final_factor))

    def _target(self, batch: list[View]) -> torch.Tensor:
        return torch.stack([v.float_image(self.params["means"].device) for v in batch])

    def get_loss_dict(self, render_out: dict, batch: list[View]) -> dict:
        l2 = ((render_out["rgb"] - self._target(batch)) ** 2).mean()
        loss = l2
        if self.config.nan_at_step is not None and self.training and self.step + 1 >= self.config.nan_at_step:
            loss = loss * float("nan")
        return {"loss": loss, "l2": l2.detach()}

    def get_metric_dict(self, render_out: dict, batch: list[View]) -> dict:
        mse = ((render_out["rgb"].clamp(0, 1) - self._target(batch)) ** 2).mean()
        return {"psnr": -10.0 * torch.log10(mse), "mse": mse, "lpips": None}


@RENDERERS.register()
class ToyRenderer:
    def __call__(self, model: ToyModel, cameras: list[Camera], background: tuple) -> dict:
        rgb = torch.sigmoid(model.params["means"][..., :3])
        c = len(cameras)
        return {"rgb": rgb[None].expand(c, *rgb.shape), "width": rgb.shape[1], "height": rgb.shape[0], "n_cameras": c}


@STRATEGIES.register()
class ToyStrategy:
    """Records the call order and adds a small regulariser, to test the trainer's step sequence."""

    @dataclass
    class Config:
        reg_weight: float = 1e-3

    def __init__(self, config: Config, scene_extent: float, max_steps: int) -> None:
        self.config = config
        self.scene_extent, self.max_steps = scene_extent, max_steps
        self.calls: list[tuple[str, int]] = []
        self.checked = False
        self.post_backward_count = 0
        self.grads_cleared: list[bool] = []

    def check(self, model: ToyModel, optimizer: torch.optim.Optimizer) -> None:
        self.checked = True

    def extra_loss(self, model: ToyModel, step: int) -> dict:
        self.calls.append(("extra_loss", step))
        return {"reg": self.config.reg_weight * model.params["means"].square().mean()}

    def step_pre_backward(self, model, optimizer, step: int, render_out: dict) -> None:
        self.calls.append(("pre_backward", step))

    def step_post_backward(self, model, optimizer, step: int, render_out: dict) -> None:
        self.calls.append(("post_backward", step))
        # The trainer steps and zeroes the optimizer before densification (gsplat's order).
        self.grads_cleared.append(model.params["means"].grad is None)
        self.post_backward_count += 1

    def state_dict(self) -> dict:
        return {"post_backward_count": self.post_backward_count}

    def load_state_dict(self, state: dict) -> None:
        self.post_backward_count = state["post_backward_count"]
