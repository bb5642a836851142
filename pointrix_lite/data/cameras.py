"""Pinhole cameras and training views, plus the pose conversions the loaders need.

Conventions (the rasterizer's, i.e. gsplat's):

* ``viewmat`` is world-to-camera in OpenCV axes: x right, y down, z forward.
* Pixel ``(i, j)`` (row, column) covers ``[j, j+1] x [i, i+1]``; its centre is at ``(j+0.5, i+0.5)``.
  ``cx, cy`` live in these continuous coordinates (COLMAP uses the same convention, and NeRF-synthetic's
  ``cx = W/2`` is the image centre in it). Downscaling an image by an integer ``s`` (box filter) maps
  continuous coordinate ``u`` to ``u/s``, so ``fx, fy, cx, cy`` all divide by ``s`` -- no half-pixel shift.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
import torch

from ..errors import DataError


@dataclass
class Camera:
    """A pinhole camera.

    Attributes:
        fx, fy, cx, cy: Intrinsics in pixels (pixel centres at +0.5).
        width, height: Image size in pixels.
        viewmat: [4, 4] float32 world-to-camera matrix, OpenCV axes.
        name: Image name (file stem), for logs and output file names.
    """

    fx: float
    fy: float
    cx: float
    cy: float
    width: int
    height: int
    viewmat: torch.Tensor
    name: str = ""

    @property
    def K(self) -> torch.Tensor:
        """[3, 3] float32 intrinsic matrix."""
        return torch.tensor([[self.fx, 0.0, self.cx], [0.0, self.fy, self.cy], [0.0, 0.0, 1.0]], dtype=torch.float32)

    @property
    def camera_center(self) -> torch.Tensor:
        """[3] camera position in world coordinates (``-R^T t``)."""
        R = self.viewmat[:3, :3].double()
        t = self.viewmat[:3, 3].double()
        return (-R.T @ t).float()

    def scaled(self, factor: float, width: int | None = None, height: int | None = None) -> Camera:
        """The same camera for an image downscaled by ``factor`` (2 = half resolution).

        The new size is ``round(width / factor)`` unless given (``images_2`` folders made by other tools
        may round differently); intrinsics scale by the actual size ratio per axis, which is exactly
        ``1/factor`` when the factor divides the size.
        """
        if factor <= 0:
            raise ValueError(f"downscale factor must be positive, got {factor}")
        new_w, new_h = scaled_size(self.width, self.height, factor)
        new_w, new_h = width if width is not None else new_w, height if height is not None else new_h
        sx, sy = new_w / self.width, new_h / self.height
        return replace(
            self, fx=self.fx * sx, fy=self.fy * sy, cx=self.cx * sx, cy=self.cy * sy, width=new_w, height=new_h
        )


def scaled_size(width: int, height: int, factor: float) -> tuple[int, int]:
    """The ``(width, height)`` of an image downscaled by ``factor``: each side rounded, at least 1."""
    return max(1, round(width / factor)), max(1, round(height / factor))


@dataclass
class View:
    """One posed image.

    Attributes:
        camera: The camera that took it.
        image: [H, W, 3] uint8 (kept in memory at 1/4 the size of float32).
        name: Image name (file stem).
        index: Position of the view within its split (train/val/test).
        mask: Optional [H, W] bool, True where the pixel counts in the loss (``data/masks.py``);
            None = every pixel counts. Only training views carry one.
        color_transform: ``None`` (the dataset's views): the image shows the scene's canonical
            colours. Otherwise ``[H, W, 3] -> [H, W, 3]``, how this photo's camera response maps a
            canonical render to its colours; the loss compares ``color_transform(render)`` with
            the image (set on training-batch copies by AppearanceOptHook).
    """

    camera: Camera
    image: torch.Tensor
    name: str
    index: int
    mask: torch.Tensor | None = None
    color_transform: Callable[[torch.Tensor], torch.Tensor] | None = None

    def float_image(self, device: torch.device | str | None = None) -> torch.Tensor:
        """[H, W, 3] float32 in [0, 1], on ``device`` (default: where the image is).

        The image travels as stored (uint8 is a quarter of float32's bytes; asynchronously when
        pinned, see ``pin_images``) and is converted where it lands: the same numbers either way.
        """
        return self.image_on(device).float() / 255.0

    def image_on(self, device: torch.device | str | None = None) -> torch.Tensor:
        """The image as stored (uint8, or a downscaled view's float block means, both 0..255) on
        ``device`` (default: where it is)."""
        if device is None:
            return self.image
        return self.image.to(device, non_blocking=self.image.is_pinned())

    def mask_on(self, device: torch.device | str | None = None) -> torch.Tensor | None:
        """The [H, W] bool mask on ``device`` (default: where it is), or None without one."""
        if self.mask is None or device is None:
            return self.mask
        return self.mask.to(device, non_blocking=self.mask.is_pinned())


def pin_images(views: list[View]) -> None:
    """Page-lock the host images of ``views`` (in place) so uploads to a GPU are asynchronous
    copies; whether to is ``device_policy.pin_host_images``'s call (it needs a CUDA runtime)."""
    for view in views:
        if view.image.device.type == "cpu" and not view.image.is_pinned():
            view.image = view.image.pin_memory()
        if view.mask is not None and view.mask.device.type == "cpu" and not view.mask.is_pinned():
            view.mask = view.mask.pin_memory()


def focal_from_fov(fov: float, size: int) -> float:
    """Focal length in pixels for a full field of view ``fov`` (radians) across ``size`` pixels."""
    return 0.5 * size / math.tan(0.5 * fov)


def qvec_to_rotmat(qvec: np.ndarray) -> np.ndarray:
    """Unit quaternion (w, x, y, z) -> [3, 3] rotation matrix (normalises first)."""
    w, x, y, z = np.asarray(qvec, dtype=np.float64) / np.linalg.norm(qvec)
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
        ]
    )


