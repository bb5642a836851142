"""Where a model of the outdoor scene is wrong: test PSNR over sky, distant and near pixels, and its seeds.

    python scripts/train.py --config configs/colmap_cpu.yaml dataset.data_path=data/bench_outdoor/colmap \\
        exp_dir=/tmp/shell                     # and a second run, e.g. with model.seeding.mvs=true
    python -m benchmarks outdoor_regions /tmp/shell /tmp/sweep

The outdoor scene (``python -m benchmarks train --scene outdoor``, ``data/demo/outdoor.py``) is generated
by a ray caster, so every test pixel is known to be sky (no hit), distant (a hit beyond ``FAR`` units:
the far grass and the skyline) or near (the objects, the plaza, the grass around it). Per trained
experiment folder it prints the PSNR of each kind pooled over the test views, the median depth the model
renders where the sky is and the share of those pixels drawn nearer than ``NEAR_SKY`` (in front of the
skyline, at 30), and, when the run seeded points (``seed_points.npz``), how far the added points within
``SHELL_GAP`` of the centre (the sweep's; the sky shell lies at 10x the scene extent) lie from the
surface: per point, along each training view that has it in frame, its distance against the caster's
hit, the smallest relative difference over those views (a point hidden from one view is on the surface
another sees).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # imported where used: --help must not load torch (tests/test_benchmarks_cli.py)
    import torch

FAR = 10.0  # units from a test camera: beyond, the far grass and the skyline (30 away)
NEAR_SKY = 20.0
SHELL_GAP = 20.0


def _scene_frame(exp: Path) -> torch.Tensor:
    """The rotation from the scene's frame to the run's (``orientation.json``; identity without it)."""
    import torch

    path = exp / "orientation.json"
    if not path.is_file():
        return torch.eye(3, dtype=torch.float64)
    return torch.tensor(json.loads(path.read_text())["rotation"], dtype=torch.float64)


def _pixel_kinds(views: list) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    from pointrix_lite.data.demo.outdoor import _rays, build_outdoor_scene, outdoor_cameras
    from pointrix_lite.data.demo.raycast import trace

    cams, scene, kinds = {c.name: c for c in outdoor_cameras()}, build_outdoor_scene(), {}
    for view in views:
        cam = cams[Path(view.name).stem]
        origins, dirs = _rays(cam, 1)
        t = trace(scene.prims_for(cam, 1), origins, dirs).t.reshape(cam.height, cam.width)
        kinds[view.name] = (np.isinf(t), np.isfinite(t) & (t > FAR), t <= FAR)
    return kinds


def _seed_error(exp: Path, dataset, rotation: torch.Tensor) -> str:
    import torch

    from pointrix_lite.data.demo.outdoor import build_outdoor_scene
    from pointrix_lite.data.demo.raycast import trace
    from pointrix_lite.data.seeding.sky import project

    with np.load(exp / "seed_points.npz") as kept:
        xyz = torch.from_numpy(kept["xyz"][len(dataset.point_cloud) :]).double()
    centre = torch.stack([v.camera.camera_center.double() for v in dataset.train_views]).mean(0)
    xyz = xyz[(xyz - centre).norm(dim=1) < SHELL_GAP]
    if not len(xyz):
        return "no seeded points near the scene"
    prims = [d.prim for d in build_outdoor_scene().decals]
    rel = torch.full((len(xyz),), float("inf"), dtype=torch.float64)
    for view in dataset.train_views:
        inside = project(view, xyz)[2]
        if not inside.any():
            continue
        origin = view.camera.camera_center.double()
        ray = xyz[inside] - origin
        dist = ray.norm(dim=1)
        hit = trace(
            prims, np.repeat((origin @ rotation).numpy()[None], len(ray), 0), ((ray / dist[:, None]) @ rotation).numpy()
        )
        err = ((dist - torch.from_numpy(hit.t)) / torch.from_numpy(hit.t)).abs()
        rel[inside] = torch.minimum(rel[inside], err.nan_to_num(float("inf")))
    radius = np.percentile((xyz - centre).norm(dim=1).numpy(), 99)
    far = float(((dataset.point_cloud.xyz.double() - centre).norm(dim=1) > FAR / 2).double().mean())
    return (
        f"{len(xyz):,} seeded points within {SHELL_GAP:g} of the centre (99% within {radius:.2f}; "
        f"{far * 100:.0f}% of the data set's cloud lies beyond {FAR / 2:g}): "
        f"{float((rel < 0.01).double().mean()) * 100:.1f}% within 1% of a surface's depth, "
        f"{float((rel < 0.03).double().mean()) * 100:.1f}% within 3%"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks outdoor_regions", description=__doc__.splitlines()[0])
    parser.add_argument("exp_dirs", nargs="+", type=Path, help="experiment folders trained on the outdoor scene")
    args = parser.parse_args(argv)

    import torch

    from pointrix_lite.cli.common import load_components
    from pointrix_lite.engine.experiment import load_experiment
    from pointrix_lite.model.gaussian_model import GaussianModel
    from pointrix_lite.registry import DATASETS, RENDERERS

    load_components([])
    kinds: dict | None = None
    for exp in args.exp_dirs:
        cfg = load_experiment(exp / "config.yaml", [])
        dataset = DATASETS.build(cfg.dataset, "dataset", device="cpu")
        kinds = kinds or _pixel_kinds(dataset.test_views)
        renderer, model = RENDERERS.build(cfg.renderer, "renderer"), GaussianModel.from_ply(exp / "point_cloud.ply")
        sq: dict[str, list[np.ndarray]] = {"sky": [], "distant": [], "near": []}
        sky_depth = []
        with torch.no_grad():
            for view in dataset.test_views:
                out = renderer(model, [view.camera], dataset.background)
                err = ((out["rgb"][0].clamp(0, 1) - view.image.float() / 255) ** 2).mean(-1).numpy()
                for name, mask in zip(sq, kinds[view.name]):
                    sq[name].append(err[mask])
                sky_depth.append(out["depth"][0, ..., 0].numpy()[kinds[view.name][0]])
        psnr = {k: -10 * np.log10(np.concatenate(v).mean()) for k, v in sq.items()}
        depth = np.concatenate(sky_depth)
        print(
            f"{exp}: PSNR sky {psnr['sky']:.2f} dB, distant {psnr['distant']:.2f}, near {psnr['near']:.2f} "
            f"({', '.join(f'{k} {sum(m.size for m in v):,} px' for k, v in sq.items())}); sky drawn at median "
            f"depth {np.median(depth):.1f}, {float((depth < NEAR_SKY).mean()) * 100:.0f}% nearer than {NEAR_SKY:g}"
        )
        if (exp / "seed_points.npz").is_file():
            print(f"  {_seed_error(exp, dataset, _scene_frame(exp))}")
    return 0
