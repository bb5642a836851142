"""The generated COLMAP scenes the training benchmarks run on (``--scene NAME``), made on first use under data/.

* ``photo``: the 56-view 400x300 photo-textured scene (:mod:`pointrix_lite.data.demo.photo`);
* ``photo160``: the same scene as 160 views of 800x800 (issue 24's end-of-run scene);
* ``clutter``: the photo scene plus thin poles and planks, background panels at several depths and
  textures from a zone plate to blocky photos (:mod:`pointrix_lite.data.demo.clutter`);
* ``outdoor``: the photo scene's solids under a bright sky behind a distant skyline, cameras low enough
  that a third of each view is sky and skyline (:mod:`pointrix_lite.data.demo.outdoor`; issue 43's floaters).

(:mod:`benchmarks.scenes` holds the rasterizer's scenes: Gaussians and one camera, no images.)
"""

from __future__ import annotations

import importlib
from pathlib import Path

from benchmarks._common import REPO

# name -> (module under pointrix_lite.data.demo, folder under data/, (n_views, width, height) or () for the default)
SCENES: dict[str, tuple[str, str, tuple[int, ...]]] = {
    "photo": ("photo", "bench_photo", ()),
    "photo160": ("photo", "bench_photo_160x800", (160, 800, 800)),
    "clutter": ("clutter", "bench_clutter", ()),
    "outdoor": ("outdoor", "bench_outdoor", ()),
}


def scene_root(name: str) -> Path:
    """The COLMAP folder of benchmark scene ``name``, generated first if absent; a one-line exit on failure."""
    from pointrix_lite.errors import PointrixError

    module, folder, shape = SCENES[name]
    ensure = getattr(importlib.import_module(f"pointrix_lite.data.demo.{module}"), f"ensure_{module}_scene")
    try:
        return ensure(REPO / "data" / folder, *shape) / "colmap"
    except PointrixError as e:  # e.g. scikit-image missing: one line, not a traceback
        raise SystemExit(f"error: --scene {name}: {e}") from None
