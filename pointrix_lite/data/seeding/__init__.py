"""Initial points where the data set's cloud has none (issue 43), added before the model is built.

Structure from motion puts points only where features matched: untextured and thin surfaces get none,
and the sky none at all. MCMC and the default strategy only grow Gaussians next to existing ones, so
what the cloud misses is learnt late, or by floaters that the nearest Gaussians send towards it.

* ``mvs`` (:mod:`.plane_sweep`, :mod:`.fusion`): per training view, a plane-sweep depth map against its neighbours
  at a reduced size, kept where the neighbours' own depths agree, back-projected where the cloud is
  empty;
* ``sky`` (:mod:`.sky`): Gaussians on a far shell in the directions the training views see, so the
  sky and distant background start far away instead of being drawn by Gaussians near the scene.
* ``mvs: auto``: the sweep where it pays, judged by the shell. The sweep only finds near surfaces
  (distant ones have too little parallax at its reduced size), so in an open scene it crowds the
  initial cloud towards the centre, and training then draws sky and distance with Gaussians near the
  objects (docs/model.md: -3 dB on the outdoor scene's sky pixels, -4 dB on its distant ones, +0.05 on
  the near ones). A scene whose views look past the cloud into agreeing open directions (a shell of at
  least ``OPEN_SHARE`` of the asked points) is open: it gets the shell and no sweep; any other gets
  the sweep and no shell (the few directions such a shell holds are strays).

The options sit with the model's other ``init_*`` options (``model.seeding``); the engine applies them
to the data set's cloud before the model is built (``engine/build.py``), through :func:`seeded_cloud`,
which keeps the result in ``<exp_dir>/seed_points.npz``: a resumed run, ``render.py --exp-dir`` and the
viewer read it back instead of sweeping again, as long as the options, the code and the scene
(:func:`scene_key`: data folder, images, SfM model) are the same. Both stages draw from their own
generators (seeded by ``model.seed``), so a run's other random numbers are unchanged.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch

from ..pointcloud import PointCloud


@dataclass
class SeedingConfig:
    """``model.seeding``: what to add to the data set's initial cloud (all off by default)."""

    # plane-sweep depth of the training views fills where the cloud is empty; auto: only in scenes
    # without open sky (module docstring)
    mvs: bool | Literal["auto"] = False
    mvs_size: int = 160  # long side (px) of the views the sweep runs at
    mvs_depths: int = 64  # depth planes, uniform in inverse depth between the cloud's near and far
    mvs_neighbours: int = 4  # views each depth map is matched against
    mvs_max_points: int = 100_000  # at most this many points added (uniform subsample)
    # training views swept, spread over the capture (0: all); auto: one per 20 of trainer.max_steps, at
    # least 24 (spread.py), resolved by the engine; the sweep's cost grows with it, its points hardly
    mvs_views: int | Literal["auto"] = "auto"
    # also test every pixel on the planes holding a large share of the cloud (a floor SfM saw near the centre)
    mvs_planes: bool = True
    sky: int = 0  # Gaussians on a far shell (0 = none)
    sky_radius: float = 10.0  # shell radius in units of the scene extent
    # shell directions kept where the views see no cloud and agree on the colour this well (1: all seen)
    sky_max_spread: float = 0.02

    def __post_init__(self) -> None:
        from ...config import OptionError

        def bad(key: str, problem: str) -> None:
            raise OptionError(key, problem, "model.seeding")

        if self.mvs not in (True, False, "auto"):
            bad("mvs", f"must be true, false or auto, got {self.mvs!r}")
        if self.mvs == "auto" and self.sky_max_spread >= 1.0:
            bad("mvs", "auto tells open scenes by the sky shell's tests, which sky_max_spread: 1 turns off")
        if self.mvs_size < 16:
            bad("mvs_size", f"must be >= 16, got {self.mvs_size}")
        if self.mvs_depths < 2:
            bad("mvs_depths", f"must be >= 2, got {self.mvs_depths}")
        if self.mvs_neighbours < 1:
            bad("mvs_neighbours", f"must be >= 1, got {self.mvs_neighbours}")
        if self.mvs_views != "auto" and (
            isinstance(self.mvs_views, bool) or not isinstance(self.mvs_views, int) or self.mvs_views < 0
        ):
            bad("mvs_views", f"must be auto or an integer >= 0 (0 = all), got {self.mvs_views!r}")
        if self.mvs_max_points < 0:
            bad("mvs_max_points", f"must be >= 0 (0 = no limit), got {self.mvs_max_points}")
        if self.sky < 0:
            bad("sky", f"must be >= 0, got {self.sky}")
        if not 0.0 <= self.sky_max_spread <= 1.0:
            bad("sky_max_spread", f"must be in [0, 1] (a colour deviation), got {self.sky_max_spread}")
        if not self.sky_radius > 1.0:
            bad("sky_radius", f"must be > 1 (units of the scene extent), got {self.sky_radius}")

    @property
    def enabled(self) -> bool:
        return bool(self.mvs) or self.sky > 0


