"""Photogrammetry projects as COLMAP scene folders: ``process.py --import FILE --images DIR --out OUT``.

Readers, each to a COLMAP model in the tool's own world frame, with the cameras as the tool calibrated
them (distortion included: the data set undistorts at load, ``data/undistorted.py``):

- OpenSfM / OpenDroneMap ``reconstruction.json`` (a list of reconstructions; the largest is taken). Cameras
  ``perspective`` (focal, k1, k2 -> RADIAL), ``brown`` (focal_x/y, c_x/y, k1..k3, p1, p2 -> OPENCV or
  FULL_OPENCV) and ``fisheye`` (focal, k1, k2 -> OPENCV_FISHEYE); OpenSfM normalises pixel coordinates by
  the image's larger side around its centre, so ``f_px = focal * max(w, h)`` and ``c_px = w / 2 + c_x * max(w, h)``.
  A shot's ``rotation`` (angle-axis) and ``translation`` are world-to-camera in OpenCV axes, as COLMAP's.
  ``points`` (``coordinates``, ``color``) become the sparse points.
- Agisoft Metashape camera XML (File > Export > Export Cameras): ``sensor`` calibrations (``f`` and the
  affinity ``b1``: ``fx = f + b1``, ``fy = f``; ``cx``/``cy`` as offsets from the image centre, ``k1..k4``, ``p1``/``p2``; Metashape's P1 multiplies OpenCV's p2 term
  and P2 OpenCV's p1, so they are swapped), a camera's ``transform`` camera-to-chunk in OpenCV axes, times
  its ``component`` transform where present. The XML has no points: ``--points FILE.ply`` (Metashape's
  sparse cloud exported in the same local frame) or, without it, random points in the cameras' region.

The photos are copied into ``OUT/images`` under the names the model uses.
"""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np

from ..data.cameras import rotmat_to_qvec
from ..data.pointcloud import camera_box_points, read_ply_points
from ..errors import DataError
from ..io.colmap import ColmapCamera, ColmapImage, ColmapModel, write_model

RANDOM_POINTS = 50_000


def _rodrigues(v: np.ndarray) -> np.ndarray:
    theta = float(np.linalg.norm(v))
    if theta < 1e-12:
        return np.eye(3)
    k = v / theta
    K = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
    return np.eye(3) + np.sin(theta) * K + (1 - np.cos(theta)) * K @ K


def _opensfm_camera(cid: int, cam: dict, where: str) -> ColmapCamera:
    try:
        w, h = int(cam["width"]), int(cam["height"])
        size = max(w, h)
        kind = cam.get("projection_type", "perspective")
        get = lambda key, default=0.0: float(cam.get(key, default))  # noqa: E731
        if kind == "perspective":
            params = [get("focal") * size, w / 2, h / 2, get("k1"), get("k2")]
            return ColmapCamera(cid, "RADIAL", w, h, np.array(params))
        if kind == "brown":
            fx, fy = get("focal_x") * size, get("focal_y") * size
            cx, cy = w / 2 + get("c_x") * size, h / 2 + get("c_y") * size
            k1, k2, k3, p1, p2 = (get(k) for k in ("k1", "k2", "k3", "p1", "p2"))
            if k3:
                return ColmapCamera(cid, "FULL_OPENCV", w, h, np.array([fx, fy, cx, cy, k1, k2, p1, p2, k3, 0, 0, 0]))
            return ColmapCamera(cid, "OPENCV", w, h, np.array([fx, fy, cx, cy, k1, k2, p1, p2]))
        if kind == "fisheye":
            f = get("focal") * size
            return ColmapCamera(cid, "OPENCV_FISHEYE", w, h, np.array([f, f, w / 2, h / 2, get("k1"), get("k2"), 0, 0]))
    except (KeyError, TypeError, ValueError) as exc:
        raise DataError(f"{where}: incomplete camera ({exc})") from None
    raise DataError(f"{where}: projection_type {kind} is not read here (perspective, brown, fisheye)")


