"""``process.py --import``: OpenSfM / ODM ``reconstruction.json`` and Metashape camera XML, written here in the
tools' documented formats from a known COLMAP scene, import as that scene: every point lands on the same
pixel through the imported camera (distortion included) as through the original; bad files in one line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pycolmap
import pytest
from PIL import Image
from scipy.spatial.transform import Rotation

from pointrix_lite.cli.process import main as process_main
from pointrix_lite.errors import DataError
from pointrix_lite.process.imports import import_project

W, H = 64, 48
CAMERAS = {
    "RADIAL": [50.0, W / 2, H / 2, -0.05, 0.01],
    "OPENCV": [50.0, 52.0, 33.5, 22.0, -0.05, 0.01, 0.002, -0.001],
}


def _known_scene(root: Path, model: str) -> pycolmap.Reconstruction:
    rng = np.random.default_rng(1)
    rec = pycolmap.Reconstruction()
    rec.add_camera_with_trivial_rig(pycolmap.Camera(model=model, width=W, height=H, params=CAMERAS[model], camera_id=1))
    (root / "photos").mkdir(parents=True)
    for i in range(5):
        R = Rotation.from_rotvec(rng.normal(scale=0.2, size=3)).as_matrix()
        pose = pycolmap.Rigid3d(pycolmap.Rotation3d(R), rng.normal(scale=0.3, size=3) + [0, 0, 4])
        rec.add_image_with_trivial_frame(pycolmap.Image(name=f"IMG_{i}.jpg", camera_id=1, image_id=i + 1), pose)
        Image.fromarray(rng.integers(0, 256, (H, W, 3), dtype=np.uint8)).save(root / "photos" / f"IMG_{i}.jpg")
    for _ in range(20):
        rec.add_point3D(rng.normal(scale=0.5, size=3), pycolmap.Track(), rng.integers(0, 256, 3).astype(np.uint8))
    return rec


def _w2c(image) -> np.ndarray:
    return image.cam_from_world().matrix()


def write_opensfm(rec: pycolmap.Reconstruction, path: Path) -> None:
    """OpenSfM's reconstruction.json: normalised camera units (larger side), angle-axis world-to-camera poses."""
    cam = rec.cameras[1]
    size = max(W, H)
    p = list(cam.params)
    if cam.model.name == "RADIAL":
        camera = {"projection_type": "perspective", "focal": p[0] / size, "k1": p[3], "k2": p[4]}
    else:
        camera = {
            "projection_type": "brown",
            "focal_x": p[0] / size,
            "focal_y": p[1] / size,
            "c_x": (p[2] - W / 2) / size,
            "c_y": (p[3] - H / 2) / size,
            "k1": p[4],
            "k2": p[5],
            "p1": p[6],
            "p2": p[7],
            "k3": 0.0,
        }
    camera.update(width=W, height=H)
    shots = {}
    for image in rec.images.values():
        m = _w2c(image)
        shots[image.name] = {
            "camera": "v2 test cam",
            "rotation": Rotation.from_matrix(m[:, :3]).as_rotvec().tolist(),
            "translation": m[:, 3].tolist(),
        }
    points = {str(k): {"coordinates": list(p.xyz), "color": [int(c) for c in p.color]} for k, p in rec.points3D.items()}
    path.write_text(json.dumps([{"cameras": {"v2 test cam": camera}, "shots": shots, "points": points}]))


def write_metashape(rec: pycolmap.Reconstruction, path: Path) -> None:
    """Metashape's camera export: f and centre offsets in pixels, P1/P2 in Metashape's order, camera-to-chunk."""
    fx, fy, cx, cy, k1, k2, p1, p2 = CAMERAS["OPENCV"]
    cams = []
    for image in rec.images.values():
        c2w = np.linalg.inv(np.vstack([_w2c(image), [0, 0, 0, 1]]))
        label = Path(image.name).stem
        cams.append(
            f'<camera id="{image.image_id}" sensor_id="0" label="{label}"><transform>'
            + " ".join(repr(float(v)) for v in c2w.reshape(-1))
            + "</transform></camera>"
        )
    path.write_text(
        '<?xml version="1.0" encoding="UTF-8"?><document version="1.5.0"><chunk><sensors>'
        f'<sensor id="0" label="cam" type="frame"><resolution width="{W}" height="{H}"/>'
        f'<calibration type="frame" class="adjusted"><resolution width="{W}" height="{H}"/><f>{fy}</f><b1>{fx - fy}</b1>'
        f"<cx>{cx - W / 2}</cx><cy>{cy - H / 2}</cy><k1>{k1}</k1><k2>{k2}</k2><p1>{p2}</p1><p2>{p1}</p2></calibration>"
        f'</sensor></sensors><cameras>{"".join(cams)}<camera id="99" sensor_id="0" label="unaligned"/></cameras>'
        "</chunk></document>"
    )