# mvs: auto: a shell holding at least this share of the asked points marks an open scene. Measured
# (20,000 asked): the outdoor scene keeps all of them, the rooms 0 and 1, an object on white 0.
OPEN_SHARE = 0.05
AUTO_PROBE = 20_000  # shell points asked for to judge mvs: auto when model.seeding.sky is 0


def seed_points(
    cloud: PointCloud | None,
    dataset: Any,
    cfg: SeedingConfig,
    seed: int = 0,
    log: Callable[[str], None] | None = None,
) -> PointCloud | None:
    """``cloud`` with the points ``cfg`` asks for appended (``cloud`` itself when nothing is asked).

    Args:
        cloud: The data set's initial points, or None (the model then starts from a random cube, and
            nothing is added: the sweep's depth range comes from the cloud).
        dataset: Has ``train_views`` (:class:`~pointrix_lite.data.cameras.View`) and ``scene_extent``.
        seed: Seeds the subsampling generators.
        log: Called with one status line per seeding stage.
    """
    if cloud is None or not cfg.enabled:
        return cloud
    say = log or (lambda line: None)
    parts = [cloud]
    sweep, shell = cfg.mvs is True, None
    if cfg.mvs == "auto":
        probe = cfg if cfg.sky > 0 else replace(cfg, sky=AUTO_PROBE)
        lines: list[str] = []
        shell = _shell(dataset, probe, seed, lines.append, cloud.xyz)
        sweep = len(shell) < OPEN_SHARE * probe.sky
        say(
            f"seeding: mvs auto: {len(shell):,} of {probe.sky:,} shell directions are open sky, "
            + ("an enclosed scene: plane sweep, no shell" if sweep else "an open scene: no plane sweep")
        )
        if sweep or cfg.sky == 0:
            shell = None
        else:
            for line in lines:
                say(line)
    if sweep:
        from .fusion import mvs_points
        from .spread import spread_views

        views = list(dataset.train_views)
        # "auto" unresolved (a caller outside a run, which has no steps to scale by): every view
        swept = spread_views([v.camera for v in views], 0 if cfg.mvs_views == "auto" else cfg.mvs_views)
        if len(swept) < len(views):
            say(f"seeding: {len(swept)} of {len(views)} training views swept, spread over the capture (mvs_views)")
        parts.append(mvs_points(cloud, [views[i] for i in swept], cfg, seed, say))
    if cfg.sky > 0 and cfg.mvs != "auto":
        shell = _shell(dataset, cfg, seed, say, torch.cat([p.xyz for p in parts]))
    if shell is not None:
        parts.append(shell)
    return PointCloud(torch.cat([p.xyz for p in parts]), torch.cat([p.rgb for p in parts]))


def _shell(dataset: Any, cfg: SeedingConfig, seed: int, say: Callable[[str], None], cloud: torch.Tensor) -> PointCloud:
    """:func:`.sky.sky_points` for ``dataset``, judged against the initial points ``cloud [M, 3]``."""
    from ...progress import phase
    from .sky import sky_points

    with phase("seeding", show=False):  # its seconds count with the sweep's in metrics.json's phase_seconds
        return sky_points(
            dataset.train_views, dataset.scene_extent, cfg, seed, say, cloud, getattr(dataset, "background", None)
        )


CACHE_NAME = "seed_points.npz"


