"""A tiny NeRF-synthetic scene on disk and configs that train the real components on it.

Six 32x32 training views (+ two test views) of three coloured Gaussian blobs, rendered analytically
with numpy: small enough that a real GaussianModel + GaussianRenderer + DefaultStrategy run of a few
dozen steps takes seconds on the CPU, structured enough that densification really happens.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

SIZE = 32
CAMERA_ANGLE_X = 0.7  # radians; the blobs fill most of the frame at radius 4
BLOBS = np.array([[0.0, 0.0, 0.0], [0.6, 0.3, 0.2], [-0.4, -0.5, 0.3]])  # [3,3] world centres
COLORS = np.array([[0.9, 0.2, 0.1], [0.1, 0.8, 0.3], [0.2, 0.3, 0.9]])  # [3,3] RGB


def _look_at_c2w(position: np.ndarray) -> np.ndarray:
    """Blender/OpenGL camera-to-world [4,4]: camera at ``position`` looking at the origin (+z up)."""
    back = position / np.linalg.norm(position)  # Blender cameras look down their -z
    right = np.cross([0.0, 0.0, 1.0], back)
    right /= np.linalg.norm(right)
    up = np.cross(back, right)
    c2w = np.eye(4)
    c2w[:3, 0], c2w[:3, 1], c2w[:3, 2], c2w[:3, 3] = right, up, back, position
    return c2w


def _render(c2w: np.ndarray) -> np.ndarray:
    """[SIZE,SIZE,4] uint8 RGBA: each blob projected as a screen-space Gaussian, alpha-over in depth order."""
    focal = 0.5 * SIZE / np.tan(0.5 * CAMERA_ANGLE_X)
    w2c = np.linalg.inv(c2w)
    cam = (w2c[:3, :3] @ BLOBS.T).T + w2c[:3, 3]  # OpenGL camera coordinates, visible z < 0
    ys, xs = np.mgrid[0:SIZE, 0:SIZE] + 0.5
    rgb, alpha = np.zeros((SIZE, SIZE, 3)), np.zeros((SIZE, SIZE, 1))
    for k in np.argsort(cam[:, 2])[::-1]:  # nearest first (largest z in OpenGL axes)
        x, y, z = cam[k]
        u, v = focal * x / -z + SIZE / 2, -focal * y / -z + SIZE / 2
        sigma = focal * 0.35 / -z
        a = 0.95 * np.exp(-((xs - u) ** 2 + (ys - v) ** 2) / (2 * sigma**2))[..., None]
        rgb += (1 - alpha) * a * COLORS[k]
        alpha += (1 - alpha) * a
    rgba = np.concatenate([rgb / np.clip(alpha, 1e-6, None), alpha], axis=-1)
    return np.clip(np.rint(rgba * 255), 0, 255).astype(np.uint8)


def write_tiny_scene(root: Path, n_train: int = 6, n_test: int = 2) -> Path:
    """Write ``transforms_{train,test}.json`` and PNGs under ``root``; returns ``root``."""
    for split, n, offset in (("train", n_train, 0.0), ("test", n_test, 0.5)):
        (root / split).mkdir(parents=True, exist_ok=True)
        frames = []
        for i in range(n):
            theta = 2 * np.pi * (i + offset) / n
            c2w = _look_at_c2w(np.array([4.0 * np.cos(theta), 4.0 * np.sin(theta), 1.5]))
            Image.fromarray(_render(c2w), "RGBA").save(root / split / f"r_{i}.png")
            frames.append({"file_path": f"./{split}/r_{i}", "transform_matrix": c2w.tolist()})
        (root / f"transforms_{split}.json").write_text(json.dumps({"camera_angle_x": CAMERA_ANGLE_X, "frames": frames}))
    return root


def real_raw_config(out: Path, scene: Path, backend: str = "torch", **trainer: Any) -> dict[str, Any]:
    """Real components on the tiny scene, on the CPU: 16 steps, a checkpoint every 8.

    The strategy refines after 0-based steps 3, 6, 9, 12 and 15 (``step > 2 and step % 3 == 0``),
    so a stop at step 7 or 8 has densification both before and after it. ``grow_grad2d`` is raised
    from 3DGS's 0.0002 (tuned for 800x800 images): on 32x32 images every Gaussian exceeds that and
    the model would double each time; at 0.003 a tenth to a quarter of them grow (150 -> ~300).
    """
    return {
        "name": "tiny",
        "output_dir": str(out),
        "device": "cpu",
        "seed": 3,
        "trainer": {"max_steps": 16, "val_interval": 0, "test_at_end": False, **trainer},
        "dataset": {"type": "NerfSyntheticDataset", "data_path": str(scene), "random_init_points": 150},
        "model": {"type": "GaussianModel", "sh_degree": 1, "sh_degree_interval": 8},
        "renderer": {"type": "GaussianRenderer", "backend": backend},
        "strategy": {
            "type": "DefaultStrategy",
            "refine_start_iter": 2,
            "refine_every": 3,
            "reset_every": 1000,
            "grow_grad2d": 0.003,
            "refine_stop_iter": 1000,
        },
        "hooks": [
            {"type": "LogHook", "interval": 1, "progress_bar": False},
            {"type": "CheckPointHook", "interval": 8, "max_keep": None},
        ],
        "writers": [{"type": "JsonlWriter", "save_images": False}],
    }


def stop_after(step: int) -> Any:
    """A hook that asks the trainer to stop (as a first Ctrl-C does) once step ``step`` has finished."""
    from pointrix_lite.hook import Hook

    class StopAfter(Hook):
        def after_train_iter(self, batch_idx: int, batch: list) -> None:
            if self.trainer.global_step == step:
                self.trainer.state.stop_requested = True

    return StopAfter()
