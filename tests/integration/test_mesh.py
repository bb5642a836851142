"""scripts/mesh.py on the shared short demo run: files that other readers open, on the true surface."""

from __future__ import annotations

import re

import numpy as np
import pytest
import trimesh
from plyfile import PlyData
from scipy.spatial import cKDTree

from benchmarks.geometry import scene_truth, true_surface
from pointrix_lite.cli.mesh import main as mesh_main
from pointrix_lite.data.demo.scene import camera_ring


def test_mesh_files_reread_and_on_the_true_surface(trained_run, tmp_path, capsys):
    out = tmp_path / "geometry"
    args = ["--exp-dir", str(trained_run.exp_dir), "--out", str(out), "--resolution", "96", "--points", "20000"]
    assert mesh_main(args) == 0
    printed = capsys.readouterr().out
    n_verts, n_faces = (
        int(x.replace(",", "")) for x in re.search(r"mesh: ([\d,]+) vertices, ([\d,]+) triangles", printed).groups()
    )
    n_points = int(re.search(r"points: ([\d,]+) on the surface", printed).group(1).replace(",", ""))

    ply = trimesh.load(out / "mesh.ply", process=False)
    assert (len(ply.vertices), len(ply.faces)) == (n_verts, n_faces) and n_faces > 1000
    assert ply.visual.vertex_colors.shape == (n_verts, 4)
    glb = trimesh.load(out / "mesh.glb", force="mesh", process=False)
    assert (len(glb.vertices), len(glb.faces)) == (n_verts, n_faces)
    # glTF is +y up: the same vertices turned 180 degrees about z
    np.testing.assert_allclose(glb.vertices, ply.vertices * [-1, -1, 1], atol=1e-5)
    points = PlyData.read(out / "points.ply")["vertex"]
    assert points.count == n_points > 1000 and {"nx", "red"} <= set(points.data.dtype.names)

    # on the scene's surface: the ray caster's first hits from the demo's cameras (the model's own frame)
    truth, _ = true_surface(camera_ring()[::4], scene_truth("demo")[1], stride=4)
    diag = np.linalg.norm(truth.max(0) - truth.min(0))
    distance = cKDTree(truth).query(np.asarray(ply.vertices))[0]
    assert np.median(distance) < 0.01 * diag, np.median(distance) / diag

    # mesh.py streams the views (rendered twice, never all held): the same files as the stages on held views
    import torch

    from pointrix_lite.cli.common import open_experiment
    from pointrix_lite.geometry.extract import fuse, render_views, scene_box, surface_points

    ev = open_experiment(trained_run.exp_dir, out=tmp_path / "eval")
    ev.model.eval()
    with torch.no_grad():
        held = render_views(ev.model, ev.renderer, [v.camera for v in ev.dataset.train_views], ev.dataset.background)
    volume = fuse(held, *scene_box(held), resolution=96)
    np.testing.assert_array_equal(volume.extract_mesh()[0], np.asarray(ply.vertices, dtype=np.float32))
    xyz, _, _ = surface_points(held, volume, 20000)
    np.testing.assert_array_equal(xyz, np.stack([points["x"], points["y"], points["z"]], -1))

    # an existing output is refused in one line unless --overwrite
    assert mesh_main(args) == 2
    assert "already holds mesh.ply, mesh.glb, points.ply; pass --overwrite" in capsys.readouterr().err
    assert mesh_main([*args, "--overwrite"]) == 0


def test_median_depth_mesh_is_on_the_true_surface(trained_run, tmp_path):
    # mesh.py --depth median's stages on every 4th training view (the median walk is the slow part)
    import torch

    from pointrix_lite.cli.common import open_experiment
    from pointrix_lite.geometry.extract import fuse, render_views, scene_box

    ev = open_experiment(trained_run.exp_dir, out=tmp_path / "eval")
    ev.model.eval()
    cameras = [v.camera for v in list(ev.dataset.train_views)[::4]]
    with torch.no_grad():
        views = render_views(ev.model, ev.renderer, cameras, ev.dataset.background, depth="median")
    verts, faces, _, _ = fuse(views, *scene_box(views), resolution=96).extract_mesh()
    truth, _ = true_surface(camera_ring()[::4], scene_truth("demo")[1], stride=4)
    diag = np.linalg.norm(truth.max(0) - truth.min(0))
    assert len(faces) > 1000
    assert np.median(cKDTree(truth).query(np.asarray(verts))[0]) < 0.01 * diag


def test_bad_options_are_one_line(trained_run, capsys):
    assert mesh_main(["--exp-dir", str(trained_run.exp_dir), "--resolution", "0"]) == 2
    assert capsys.readouterr().err.strip() == "error: --resolution: must be > 0, got 0"
    assert mesh_main(["--exp-dir", str(trained_run.exp_dir), "--min-alpha", "1.5"]) == 2
    assert "--min-alpha: must be in [0, 1)" in capsys.readouterr().err
    with pytest.raises(SystemExit) as stop:  # argparse's own check, one line
        mesh_main(["--exp-dir", str(trained_run.exp_dir), "--depth", "mean"])
    assert stop.value.code == 2 and "argument --depth: invalid choice: 'mean'" in capsys.readouterr().err
