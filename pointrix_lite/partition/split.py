"""Split a COLMAP scene into blocks: frame, cells, views that see each cell, folders, manifest.

The whole scene's test views (every ``test_every``-th image sorted by name, ``ColmapDataset``'s rule)
are in no block folder: blocks train on the scene's training views only, so a test view never shapes
any block, and the merged model is scored against the whole scene with the same rule
(``render.py --ply merged/point_cloud.ply --data <scene>``).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError, DataError
from ..io import colmap as colmap_io
from .block_folder import LINK_ORDER, write_block
from .cells import Rect, grid_cells, kd_cells, margins
from .frame import camera_centers, find_frame
from .manifest import NAME, Block, Manifest
from .visibility import PinholeView, assign_views, view_shares

ONE_FOCAL = {"SIMPLE_PINHOLE", "SIMPLE_RADIAL", "RADIAL", "SIMPLE_RADIAL_FISHEYE", "RADIAL_FISHEYE", "SIMPLE_FISHEYE"}


@dataclass
class SplitOptions:
    split: str = "grid"  # grid or kd
    grid: tuple[int, int] = (2, 2)  # cells along the major and the minor ground axis (grid)
    blocks: int = 4  # number of blocks (kd)
    margin: float = 0.15  # overlap on each side, as a fraction of the cell's size
    min_share: float = 0.15  # a view trains a block when this share of its image shows the block
    up: str = "auto"  # auto, cameras, pca, or +x/-x/+y/-y/+z/-z
    test_every: int = 8  # ColmapDataset's default; 0: no test views
    links: str = "hardlink"  # hardlink, symlink or copy (each falls back to the next)
    overwrite: bool = False

    @property
    def n_blocks(self) -> int:
        return self.grid[0] * self.grid[1] if self.split == "grid" else self.blocks


def pinhole_view(image: Any, camera: Any) -> PinholeView:
    """The pinhole part of a COLMAP camera (distortion ignored: visibility needs no sub-pixel accuracy)."""
    from ..data.cameras import qvec_to_rotmat

    p = [float(v) for v in camera.params]
    fx, fy, cx, cy = (p[0], p[0], p[1], p[2]) if camera.model in ONE_FOCAL else (p[0], p[1], p[2], p[3])
    R = qvec_to_rotmat(image.qvec)
    return PinholeView(
        image.name, R, np.asarray(image.tvec, dtype=np.float64), (fx, fy), (cx, cy), (camera.width, camera.height)
    )


def held_out(names: list[str], test_every: int) -> set[str]:
    """The test views of the whole scene: ColmapDataset's every ``test_every``-th name in sorted order."""
    return {n for i, n in enumerate(sorted(names)) if test_every > 0 and i % test_every == 0}


def _prepare_out(out: Path, overwrite: bool) -> Path:
    """Refuse an existing partition without ``overwrite``; the empty folder the new one is written into.

    The old partition stays whole until the new one is complete (:func:`_swap_in`): a new one that fails
    validation or writing (a cell with no point, a full disk) leaves the old manifest and blocks as they were."""
    if ((out / NAME).exists() or (out / "blocks").exists()) and not overwrite:
        raise ConfigError(f"--out {out}: holds a partition already (pass --overwrite to replace it)")
    out.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=".partition.new-", dir=out))


def _swap_in(stage: Path, out: Path) -> None:
    """Replace ``out``'s blocks and manifest by ``stage``'s, then remove the old ones."""
    old = Path(tempfile.mkdtemp(prefix=".partition.old-", dir=out))
    for name in ("blocks", NAME):
        if (out / name).exists():
            os.rename(out / name, old / name)
    for name in ("blocks", NAME):
        os.rename(stage / name, out / name)
    shutil.rmtree(old, ignore_errors=True)
    shutil.rmtree(stage, ignore_errors=True)


def split_scene(scene: Path, out: Path, opts: SplitOptions, say: Callable[[str], None] = print) -> Manifest:
    """Partition the COLMAP scene ``scene`` into ``out/blocks/block_NNN`` and write ``out/manifest.json``."""
    if not scene.is_dir():
        raise DataError(f"--scene: folder not found: {scene}")
    model = colmap_io.read_model(colmap_io.find_sparse_dir(scene))
    if len(model.xyz) == 0:
        raise DataError(f"{model.files['points3D']}: the scene has no SfM points to partition")
    missing = sorted({im.camera_id for im in model.images.values()} - model.cameras.keys())
    if missing:
        raise DataError(f"{model.files['images']}: images refer to missing camera {missing[0]}")
    test = held_out([im.name for im in model.images.values()], opts.test_every)
    train_ids = sorted((i for i, im in model.images.items() if im.name not in test), key=lambda i: model.images[i].name)
    if not train_ids:
        raise DataError(f"{model.files['images']}: no training views (test_every={opts.test_every})")
    stage = _prepare_out(out, opts.overwrite)
    try:
        manifest = _write_partition(scene, stage, model, train_ids, test, opts, say)
    except BaseException:  # the old partition stands as it was
        shutil.rmtree(stage, ignore_errors=True)
        raise
    _swap_in(stage, out)
    manifest.path = out / NAME
    return manifest


