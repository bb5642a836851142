"""render.py --outputs depth,median_depth,normal,normal_depth on the shared short demo run, against the ray caster."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from PIL import Image

from benchmarks.geometry import scene_truth, true_surface
from pointrix_lite.cli.render import main as render_main
from pointrix_lite.data.demo.scene import camera_ring
from tests.integration.conftest import SCALE


def test_depth_and_normal_maps(trained_run, tmp_path, capsys):
    out = tmp_path / "maps"
    args = [
        "--exp-dir",
        str(trained_run.exp_dir),
        "--out",
        str(out),
        "--outputs",
        "rgb,depth,median_depth,normal,normal_depth",
    ]
    assert render_main(args) == 0
    capsys.readouterr()
    folder = out / "renders" / "test"
    names = sorted(p.stem for p in (folder / "render").glob("*.png"))
    cams = {c.name: c for c in camera_ring()}
    errors = {"depth": [], "median_depth": []}
    for name in names:
        for kind in errors:
            png = np.asarray(Image.open(folder / kind / f"{name}.png"))
            depth = np.load(folder / kind / f"{name}.npy")
            assert png.dtype == np.uint16 and np.abs(png / 1000.0 - depth).max() <= 0.0005 + 1e-6  # millimetres
        for kind in ("normal", "normal_depth"):
            n = np.load(folder / kind / f"{name}.npy")
            length = np.linalg.norm(n, axis=-1)
            assert np.all((np.abs(length - 1) < 1e-3) | (length == 0))
        # the ray caster's depth of the same camera, at the run's scale (dataset.scale)
        c = cams[name]
        cam = replace(
            c,
            fx=c.fx / SCALE,
            fy=c.fy / SCALE,
            cx=c.cx / SCALE,
            cy=c.cy / SCALE,
            width=c.width // SCALE,
            height=c.height // SCALE,
        )
        _, (truth,) = true_surface([cam], scene_truth("demo")[1])
        for kind, found in errors.items():
            depth = np.load(folder / kind / f"{name}.npy")
            both = (depth > 0) & (truth > 0)
            found.append(np.abs(depth[both] - truth[both]) / truth[both])
    for kind, found in errors.items():
        assert np.median(np.concatenate(found)) < 0.02, kind
    page = (out / "report.html").read_text()
    kinds = ("depth", "median_depth", "normal")
    assert [page.count(f'data-kind="{kind}"') for kind in kinds] == [len(names)] * 3


def test_outputs_is_checked(trained_run, capsys):
    assert render_main(["--exp-dir", str(trained_run.exp_dir), "--outputs", "rgb,height"]) == 2
    assert (
        "--outputs: unknown height; choose from rgb, depth, median_depth, normal, normal_depth"
        in capsys.readouterr().err
    )