@lru_cache(maxsize=1)
def code_digest() -> str:
    """SHA-1 of this package's source files. The seeded points depend on its module constants (fusion
    thresholds, the plane test's scale) as much as on the options, so a cache written by another
    version of the code is not read back: a run directory reused after an upgrade would otherwise
    train on the old build's points without a word."""
    digest = hashlib.sha1()
    for path in sorted(Path(__file__).parent.glob("*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def scene_key(dataset: Any, skip: Path | None = None) -> dict[str, Any]:
    """What identifies the scene the seeded points belong to, beyond the cloud's size: a folder reused
    on another ``dataset.data_path`` (same image names, other pixels, another SfM model) must not
    read the old scene's points back.

    * ``data_path``: the data folder, resolved;
    * ``images``: SHA-1 over the path, size and mtime of every image file below it whose stem is a
      training view's name (a stat each, no image is read again), ``skip`` (the run's own folder)
      and hidden folders left out;
    * ``sfm``: SHA-1 of the initial cloud's points and colours and of the training cameras
      (intrinsics, size, pose): the model as the data set read it, whatever its file format;
    * ``pixels``: SHA-1 of an even sample of about 4,096 pixels of each training image, as loaded
      (an image replaced in place with its size and mtime kept still differs).
    """
    config = getattr(dataset, "config", None)
    data_path = getattr(config, "data_path", None)
    root = Path(data_path).resolve() if data_path else None
    views = list(dataset.train_views)
    sfm = hashlib.sha1()
    cloud = dataset.point_cloud
    for array in (cloud.xyz, cloud.rgb):
        sfm.update(np.ascontiguousarray(array.detach().cpu().numpy()).tobytes())
    pixels = hashlib.sha1()
    for view in views:
        cam = view.camera
        sfm.update(view.name.encode("utf-8", "surrogatepass") + b"\0")
        sfm.update(np.array([cam.fx, cam.fy, cam.cx, cam.cy, cam.width, cam.height], dtype=np.float64).tobytes())
        sfm.update(np.ascontiguousarray(cam.viewmat.detach().cpu().numpy(), dtype=np.float64).tobytes())
        image = view.image
        step = max(1, round((image.shape[0] * image.shape[1] / 4096) ** 0.5))
        pixels.update(np.ascontiguousarray(image[::step, ::step].detach().cpu().numpy()).tobytes())
    return {
        "data_path": str(root) if root is not None else None,
        "images": _image_stats(root, {v.name for v in views}, skip) if root is not None else None,
        "sfm": sfm.hexdigest(),
        "pixels": pixels.hexdigest(),
    }


def _image_stats(root: Path, names: set[str], skip: Path | None) -> str:
    """SHA-1 over ``relative path, size, mtime`` of the image files below ``root`` named like a view.

    Symbolic links are followed (an ``images`` folder is often one), each real folder once.
    """
    from ...io.images import IMAGE_EXTENSIONS

    suffixes = {ext.lower() for ext in IMAGE_EXTENSIONS}
    skip = skip.resolve() if skip is not None else None
    digest, seen = hashlib.sha1(), set()
    for folder, subfolders, files in os.walk(root, followlinks=True):
        real = os.path.realpath(folder)
        if real in seen or (skip is not None and Path(real) == skip):
            subfolders[:] = []
            continue
        seen.add(real)
        subfolders[:] = sorted(d for d in subfolders if not d.startswith("."))
        for name in sorted(files):
            stem, suffix = os.path.splitext(name)
            if suffix.lower() not in suffixes or stem not in names:
                continue
            path = os.path.join(folder, name)
            try:
                stat = os.stat(path)
            except OSError:  # a dangling link: not an image the data set read
                continue
            rel = os.path.relpath(path, root)
            digest.update(f"{rel}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


def seeded_cloud(dataset: Any, cfg: SeedingConfig, seed: int, cache_dir: Path | None) -> PointCloud | None:
    """:func:`seed_points` of ``dataset.point_cloud``, read from ``cache_dir/seed_points.npz`` when that
    holds the same request (options, seed, the scene by :func:`scene_key`, training views and
    :func:`code_digest`), else computed and written there (``cache_dir`` None: computed, not kept)."""
    from ...io.atomic import atomic_write
    from ...progress import console

    cloud = dataset.point_cloud
    if cloud is None or not cfg.enabled:
        return cloud
    key = json.dumps(
        {
            "seeding": asdict(cfg),
            "seed": seed,
            "cloud": len(cloud),
            "scene": scene_key(dataset, cache_dir),
            # the shell leaves out directions of the background's colour (sky.py)
            "background": [float(c) for c in getattr(dataset, "background", ())],
            "views": [v.name for v in dataset.train_views],
            "size": [v.camera.width for v in dataset.train_views[:1]],
            "code": code_digest(),
        },
        sort_keys=True,
    )
    path = cache_dir / CACHE_NAME if cache_dir is not None else None
    if path is not None and path.is_file():
        try:
            with np.load(path) as kept:
                if str(kept["key"]) == key:
                    console().print(f"seeding: {len(kept['xyz']) - len(cloud):,} points read from {path}", markup=False)
                    return PointCloud(torch.from_numpy(kept["xyz"]), torch.from_numpy(kept["rgb"]))
        except (OSError, ValueError, KeyError):  # unreadable or from another version: seed again, overwrite
            pass
    out = seed_points(cloud, dataset, cfg, seed, lambda line: console().print(line, markup=False))
    if path is not None:
        atomic_write(path, lambda f: np.savez(f, key=np.array(key), xyz=out.xyz.numpy(), rgb=out.rgb.numpy()))
    return out
