"""The pycolmap stages: features -> (matching: :mod:`.matching`, mapping: :mod:`.mapping`) -> pick a model
(undistortion: :mod:`.undistort`).

Every function takes the imported ``pycolmap`` module (see :mod:`.colmap_import`) and a progress
callback; failures the user can act on are one-line :class:`~pointrix_lite.errors.DataError`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from PIL import Image

from ..errors import DataError
from .options import ProcessOptions

Progress = Callable[[int, int], None]  # (done, total)

SUSPICIOUS_ASPECT = 1.25  # fx/fy beyond this (or below its inverse) is not a real lens
SUSPICIOUS_FOCAL = (0.2, 8.0)  # focal / max(width, height) outside this: a degenerate calibration


def _name_list(names: list[str], limit: int = 8) -> str:
    more = f" and {len(names) - limit} more" if len(names) > limit else ""
    return ", ".join(names[:limit]) + more


def _camera(pycolmap: ModuleType, database: Path, newest: bool = False) -> int:
    """The smallest (``newest``: largest) camera id in ``database``, -1 when it has none (or does not exist yet)."""
    if not database.exists():
        return -1
    db = pycolmap.Database.open(str(database))
    try:
        return (max if newest else min)((c.camera_id for c in db.read_all_cameras()), default=-1)
    finally:
        db.close()


def by_size(image_dir: Path, names: list[str]) -> list[list[str]]:
    """``names`` grouped by pixel size, in order of first appearance.

    COLMAP's shared camera takes only images of its size and skips the others with a line in its log
    (``CAMERA_SINGLE_DIM_ERROR``); portrait and landscape photos of one phone differ once upright.
    """
    groups: dict[tuple[int, int], list[str]] = {}
    for name in names:
        with Image.open(image_dir / name) as im:  # reads the header only
            groups.setdefault(im.size, []).append(name)
    return list(groups.values())


def extract_features(
    pycolmap: ModuleType,
    database: Path,
    image_dir: Path,
    names: list[str],
    opts: ProcessOptions,
    progress: Progress,
    mask_dir: Path | None = None,
) -> int:
    """SIFT on the CPU for ``names`` (one camera shared by all images of a size); returns the number of keypoints.

    Runs in chunks only to report progress: every chunk adds its images to the same database, and
    the chunks after the first of a size reuse its camera (``CameraMode.SINGLE`` is per call). The
    first size joins the database's first camera when it has one. ``mask_dir`` holds COLMAP's masks
    (``<image name>.png``): no keypoint lies where they are 0.
    """
    reader = pycolmap.ImageReaderOptions()
    reader.camera_model = opts.camera_model
    if mask_dir is not None:
        reader.mask_path = str(mask_dir)
    extraction = pycolmap.FeatureExtractionOptions()
    extraction.num_threads = opts.threads
    extraction.max_image_size = opts.max_image_size
    extraction.sift.max_num_features = opts.max_features
    chunk = max(1, len(names) // 20)
    reader.existing_camera_id = _camera(pycolmap, database)  # images added to a database share its camera
    done = 0
    for group in by_size(image_dir, names):
        for start in range(0, len(group), chunk):
            part = group[start : start + chunk]
            pycolmap.extract_features(
                database,
                image_dir,
                image_names=part,
                camera_mode=pycolmap.CameraMode.SINGLE,
                reader_options=reader,
                extraction_options=extraction,
                device=pycolmap.Device.cpu,
            )
            done += len(part)
            progress(done, len(names))
            if reader.existing_camera_id < 0:
                reader.existing_camera_id = _camera(pycolmap, database, newest=True)  # the one this call made
        reader.existing_camera_id = -1  # the next size gets a camera of its own
    db = pycolmap.Database.open(str(database))
    try:
        return int(db.num_keypoints())
    finally:
        db.close()


@dataclass
class ChosenModel:
    index: int  # folder name under colmap/sparse
    reconstruction: Any
    registered: list[str]
    unregistered: list[str]
    dropped: list[tuple[int, int]] = field(default_factory=list)  # (model index, registered images) of the others


def pick_model(recs: dict[int, Any], names: list[str], min_registered: int) -> ChosenModel:
    """The model with the most registered images.

    Raises:
        DataError: no model, or fewer than ``min_registered`` images registered (the others named).
    """
    if not recs:
        raise DataError(
            f"mapping registered no images out of {len(names)}: no image pair had enough wide-baseline matches "
            "to start from; take photos from more positions around the subject, with more overlap"
        )
    best = max(recs, key=lambda k: (recs[k].num_reg_images(), -k))
    rec = recs[best]
    registered = sorted(rec.image(i).name for i in rec.reg_image_ids())
    unregistered = sorted(set(names) - set(registered))
    dropped = [(k, recs[k].num_reg_images()) for k in sorted(recs) if k != best]
    if len(registered) < min_registered:
        raise DataError(
            f"mapping registered only {len(registered)} of {len(names)} images (need {min_registered}); "
            f"not registered: {_name_list(unregistered)}"
        )
    return ChosenModel(best, rec, registered, unregistered, dropped)


def check_intrinsics(rec: Any, camera_model: str) -> list[tuple[float, float]]:
    """Focal lengths ``(fx, fy)`` per camera.

    Raises:
        DataError: a calibration no real lens has (squashed or extreme focal length).
    """
    focals = []
    for cam in rec.cameras.values():
        fx, fy = float(cam.focal_length_x), float(cam.focal_length_y)
        size = max(int(cam.width), int(cam.height))
        aspect = fx / fy if fy > 0 else float("inf")
        relative = min(fx, fy) / size
        hint = "SIMPLE_RADIAL" if camera_model != "SIMPLE_RADIAL" else "SIMPLE_PINHOLE"
        if not 1 / SUSPICIOUS_ASPECT <= aspect <= SUSPICIOUS_ASPECT:
            raise DataError(
                f"suspicious intrinsics: camera {cam.camera_id} ({camera_model}) has fx/fy = {aspect:.2f} "
                f"(fx {fx:.1f}, fy {fy:.1f}); real lenses have ~1: rerun with --camera-model {hint}"
            )
        if not SUSPICIOUS_FOCAL[0] <= relative <= SUSPICIOUS_FOCAL[1]:
            raise DataError(
                f"suspicious intrinsics: camera {cam.camera_id} ({camera_model}) focal length {min(fx, fy):.1f} px is "
                f"{relative:.2f}x the image size {size}; rerun with --camera-model {hint} or more photos"
            )
        focals.append((fx, fy))
    return focals