def read_opensfm(path: Path) -> ColmapModel:
    """The largest reconstruction of an OpenSfM / ODM ``reconstruction.json`` as a COLMAP model."""
    try:
        recs = json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError(f"{path}: cannot read ({exc})") from None
    if not isinstance(recs, list) or not recs or not all(isinstance(r, dict) for r in recs):
        raise DataError(f"{path}: not an OpenSfM reconstruction list")
    rec = max(recs, key=lambda r: len(r.get("shots", {})))
    if not rec.get("shots"):
        raise DataError(f"{path}: no shots (registered images)")
    ids = {key: i + 1 for i, key in enumerate(sorted(rec.get("cameras", {})))}
    cameras = {ids[k]: _opensfm_camera(ids[k], c, f"{path} cameras[{k!r}]") for k, c in rec["cameras"].items()}
    images = {}
    for i, (name, shot) in enumerate(sorted(rec["shots"].items())):
        where = f"{path} shots[{name!r}]"
        if shot.get("camera") not in ids:
            raise DataError(f"{where}: camera {shot.get('camera')!r} is not in cameras")
        try:
            R, t = _rodrigues(np.asarray(shot["rotation"], float)), np.asarray(shot["translation"], float)
        except (KeyError, TypeError, ValueError):
            raise DataError(f"{where}: needs rotation and translation (3 numbers each)") from None
        images[i + 1] = ColmapImage(i + 1, rotmat_to_qvec(R), t, ids[shot["camera"]], name)
    points = list(rec.get("points", {}).values())
    xyz = np.array([p["coordinates"] for p in points], float).reshape(-1, 3)
    rgb = np.array([p.get("color", [128, 128, 128]) for p in points], float).reshape(-1, 3).round().astype(np.uint8)
    return ColmapModel(cameras, images, xyz, rgb, {"cameras": path, "images": path, "points3D": path})


def _numbers(node: ET.Element | None, n: int, where: str) -> np.ndarray:
    try:
        out = np.array([float(x) for x in (node.text or "").split()]) if node is not None else np.zeros(0)
    except ValueError:
        out = np.zeros(0)
    if out.size != n:
        raise DataError(f"{where}: expected {n} numbers")
    return out


