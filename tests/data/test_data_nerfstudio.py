"""nerfstudio's transforms.json: a COLMAP scene written as nerfstudio's ``colmap_to_json`` writes it
(applied_transform, OpenGL camera-to-world, sparse_pc.ply in its frame) loads as the same cameras, images and
points as the COLMAP scene; a Polycam-style file with per-frame intrinsics and masks; nerfstudio's own
converter where nerfstudio is installed; bad files in one line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pycolmap
import pytest
import torch
from data_helpers import make_pycolmap_scene
from PIL import Image

from pointrix_lite.data.pointcloud import PointCloud, write_ply_points
from pointrix_lite.errors import DataError
from pointrix_lite.registry import DATASETS


def build(kind: str, root: Path, **options):
    return DATASETS.build({"type": kind, "data_path": str(root), **options}, "dataset")


def colmap_to_json(colmap_root: Path, out: Path) -> None:
    """nerfstudio 1.1.5's process_data.colmap_utils.colmap_to_json (and create_ply_from_colmap), as its
    source does it: c2w from COLMAP's w2c, y/z flipped, world x/y swapped and z negated."""
    rec = pycolmap.Reconstruction(str(colmap_root / "sparse" / "0"))
    cam = rec.cameras[1]
    fx, fy, cx, cy = cam.params[:4]
    frames = []
    for image in sorted(rec.images.values(), key=lambda im: im.name):
        w2c = np.eye(4)
        w2c[:3, :] = image.cam_from_world().matrix()
        c2w = np.linalg.inv(w2c)
        c2w[0:3, 1:3] *= -1
        c2w = c2w[np.array([1, 0, 2, 3]), :]
        c2w[2, :] *= -1
        frames.append(
            {"file_path": f"images/{image.name}", "transform_matrix": c2w.tolist(), "colmap_im_id": image.image_id}
        )
    applied = np.eye(4)[:3, :][np.array([1, 0, 2]), :]
    applied[2, :] *= -1
    xyz = np.array([p.xyz for p in rec.points3D.values()])
    rgb = np.array([p.color for p in rec.points3D.values()], dtype=np.float32) / 255.0
    write_ply_points(out / "sparse_pc.ply", PointCloud.from_numpy(xyz @ applied[:3, :3].T + applied[:3, 3], rgb))
    meta = {
        "w": cam.width,
        "h": cam.height,
        "fl_x": fx,
        "fl_y": fy,
        "cx": cx,
        "cy": cy,
        "k1": 0.0,
        "k2": 0.0,
        "p1": 0.0,
        "p2": 0.0,
        "camera_model": "OPENCV",
        "frames": frames,
        "applied_transform": applied.tolist(),
        "ply_file_path": "sparse_pc.ply",
    }
    (out / "transforms.json").write_text(json.dumps(meta, indent=2))


def _same_scene(a, b) -> None:
    for va, vb in zip(a.train_views + a.test_views, b.train_views + b.test_views, strict=True):
        assert va.name == vb.name
        np.testing.assert_array_equal(va.image.numpy(), vb.image.numpy())
        np.testing.assert_allclose(va.camera.viewmat.numpy(), vb.camera.viewmat.numpy(), atol=1e-5)
        assert (va.camera.fx, va.camera.cy, va.camera.width) == pytest.approx(
            (vb.camera.fx, vb.camera.cy, vb.camera.width)
        )
    order = [np.lexsort(np.round(c.point_cloud.xyz.numpy(), 4).T) for c in (a, b)]  # the files list points apart
    np.testing.assert_allclose(a.point_cloud.xyz.numpy()[order[0]], b.point_cloud.xyz.numpy()[order[1]], atol=1e-5)
    np.testing.assert_array_equal(a.point_cloud.rgb.numpy()[order[0]], b.point_cloud.rgb.numpy()[order[1]])


def test_a_colmap_scene_through_transforms_json_is_the_same_scene(tmp_path):
    make_pycolmap_scene(tmp_path / "colmap", n=9, size=(16, 12))
    ns = tmp_path / "ns"
    shutil.copytree(tmp_path / "colmap" / "images", ns / "images")
    colmap_to_json(tmp_path / "colmap", ns)
    _same_scene(build("ColmapDataset", tmp_path / "colmap"), build("NerfstudioDataset", ns))
    # The file itself works as data_path too, and the render CLI finds the layout.
    assert len(build("NerfstudioDataset", ns / "transforms.json").train_views) == 7
    from pointrix_lite.cli.render import LAYOUT_MARKERS

    assert ("transforms.json", "NerfstudioDataset") in LAYOUT_MARKERS