def _write_partition(
    scene: Path, out: Path, model: Any, train_ids: list[int], test: set[str], opts: SplitOptions, say: Callable
) -> Manifest:
    """Everything after the inputs are read: cells, views, block folders and the manifest, into ``out``."""
    views = [pinhole_view(model.images[i], model.cameras[model.images[i].camera_id]) for i in train_ids]
    Rs, ts = np.stack([v.R for v in views]), np.stack([v.t for v in views])
    frame = find_frame(model.xyz, Rs, ts, opts.up)
    xy = frame.ground(model.xyz)
    cells = grid_cells(xy, *opts.grid) if opts.split == "grid" else kd_cells(xy, opts.blocks)
    grown = margins(cells, xy, opts.margin)
    regions = np.stack([m.contains(xy) for m in grown])
    in_cell = np.stack([c.contains(xy) for c in cells])
    home = np.stack([c.contains(frame.ground(camera_centers(Rs, ts))) for c in cells]).argmax(axis=0)
    rule = f"1 in {opts.test_every} by name" if opts.test_every else "none held out"
    say(
        f"partition: {len(model.images)} images ({len(train_ids)} train, {len(test)} test: {rule}), "
        f"{len(model.xyz):,} points; up {_fmt(frame.up)} from the {frame.method}"
    )

    shares = view_shares(views, model.xyz, regions)
    chosen, orphans = assign_views(shares, opts.min_share, home)
    for b in range(len(cells)):  # checked before anything is written: ColmapDataset refuses both
        if not regions[b].any() or not chosen[b]:
            what = "no SfM point lies in its cell and margin" if not regions[b].any() else "no training view sees it"
            raise DataError(f"block_{b:03d}: {what}; use fewer blocks or a larger --margin")
    blocks, ways = [], []
    for b, (cell, margin) in enumerate(zip(cells, grown, strict=True)):
        name = f"block_{b:03d}"
        ids = [train_ids[v] for v in chosen[b]]
        ways.append(write_block(scene, out / "blocks" / name, model, ids, regions[b], opts.links))
        blocks.append(
            Block(
                name,
                f"blocks/{name}",
                cell,
                margin,
                int(regions[b].sum()),
                int(in_cell[b].sum()),
                [model.images[i].name for i in ids],
            )
        )
        say(
            f"  {name}  cell {_fmt_rect(cell)}  {blocks[-1].n_points:,} points ({blocks[-1].n_cell_points:,} in the "
            f"cell)  {len(ids)} views"
        )
    manifest = Manifest(
        str(scene.resolve()),
        frame.rotation.tolist(),
        frame.method,
        _split_label(opts),
        opts.margin,
        opts.min_share,
        opts.test_every,
        sorted(test),
        len(train_ids),
        blocks,
        max(ways, key=LINK_ORDER.index),
    )
    manifest.save(out / NAME)
    per_view = sum(len(b.views) for b in blocks) / len(train_ids)
    say(
        f"partition: {opts.n_blocks} blocks ({_split_label(opts)}, margin {opts.margin:.0%} of a cell), "
        f"{per_view:.2f} blocks per view ({orphans} views placed by their largest share only); images: {manifest.links}"
    )
    return manifest


def _split_label(opts: SplitOptions) -> str:
    return f"grid {opts.grid[0]}x{opts.grid[1]}" if opts.split == "grid" else f"kd {opts.blocks}"


def _fmt(v: np.ndarray) -> str:
    return "(" + ", ".join(f"{x:+.2f}" for x in v) + ")"


def _fmt_rect(r: Rect) -> str:
    b = [
        "-inf" if r.x0 is None else f"{r.x0:.2f}",
        "inf" if r.x1 is None else f"{r.x1:.2f}",
        "-inf" if r.y0 is None else f"{r.y0:.2f}",
        "inf" if r.y1 is None else f"{r.y1:.2f}",
    ]
    return f"x[{b[0]}, {b[1]}) y[{b[2]}, {b[3]})"
