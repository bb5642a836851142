"""Frame time of the viewer: camera conversion + render + JPEG encode, what one browser frame costs.

    .venv/bin/python -m benchmarks viewer [--counts 20000,100000,300000] [--sizes 256,512,1024] [--reps 7]

Scenes are the rasterizer benchmark's seeded Gaussian cube (``benchmarks/scenes.py``, SH degree 3)
loaded into a GaussianModel; canvases are 16:9 with the given longest side (what ``--max-res``
caps). Each row is the median of ``--reps`` frames after one warm-up, measured in this process (the
viewer renders in-process too).
"""

from __future__ import annotations

import math
import statistics
import time
from typing import Any

from benchmarks._common import parser
from benchmarks.scenes import make_scene


def build_model(n: int, sh_degree: int = 3) -> Any:
    """A ``GaussianModel`` holding the seeded cube of ``n`` Gaussians (raw, pre-activation parameters)."""
    import torch

    from pointrix_lite.model import GaussianModel

    s = make_scene(160, 160, n, sh_degree)
    params = {
        "means": s["means"],
        "quats": s["quats"],
        "scales": torch.log(s["scales"]),
        "opacities": torch.logit(s["opacities"]),
        "sh0": s["colors"][:, :1],
        "shN": s["colors"][:, 1:],
    }
    model = GaussianModel(GaussianModel.Config(sh_degree=sh_degree, init_num_points=1))
    model.load_params(params)
    model.step = 10**6
    return model


def main(argv: list[str] | None = None) -> int:
    p = parser(__name__, __doc__)
    p.add_argument("--counts", default="20000,100000,300000")
    p.add_argument("--sizes", default="256,512,1024", help="longest canvas side(s), 16:9")
    p.add_argument("--reps", type=int, default=7)
    p.add_argument("--backend", default="auto")
    args = p.parse_args(argv)

    from viser._scene_api import _encode_image_binary  # exactly what set_background_image does

    from pointrix_lite.renderer.renderer import GaussianRenderer
    from pointrix_lite.viewer.camera import ViewState, camera_from_view, render_size
    from pointrix_lite.viewer.scene import SceneView

    print("| Gaussians | frame | render | JPEG encode | total | fps |")
    print("| --- | --- | --- | --- | --- | --- |")
    for n in (int(c) for c in args.counts.split(",")):
        scene = SceneView(
            build_model(n), GaussianRenderer(GaussianRenderer.Config(backend=args.backend)), (0.0, 0.0, 0.0)
        )
        for long_side in (int(s) for s in args.sizes.split(",")):
            w, h = render_size(1920, 1080, long_side)
            view = ViewState((1.0, 0.0, 0.0, 0.0), (0.0, 0.0, -3.0), 2 * math.atan(0.5), 1920, 1080)
            renders, encodes = [], []
            for rep in range(args.reps + 1):
                t0 = time.perf_counter()
                image = scene.render(camera_from_view(view, w, h))
                t1 = time.perf_counter()
                _encode_image_binary(image, "jpeg", jpeg_quality=85)
                t2 = time.perf_counter()
                if rep:  # the first frame warms caches and thread pools
                    renders.append(t1 - t0)
                    encodes.append(t2 - t1)
            r, e = statistics.median(renders) * 1e3, statistics.median(encodes) * 1e3
            print(f"| {n:,} | {w}x{h} | {r:.1f} ms | {e:.1f} ms | {r + e:.1f} ms | {1000 / (r + e):.0f} |", flush=True)
    return 0