def _pixels(rec: pycolmap.Reconstruction, image, pts: np.ndarray) -> np.ndarray:
    """Where ``pts`` [N, 3] land in ``image`` through its camera, distortion included (pycolmap's projection)."""
    m = _w2c(image)
    return rec.cameras[image.camera_id].img_from_cam(pts @ m[:, :3].T + m[:, 3])


def _same_pixels(original: pycolmap.Reconstruction, imported_dir: Path) -> None:
    got = pycolmap.Reconstruction(str(imported_dir))
    assert len(got.images) == len(original.images)
    pts = np.array([p.xyz for p in original.points3D.values()])
    for image in original.images.values():
        other = got.find_image_with_name(image.name)
        assert other is not None, image.name
        np.testing.assert_allclose(_pixels(got, other, pts), _pixels(original, image, pts), atol=1e-6)


@pytest.mark.parametrize("model", ["RADIAL", "OPENCV"])
def test_an_opensfm_reconstruction_imports_as_the_scene_it_was_made_from(tmp_path, model):
    rec = _known_scene(tmp_path, model)
    write_opensfm(rec, tmp_path / "reconstruction.json")
    out = tmp_path / "out"
    imported, _ = import_project(tmp_path / "reconstruction.json", tmp_path / "photos", out)
    _same_pixels(rec, out / "sparse" / "0")
    assert sorted(p.name for p in (out / "images").iterdir()) == [f"IMG_{i}.jpg" for i in range(5)]
    np.testing.assert_allclose(np.sort(imported.xyz, axis=0), np.sort([p.xyz for p in rec.points3D.values()], axis=0))


def test_a_metashape_export_imports_through_the_cli(tmp_path, capsys):
    rec = _known_scene(tmp_path, "OPENCV")
    write_metashape(rec, tmp_path / "cameras.xml")
    out = tmp_path / "out dir"
    args = ["--import", str(tmp_path / "cameras.xml"), "--images", str(tmp_path / "photos"), "--out", str(out)]
    assert process_main(args) == 0
    printed = capsys.readouterr().out
    assert "read 5 cameras (FULL_OPENCV)" in printed and "random ones" in printed
    assert f"next: python scripts/train.py --config configs/colmap_cpu.yaml 'dataset.data_path={out}'" in printed
    _same_pixels(rec, out / "sparse" / "0")
    assert process_main(args) == 2  # an existing output needs --overwrite
    assert "pass --overwrite" in capsys.readouterr().err
    assert process_main([*args, "--overwrite"]) == 0


@pytest.mark.parametrize(
    "name, content, message",
    [
        ("reconstruction.json", "[]", "not an OpenSfM reconstruction list"),
        ("reconstruction.json", '[{"cameras": {}, "shots": {}}]', "no shots"),
        (
            "reconstruction.json",
            '[{"cameras": {"c": {"projection_type": "spherical", "width": 4, "height": 2}}, '
            '"shots": {"a.jpg": {"camera": "c", "rotation": [0, 0, 0], "translation": [0, 0, 0]}}}]',
            "spherical",
        ),
        ("cameras.xml", "<document><chunk/></document>", "not a Metashape camera export"),
        ("cameras.xml", "<document", "cannot read"),
    ],
)
def test_bad_projects_are_one_line(tmp_path, name, content, message):
    (tmp_path / name).write_text(content)
    (tmp_path / "photos").mkdir()
    with pytest.raises(DataError) as e:
        import_project(tmp_path / name, tmp_path / "photos", tmp_path / "out")
    assert str(e.value).startswith(str(tmp_path / name)) and message in str(e.value) and "\n" not in str(e.value)
