"""Camera path files: nerfstudio's camera path JSON, read and written.

The layout is the one nerfstudio's viewer exports and ``ns-render camera-path`` reads::

    {"render_width": W, "render_height": H, "fps": 30, "seconds": 4.0,
     "camera_path": [{"camera_to_world": [16 floats, row-major 4x4], "fov": 50.0, "aspect": 1.5}, ...]}

``camera_to_world`` uses OpenGL axes (x right, y up, z backward), as nerfstudio's; ``fov`` is the
vertical field of view in degrees. A frame may instead give its own intrinsics in pixels
(``fl_x``, ``fl_y``, ``cx``, ``cy``, ``w``, ``h``, nerfstudio's transforms.json keys), which wins over
``fov``. Poses are in the data set's world frame as this project loads it (the frame the training
cameras are in), so a path written by :func:`write_camera_path` from a run's cameras reads back the
same cameras; a path made in nerfstudio's viewer is in nerfstudio's own normalised frame and needs
that frame's transform first.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from ..errors import DataError

GL_FROM_CV = torch.diag(torch.tensor([1.0, -1.0, -1.0, 1.0], dtype=torch.float64))  # flips y and z


@dataclass(frozen=True)
class PathFrame:
    """One frame of a path: OpenCV world-to-camera ``viewmat`` [4, 4] float64 and pinhole intrinsics in pixels."""

    viewmat: Tensor
    fx: float
    fy: float
    cx: float
    cy: float
    width: int
    height: int


def _number(frame: dict, key: str, where: str) -> float | None:
    value = frame.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise DataError(f"{where}: {key} must be a positive number, got {str(value)[:40]!r}")
    return float(value)


def read_camera_path(path: Path) -> list[PathFrame]:
    """The frames of the camera path file ``path``, in order.

    Raises:
        DataError: an unreadable file, or a frame without a 4x4 pose or any field of view (one line
            naming the file and the frame).
    """
    try:
        data: Any = json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError(f"{path}: cannot read camera path ({exc})") from None
    frames = data.get("camera_path") if isinstance(data, dict) else None
    if not isinstance(frames, list) or not frames:
        raise DataError(f"{path}: no camera_path list of frames (nerfstudio's camera path JSON)")
    width, height = data.get("render_width"), data.get("render_height")
    cameras = []
    for k, frame in enumerate(frames):
        where = f"{path} camera_path[{k}]"
        if not isinstance(frame, dict):
            raise DataError(f"{where}: not an object")
        try:
            c2w = torch.tensor(frame["camera_to_world"], dtype=torch.float64).reshape(4, 4)
        except (KeyError, TypeError, ValueError, RuntimeError):
            raise DataError(f"{where}: camera_to_world must be 16 numbers (a row-major 4x4 matrix)") from None
        if not torch.isfinite(c2w).all():
            raise DataError(f"{where}: camera_to_world holds a non-finite number")
        w = int(_number(frame, "w", where) or width or 0)
        h = int(_number(frame, "h", where) or height or 0)
        if w <= 0 or h <= 0:
            raise DataError(f"{where}: no image size (render_width / render_height, or w / h per frame)")
        fy = _number(frame, "fl_y", where)
        if fy is None:
            fov = _number(frame, "fov", where)
            if fov is None or fov >= 180:
                raise DataError(f"{where}: no field of view (fov in degrees, or fl_x / fl_y in pixels)")
            fy = 0.5 * h / math.tan(math.radians(fov) / 2)
        fx = _number(frame, "fl_x", where) or fy
        cx, cy = _number(frame, "cx", where) or w / 2, _number(frame, "cy", where) or h / 2
        viewmat = torch.linalg.inv(c2w @ GL_FROM_CV)
        cameras.append(PathFrame(viewmat, fx, fy, cx, cy, w, h))
    return cameras


def write_camera_path(cameras: Sequence[PathFrame], path: Path, fps: int = 30) -> Path:
    """Write ``cameras`` as a camera path file (size of the first camera, per-frame intrinsics)."""
    frames = []
    for cam in cameras:
        c2w = torch.linalg.inv(torch.as_tensor(cam.viewmat).double()) @ GL_FROM_CV
        fov = math.degrees(2 * math.atan(0.5 * cam.height / cam.fy))
        frames.append(
            {
                "camera_to_world": [float(v) for v in c2w.reshape(-1)],
                "fov": fov,
                "aspect": cam.width / cam.height,
                **{"fl_x": cam.fx, "fl_y": cam.fy, "cx": cam.cx, "cy": cam.cy, "w": cam.width, "h": cam.height},
            }
        )
    first = cameras[0]
    data = {
        "render_width": first.width,
        "render_height": first.height,
        "fps": fps,
        "seconds": len(frames) / fps,
        "camera_type": "perspective",
        "camera_path": frames,
    }
    Path(path).write_text(json.dumps(data, indent=1))
    return Path(path)
