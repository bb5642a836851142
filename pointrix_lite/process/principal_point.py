"""A last bundle adjustment that frees each camera's principal point, which COLMAP's mapper holds at the
image centre.

Why: a lens whose optical axis meets the sensor a few pixels off its centre (every real camera) is
explained, with the principal point held at the centre, by turning every camera by the matching angle
(the offset over the focal length, in radians) and moving it to suit. Those
small rotations are what the trained model then pays for: the training views disagree by a few pixels
where the scene is far from the cameras' common centre. The mapper keeps the point fixed because, while a
model grows from two or three images, nothing constrains it; once every image is registered, the views'
spread does. So the point is refined after mapping, and kept only where it stays within
:data:`MAX_SHIFT` of the centre (a shift beyond that is the adjustment drifting on weak geometry, not a lens).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# Models whose principal point COLMAP holds fixed: (cx, cy) are params[1:3] (one focal) or params[2:4] (two).
PRINCIPAL_POINT_INDEX = {"SIMPLE_PINHOLE": 1, "SIMPLE_RADIAL": 1, "RADIAL": 1, "PINHOLE": 2, "OPENCV": 2}
MAX_SHIFT = 0.05  # of the image's width (x) and height (y)
MIN_IMAGES = 5  # fewer registered images than this: the point is not refined (too little to constrain it)


@dataclass
class Shift:
    """What the refinement did to one camera: the point before and after, in pixels, and whether it was kept."""

    camera_id: int
    before: tuple[float, float]
    after: tuple[float, float]
    kept: bool


def _point(camera: Any) -> tuple[float, float]:
    i = PRINCIPAL_POINT_INDEX[camera.model.name]
    return float(camera.params[i]), float(camera.params[i + 1])


def refine_principal_point(pycolmap: Any, rec: Any, threads: int = -1) -> list[Shift]:
    """Bundle-adjust ``rec`` (a ``pycolmap.Reconstruction``, changed in place) with every camera's principal
    point free; where a camera's point moves beyond :data:`MAX_SHIFT`, the drifted cameras get their
    points back and the model is adjusted again with every point held. Returns one :class:`Shift` per
    camera; nothing is done (an empty list) where fewer than :data:`MIN_IMAGES` images are registered or
    a camera model has no principal point."""
    cameras = dict(rec.cameras)
    if rec.num_reg_images() < MIN_IMAGES or any(c.model.name not in PRINCIPAL_POINT_INDEX for c in cameras.values()):
        return []
    before = {k: _point(c) for k, c in cameras.items()}
    options = pycolmap.BundleAdjustmentOptions()
    options.refine_principal_point = True
    options.ceres.solver_options.num_threads = threads
    pycolmap.bundle_adjustment(rec, options)
    shifts = [Shift(int(k), before[k], _point(c), True) for k, c in rec.cameras.items()]
    drifted = [s for s in shifts if not _within(s, rec.cameras[s.camera_id])]
    if drifted:  # back to the centred point, and the poses adjusted to it again
        for s in drifted:
            s.kept = False
            camera = rec.cameras[s.camera_id]
            i = PRINCIPAL_POINT_INDEX[camera.model.name]
            params = camera.params.copy()
            params[i : i + 2] = s.before
            camera.params = params
        options.refine_principal_point = False
        pycolmap.bundle_adjustment(rec, options)
    return shifts


def _within(shift: Shift, camera: Any) -> bool:
    dx, dy = (abs(a - b) for a, b in zip(shift.after, shift.before))
    return dx <= MAX_SHIFT * camera.width and dy <= MAX_SHIFT * camera.height