def read_metashape(path: Path) -> ColmapModel:
    """The cameras of a Metashape camera XML as a COLMAP model (no points: see the module docstring)."""
    try:
        chunk = ET.parse(path).getroot().find("chunk")
    except (OSError, ET.ParseError) as exc:
        raise DataError(f"{path}: cannot read ({exc})") from None
    if chunk is None or chunk.find("sensors") is None or chunk.find("cameras") is None:
        raise DataError(f"{path}: not a Metashape camera export (document/chunk with sensors and cameras)")
    cameras: dict[str, ColmapCamera] = {}
    for sensor in chunk.find("sensors").iter("sensor"):
        calib, where = sensor.find("calibration"), f"{path} sensor {sensor.get('id')}"
        if calib is None:
            continue  # not calibrated: its cameras are skipped below
        res = calib.find("resolution") if calib.find("resolution") is not None else sensor.find("resolution")
        if res is None or calib.find("f") is None:
            raise DataError(f"{where}: calibration without resolution or f")
        w, h = int(res.get("width", 0)), int(res.get("height", 0))
        keys = ("f", "cx", "cy", "b1", "b2", "k1", "k2", "k3", "k4", "p1", "p2")
        p = {k: float(calib.findtext(k, "0")) for k in keys}
        if p["b2"]:
            raise DataError(f"{where}: skew (b2) has no COLMAP counterpart")
        f, fx, cx, cy = (
            p["f"],
            p["f"] + p["b1"],
            w / 2 + p["cx"],
            h / 2 + p["cy"],
        )  # u = ... + x (f + b1), v = ... + y f
        cid = len(cameras) + 1
        if sensor.get("type", "frame") == "fisheye":
            params, model = [fx, f, cx, cy, p["k1"], p["k2"], p["k3"], p["k4"]], "OPENCV_FISHEYE"
        elif sensor.get("type", "frame") != "frame":
            raise DataError(f"{where}: sensor type {sensor.get('type')} is not read here (frame, fisheye)")
        elif p["k4"]:
            raise DataError(f"{where}: k4 has no OpenCV counterpart in a frame camera")
        else:  # Metashape's P1 / P2 are OpenCV's p2 / p1
            params, model = [fx, f, cx, cy, p["k1"], p["k2"], p["p2"], p["p1"], p["k3"], 0, 0, 0], "FULL_OPENCV"
        cameras[sensor.get("id", "")] = ColmapCamera(cid, model, w, h, np.array(params, float))
    components = {}
    for comp in chunk.iter("component"):
        tr = comp.find("transform")
        if tr is not None:
            m = np.eye(4)
            scale = float(tr.findtext("scale", "1"))
            if tr.find("rotation") is not None:
                m[:3, :3] = _numbers(tr.find("rotation"), 9, f"{path} component {comp.get('id')}").reshape(3, 3) * scale
            if tr.find("translation") is not None:
                m[:3, 3] = _numbers(tr.find("translation"), 3, f"{path} component {comp.get('id')}")
            components[comp.get("id")] = m
    images = {}
    for cam in chunk.find("cameras").iter("camera"):
        label, where = cam.get("label", ""), f"{path} camera {cam.get('label')!r}"
        if cam.get("sensor_id") not in cameras or cam.find("transform") is None or cam.get("enabled") == "false":
            continue  # not aligned (Metashape writes these without a transform) or not calibrated
        c2w = _numbers(cam.find("transform"), 16, where).reshape(4, 4)
        c2w = components.get(cam.get("component_id"), np.eye(4)) @ c2w
        w2c = np.linalg.inv(c2w)
        w2c[:3] /= np.cbrt(np.linalg.det(w2c[:3, :3]))  # a scaled component: the pose in the scaled frame
        i = len(images) + 1
        sensor = cameras[cam.get("sensor_id")]
        images[i] = ColmapImage(i, rotmat_to_qvec(w2c[:3, :3]), w2c[:3, 3], sensor.id, label)
    if not images:
        raise DataError(f"{path}: no aligned camera (none has a transform)")
    return ColmapModel(
        {c.id: c for c in cameras.values()}, images, np.zeros((0, 3)), np.zeros((0, 3), np.uint8), {"cameras": path}
    )


def import_project(source: Path, images: Path, out: Path, points: Path | None = None) -> tuple[ColmapModel, list[str]]:
    """Read ``source`` (OpenSfM ``*.json`` or Metashape ``*.xml``), write ``out/sparse/0`` and copy the
    photos the model names from ``images`` to ``out/images``. Returns the model and the lines to print."""
    reader = read_metashape if source.suffix.lower() == ".xml" else read_opensfm
    model = reader(source)
    lines = [f"read {len(model.images)} cameras ({', '.join(sorted({c.model for c in model.cameras.values()}))})"]
    if points is not None:
        cloud = read_ply_points(points)
        model.xyz, model.rgb = cloud.xyz.double().numpy(), (cloud.rgb.numpy() * 255).round().astype(np.uint8)
    if len(model.xyz) == 0:
        # half the cameras' spread around them: photogrammetry cameras look inwards at the object
        model.xyz, model.rgb = camera_box_points(model.images.values(), pad=0.5, n=RANDOM_POINTS)
        lines.append(
            f"no points in {source.name} (--points FILE.ply): {RANDOM_POINTS:,} random ones in the cameras' region"
        )
    available = {p.name: p for p in images.iterdir() if p.is_file()}
    stems = {p.stem: p for p in available.values()}
    for im in model.images.values():
        found = available.get(im.name) or stems.get(im.name) or stems.get(Path(im.name).stem)
        if found is None:
            raise DataError(f"{images}: no photo for camera {im.name!r} of {source}")
        im.name = found.name
    (out / "images").mkdir(parents=True, exist_ok=True)
    for im in model.images.values():
        shutil.copy2(images / im.name, out / "images" / im.name)
    (out / "sparse" / "0").mkdir(parents=True, exist_ok=True)
    write_model(model, out / "sparse" / "0")
    lines.append(f"wrote {out / 'sparse' / '0'} and {len(model.images)} photos to {out / 'images'}")
    return model, lines