def rotmat_to_qvec(R: np.ndarray) -> np.ndarray:
    """[3, 3] rotation matrix -> unit quaternion (w, x, y, z) with w >= 0 (Shepperd's method)."""
    R = np.asarray(R, dtype=np.float64)
    tr = np.trace(R)
    if tr > 0:
        s = 2.0 * math.sqrt(tr + 1.0)
        q = [0.25 * s, (R[2, 1] - R[1, 2]) / s, (R[0, 2] - R[2, 0]) / s, (R[1, 0] - R[0, 1]) / s]
    else:
        i = int(np.argmax(np.diag(R)))
        j, k = (i + 1) % 3, (i + 2) % 3
        s = 2.0 * math.sqrt(1.0 + R[i, i] - R[j, j] - R[k, k])
        q = [0.0] * 4
        q[0] = (R[k, j] - R[j, k]) / s
        q[1 + i] = 0.25 * s
        q[1 + j] = (R[j, i] + R[i, j]) / s
        q[1 + k] = (R[k, i] + R[i, k]) / s
    q = np.array(q)
    q /= np.linalg.norm(q)
    return q if q[0] >= 0 else -q


def viewmat_from_colmap(qvec: np.ndarray, tvec: np.ndarray) -> np.ndarray:
    """COLMAP image pose (world-to-camera ``qvec`` wxyz, ``tvec``) -> [4, 4] float64 viewmat.

    COLMAP's camera axes are already OpenCV's, so this is just assembling ``[R | t]``.
    """
    w2c = np.eye(4)
    w2c[:3, :3] = qvec_to_rotmat(qvec)
    w2c[:3, 3] = np.asarray(tvec, dtype=np.float64)
    return w2c


def viewmat_from_blender_c2w(c2w: np.ndarray) -> np.ndarray:
    """Blender/OpenGL camera-to-world (x right, y up, z backward) -> [4, 4] float64 OpenCV viewmat.

    Flipping the camera's y and z axes turns OpenGL axes into OpenCV axes; inverting gives world-to-camera.
    """
    c2w = np.array(c2w, dtype=np.float64).reshape(4, 4)
    c2w[:3, 1:3] *= -1.0
    R, C = c2w[:3, :3], c2w[:3, 3]
    w2c = np.eye(4)
    w2c[:3, :3] = R.T
    w2c[:3, 3] = -R.T @ C
    return w2c


def blender_c2w_from_viewmat(viewmat: np.ndarray) -> np.ndarray:
    """Inverse of :func:`viewmat_from_blender_c2w` (used by the demo writer)."""
    w2c = np.asarray(viewmat, dtype=np.float64)
    R, t = w2c[:3, :3], w2c[:3, 3]
    c2w = np.eye(4)
    c2w[:3, :3] = R.T
    c2w[:3, 3] = -R.T @ t
    c2w[:3, 1:3] *= -1.0
    return c2w


def look_at(eye: np.ndarray, target: np.ndarray, up: np.ndarray | tuple = (0.0, 0.0, 1.0)) -> np.ndarray:
    """OpenCV world-to-camera matrix [4,4] float64 for a camera at ``eye`` looking at ``target``.

    ``up`` [3] is the world direction that should appear upwards in the image.

    Raises:
        DataError: the view direction is parallel to ``up`` (the camera's roll is undefined).
    """
    eye, target, up = (np.asarray(v, dtype=np.float64) for v in (eye, target, up))
    forward = target - eye
    forward = forward / np.linalg.norm(forward)
    right = np.cross(forward, up)
    if np.linalg.norm(right) < 1e-8:
        raise DataError("look_at: the view direction is parallel to the up vector")
    right = right / np.linalg.norm(right)
    down = np.cross(forward, right)  # OpenCV: y points down, so y = z x x
    R = np.stack([right, down, forward])  # rows: camera axes in world coordinates
    w2c = np.eye(4)
    w2c[:3, :3] = R
    w2c[:3, 3] = -R @ eye
    return w2c


def check_pose(matrix: np.ndarray, where: str) -> np.ndarray:
    """Refuse a pose with NaN/inf or a singular rotation part, naming ``where`` (file and frame)."""
    m = np.asarray(matrix, dtype=np.float64)
    if not np.all(np.isfinite(m)):
        raise DataError(f"{where}: pose contains non-finite values")
    if abs(np.linalg.det(m[:3, :3])) < 1e-12:
        raise DataError(f"{where}: pose rotation is singular")
    return m


def scene_extent(cameras: list[Camera]) -> float:
    """INRIA 3DGS ``getNerfppNorm`` radius: 1.1 x the largest camera distance from the mean camera centre.

    A single camera (or coincident cameras) gives 0 there; we return 1.0 instead so learning rates and
    densification thresholds that scale with the extent stay usable.
    """
    if not cameras:
        raise ValueError("scene_extent needs at least one camera")
    centers = torch.stack([c.camera_center.double() for c in cameras])
    radius = 1.1 * float((centers - centers.mean(0)).norm(dim=1).max())
    return radius if radius > 1e-9 else 1.0
