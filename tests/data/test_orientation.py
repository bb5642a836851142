"""``dataset.orientation: manhattan`` (data/orientation.py): the frame found on constructed scenes in
known frames, the turned scene rendering the same, and the dataset option end to end."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from data_helpers import make_pycolmap_scene, random_rotation

from pointrix_lite.config import ConfigError, from_dict
from pointrix_lite.data.cameras import Camera, View
from pointrix_lite.data.colmap import ColmapDataset
from pointrix_lite.data.orientation import manhattan_rotation, rotate_scene, surface_normals


def room(rng: np.random.Generator, yawed_box: bool = True) -> np.ndarray:
    """Points on an axis-aligned floor and two walls, plus a smaller box turned 25 degrees about z."""
    u = lambda n, lo, hi: rng.uniform(lo, hi, n)  # noqa: E731
    n = 1500
    floor = np.c_[u(n, -2, 2), u(n, -2, 2), np.zeros(n)]
    wall_x = np.c_[np.full(n, -2.0), u(n, -2, 2), u(n, 0, 2)]
    wall_y = np.c_[u(n, -2, 2), np.full(n, 2.0), u(n, 0, 2)]
    parts = [floor, wall_x, wall_y]
    if yawed_box:  # two faces of a 1 x 1 x 0.6 box standing on the floor
        m = 600
        a = np.radians(25.0)
        yaw = np.array([[np.cos(a), -np.sin(a), 0], [np.sin(a), np.cos(a), 0], [0, 0, 1]])
        face_x = np.c_[np.full(m, 0.5), u(m, -0.5, 0.5), u(m, 0, 0.6)]
        face_y = np.c_[u(m, -0.5, 0.5), np.full(m, 0.5), u(m, 0, 0.6)]
        faces = np.r_[face_x, face_y]
        parts.append(faces @ yaw.T + np.array([0.5, -0.5, 0.0]))
    pts = np.concatenate(parts)
    return pts + rng.normal(0, 0.003, pts.shape)


def signed_permutation_error_deg(M: np.ndarray) -> float:
    """Degrees between ``M`` and the nearest matrix that permutes and signs the axes."""
    P = np.zeros((3, 3))
    P[np.arange(3), np.abs(M).argmax(axis=1)] = np.sign(M[np.arange(3), np.abs(M).argmax(axis=1)])
    return float(np.degrees(np.arccos(np.clip((np.trace(P.T @ M) - 1) / 2, -1, 1))))


def test_normals_and_planarity_of_a_sheet_and_a_blob() -> None:
    rng = np.random.default_rng(0)
    sheet = np.c_[rng.uniform(-1, 1, (300, 2)), rng.normal(0, 1e-3, 300)]
    blob = rng.normal(0, 1.0, (300, 3)) + 10.0
    normals, planarity = surface_normals(np.r_[sheet, blob])
    assert np.abs(normals[:300, 2]).min() > 0.99 and planarity[:300].min() > 0.95
    assert np.median(planarity[300:]) < 0.7


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_walls_frame_is_found_in_any_frame_and_a_turned_box_does_not_pull_it(seed: int) -> None:
    rng = np.random.default_rng(seed)
    pts = room(rng)
    R0, share0 = manhattan_rotation(pts)
    assert signed_permutation_error_deg(R0) < 0.5  # already aligned: (nearly) no turn
    np.testing.assert_allclose(R0, np.eye(3), atol=0.01)  # the nearest of the 24 equivalent frames
    Q = random_rotation(rng)  # SfM's arbitrary frame
    R, share = manhattan_rotation(pts @ Q.T)
    np.testing.assert_allclose(R @ R.T, np.eye(3), atol=1e-9)
    assert np.linalg.det(R) > 0
    assert signed_permutation_error_deg(R @ Q) < 0.5  # the walls, not a compromise with the box at 25 deg
    assert share == pytest.approx(share0, abs=0.02) and 0.7 < share < 0.95  # the box's faces are outliers


def test_too_few_points_leave_the_frame_alone(capsys) -> None:
    R, share = manhattan_rotation(np.zeros((3, 3)))
    assert np.array_equal(R, np.eye(3)) and np.isnan(share)
    from pointrix_lite.data.orientation import orient_to_axes
    from pointrix_lite.data.pointcloud import PointCloud

    cloud = PointCloud.from_numpy(np.ones((3, 3)), np.zeros((3, 3)))
    turned, R = orient_to_axes([], cloud)
    line = capsys.readouterr().out.strip()
    assert turned is cloud and np.array_equal(R, np.eye(3))
    assert (
        line == "orientation: not turned: the point cloud has 3 point(s), fewer than the 4 needed to find its surfaces"
    )


def test_a_turned_scene_projects_every_point_to_the_same_pixel() -> None:
    rng = np.random.default_rng(3)
    xyz = torch.from_numpy(rng.normal(size=(50, 3))).float()
    views = []
    for i in range(3):
        w2c = np.eye(4)
        w2c[:3, :3] = random_rotation(rng)
        w2c[:3, 3] = rng.normal(size=3) + np.array([0, 0, 6.0])
        cam = Camera(10.0, 10.0, 4.0, 3.0, 8, 6, torch.from_numpy(w2c).float(), f"c{i}")
        views.append(View(cam, torch.zeros(6, 8, 3, dtype=torch.uint8), f"c{i}", i))
    before = [(v.camera.viewmat.double() @ torch.cat([xyz.double(), torch.ones(50, 1)], 1).T)[:3] for v in views]
    centres = [v.camera.camera_center.clone() for v in views]
    R = random_rotation(rng)
    turned = rotate_scene(R, views, xyz)
    np.testing.assert_allclose(turned.double().numpy(), xyz.double().numpy() @ R.T, atol=1e-5)
    for v, cam_points, centre in zip(views, before, centres):
        after = (v.camera.viewmat.double() @ torch.cat([turned.double(), torch.ones(50, 1)], 1).T)[:3]
        torch.testing.assert_close(after, cam_points, atol=2e-5, rtol=0)  # camera coordinates, hence pixels
        turned_centre = torch.from_numpy(R) @ centre.double()
        torch.testing.assert_close(v.camera.camera_center.double(), turned_centre, atol=1e-5, rtol=0)


def test_colmap_dataset_orientation_turns_cameras_and_points_together(tmp_path) -> None:
    make_pycolmap_scene(tmp_path, n=6)
    plain = ColmapDataset(ColmapDataset.Config(data_path=str(tmp_path)))
    turned = ColmapDataset(ColmapDataset.Config(data_path=str(tmp_path), orientation="manhattan"))
    R = turned.world_rotation
    again = ColmapDataset(ColmapDataset.Config(data_path=str(tmp_path), orientation="manhattan"))
    assert np.array_equal(again.world_rotation, R)  # every load (a resume, render.py) finds the same frame
    assert np.array_equal(plain.world_rotation, np.eye(3)) and np.linalg.det(R) == pytest.approx(1.0)
    torch.testing.assert_close(turned.point_cloud.xyz, plain.point_cloud.xyz @ torch.from_numpy(R).float().T)
    for a, b in zip(plain.train_views + plain.test_views, turned.train_views + turned.test_views):
        assert torch.equal(a.image, b.image)
        turned_centre = torch.from_numpy(R) @ a.camera.camera_center.double()
        torch.testing.assert_close(b.camera.camera_center.double(), turned_centre, atol=1e-5, rtol=0)
    assert turned.scene_extent == pytest.approx(plain.scene_extent, rel=1e-5)


def test_unknown_orientation_is_a_config_error_naming_the_key(tmp_path) -> None:
    with pytest.raises(ConfigError, match=r"dataset\.orientation.*manhattan") as info:
        from_dict(ColmapDataset.Config, {"data_path": str(tmp_path), "orientation": "up"}, "dataset")
    assert "\n" not in str(info.value)


def test_a_training_run_records_the_turn_beside_its_outputs(tmp_path) -> None:
    import json

    from pointrix_lite.data.orientation import ORIENTATION_FILE, save_orientation

    R = random_rotation(np.random.default_rng(5))
    path = save_orientation(tmp_path, R)
    saved = json.loads(path.read_text())
    np.testing.assert_array_equal(np.array(saved["rotation"]), R)
    assert save_orientation(tmp_path, np.eye(3)) is None and not (tmp_path / ORIENTATION_FILE).exists()


def test_the_trainer_writes_the_turn_and_render_py_renders_the_ply_turned_alike(tmp_path, capsys) -> None:
    import json

    from pointrix_lite.cli.render import main as render_main
    from pointrix_lite.components import import_all
    from pointrix_lite.engine.experiment import load_experiment
    from pointrix_lite.engine.trainer import DefaultTrainer
    from pointrix_lite.io.ply import save_ply

    import_all()
    make_pycolmap_scene(tmp_path / "scene", n=9, size=(16, 12), params=[18.0, 20.0, 8.1, 5.9])  # 8 train, 1 test
    raw = {
        "name": "turned",
        "output_dir": str(tmp_path / "out"),
        "device": "cpu",
        "trainer": {"max_steps": 1, "val_interval": 0},
        "dataset": {"type": "ColmapDataset", "data_path": str(tmp_path / "scene"), "orientation": "manhattan"},
        "model": {"type": "GaussianModel", "sh_degree": 0},
        "renderer": {"type": "GaussianRenderer", "backend": "torch"},
        "hooks": [],
        "writers": [],
    }
    trainer = DefaultTrainer(load_experiment(None, data=raw), tmp_path / "exp", "cpu")
    assert not np.array_equal(trainer.dataset.world_rotation, np.eye(3))  # the 20 random points do turn it
    saved = json.loads((tmp_path / "exp" / "orientation.json").read_text())
    np.testing.assert_array_equal(np.array(saved["rotation"]), trainer.dataset.world_rotation)
    torch.testing.assert_close(trainer.model.params["means"].detach(), trainer.dataset.point_cloud.xyz)
    trainer.run()
    save_ply(trainer.model, tmp_path / "exp" / "point_cloud.ply")
    trained = json.loads((tmp_path / "exp" / "metrics.json").read_text())

    # scripts/render.py --ply --data: the data set is turned as the model was (orientation.json beside the PLY).
    args = ["--ply", str(tmp_path / "exp" / "point_cloud.ply"), "--data", str(tmp_path / "scene"), "--out"]
    assert render_main([*args, str(tmp_path / "render")]) == 0
    again = json.loads((tmp_path / "render" / "metrics.json").read_text())
    assert sorted(again["per_view"]) == sorted(trained["per_view"])
    for name, metrics in trained["per_view"].items():  # unturned cameras would see another image
        assert again["per_view"][name]["psnr"] == pytest.approx(metrics["psnr"], abs=1e-5)
    capsys.readouterr()
    saved["rotation"] = random_rotation(np.random.default_rng(9)).tolist()  # not the data's turn
    (tmp_path / "exp" / "orientation.json").write_text(json.dumps(saved))
    assert render_main([*args, str(tmp_path / "render2")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "orientation.json" in err and "\n" not in err