def test_nerfstudio_own_converter_where_installed(tmp_path):
    colmap_utils = pytest.importorskip(
        "nerfstudio.process_data.colmap_utils", reason="nerfstudio not installed (pip install nerfstudio==1.1.5)"
    )
    make_pycolmap_scene(tmp_path / "colmap", n=9, size=(16, 12))
    ns = tmp_path / "ns"
    shutil.copytree(tmp_path / "colmap" / "images", ns / "images")
    colmap_utils.colmap_to_json(recon_dir=tmp_path / "colmap" / "sparse" / "0", output_dir=ns)
    _same_scene(build("ColmapDataset", tmp_path / "colmap"), build("NerfstudioDataset", ns))


def test_a_polycam_style_file_with_per_frame_intrinsics_masks_and_no_points(tmp_path, capsys):
    rng = np.random.default_rng(0)
    frames = []
    (tmp_path / "images").mkdir()
    (tmp_path / "masks").mkdir()
    for i in range(4):
        Image.fromarray(rng.integers(0, 256, (12, 16, 3), dtype=np.uint8)).save(tmp_path / "images" / f"f{i}.jpg")
        keep = np.ones((12, 16), np.uint8) * 255
        keep[:, :4] = 0
        Image.fromarray(keep).save(tmp_path / "masks" / f"f{i}.png")
        c2w = np.eye(4)
        c2w[:3, 3] = [0.2 * i, 0.0, 3.0]  # OpenGL: looking down -z, at the origin
        frames.append(
            {
                "file_path": f"./images/f{i}.jpg",
                "transform_matrix": c2w.tolist(),
                "mask_path": f"masks/f{i}.png",
                "fl_x": 14.0 + i,
                "fl_y": 14.0 + i,
                "cx": 8.0,
                "cy": 6.0,
                "w": 16,
                "h": 12,
                "depth_file_path": f"depth/f{i}.png",
            }
        )
    (tmp_path / "transforms.json").write_text(json.dumps({"frames": frames}))
    ds = build("NerfstudioDataset", tmp_path, eval=False)
    out = capsys.readouterr().out
    assert "4 frames name a depth_file_path" in out and "random points" in out
    assert sorted(v.camera.fx for v in ds.train_views) == [14.0, 15.0, 16.0, 17.0]
    for v in ds.train_views:
        assert not v.mask[:, :4].any() and v.mask[:, 4:].all()
        # Camera i sits at (0.2 i, 0, 3) looking down OpenGL's -z: the origin lies 3 ahead and 0.2 i to its left.
        i = int(v.name[1:])
        p = v.camera.viewmat.double() @ torch.tensor([0.0, 0.0, 0.0, 1.0], dtype=torch.float64)
        assert float(p[2]) == pytest.approx(3.0, abs=1e-5)
        u, w = v.camera.fx * p[0] / p[2] + v.camera.cx, v.camera.fy * p[1] / p[2] + v.camera.cy
        assert (float(u), float(w)) == pytest.approx((8.0 - (14.0 + i) * 0.2 * i / 3.0, 6.0), abs=1e-4)


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda m: m.update(frames=[]), "no frames"),
        (lambda m: m["frames"][0].update(transform_matrix=[1, 2]), "transform_matrix must be"),
        (lambda m: m["frames"][0].update(file_path="../x.png"), "lies outside"),
        (lambda m: m.pop("fl_x"), "no fl_x"),
        (lambda m: m.update(camera_model="EQUIRECTANGULAR"), "camera_model EQUIRECTANGULAR"),
        (lambda m: m.update(applied_transform="nope"), "applied_transform must be"),
    ],
)
def test_bad_files_are_one_line_naming_the_file(tmp_path, edit, message):
    make_pycolmap_scene(tmp_path / "colmap", n=3, size=(16, 12))
    ns = tmp_path / "ns"
    shutil.copytree(tmp_path / "colmap" / "images", ns / "images")
    colmap_to_json(tmp_path / "colmap", ns)
    meta = json.loads((ns / "transforms.json").read_text())
    edit(meta)
    (ns / "transforms.json").write_text(json.dumps(meta))
    with pytest.raises(DataError) as e:
        build("NerfstudioDataset", ns)
    assert str(e.value).startswith(str(ns / "transforms.json")) and message in str(e.value), str(e.value)
    assert "\n" not in str(e.value)


def test_the_converted_scene_is_made_again_when_the_point_cloud_changes(tmp_path):
    make_pycolmap_scene(tmp_path / "colmap", n=9, size=(16, 12))
    ns = tmp_path / "ns"
    shutil.copytree(tmp_path / "colmap" / "images", ns / "images")
    colmap_to_json(tmp_path / "colmap", ns)
    first = build("NerfstudioDataset", ns).point_cloud.xyz.numpy()
    write_ply_points(ns / "sparse_pc.ply", PointCloud.from_numpy(np.zeros((4, 3)), np.ones((4, 3))))
    again = build("NerfstudioDataset", ns).point_cloud.xyz.numpy()
    assert len(first) == 20 and len(again) == 4 and not again.any()
