"""``manifest.json``: what ``partition.py`` decided, read by ``train_blocks.py`` and ``merge_blocks.py``.

Paths of block folders are relative to the manifest's folder (the partition can be moved as a whole);
the scene's path is absolute (it stays where it is). Cell and margin bounds are ground coordinates
``rotation @ p`` (``frame.rotation``), ``[x0, x1, y0, y1]`` with ``null`` for an unbounded side.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import DataError
from ..io.atomic import atomic_write_text as write_text
from .cells import Rect

VERSION = 1
NAME = "manifest.json"
BLOCK_NAME = re.compile(r"block_\d{3,}")  # what split.py names blocks; anything else is hand-made


@dataclass
class Block:
    name: str
    folder: str  # relative to the manifest's folder: a COLMAP scene (images/ + sparse/0)
    cell: Rect  # the block's own part of the plane: its Gaussians here are kept at merge time
    margin: Rect  # the cell grown by the overlap margin: its points and views are trained
    n_points: int  # SfM points in the margin region (written to the block's sparse/0)
    n_cell_points: int  # of which in the cell
    views: list[str]  # COLMAP image names of the training views that see the block


@dataclass
class Manifest:
    scene: str  # the whole scene's folder (absolute)
    rotation: list[list[float]]  # rows: the two ground axes and up, in COLMAP's world frame
    up_method: str  # cameras, pca, or the axis given
    split: str  # "grid 2x2" or "kd 4"
    margin_fraction: float  # margin on each side, as a fraction of the cell's size
    min_share: float  # a view trains a block when at least this share of its image shows the block
    test_every: int  # every n-th image of the whole scene, sorted by name, is a test view (0: none)
    test_views: list[str]  # held out of every block: the merged model is scored on them
    n_train_views: int
    blocks: list[Block]
    links: str = "hardlink"  # how images were placed in block folders: hardlink, symlink or copy
    version: int = VERSION
    path: Path | None = field(default=None, compare=False)  # where it was read from or written to

    @property
    def root(self) -> Path:
        return self.path.parent if self.path is not None else Path(".")

    def block_dir(self, block: Block) -> Path:
        return self.root / block.folder

    def block(self, name: str) -> Block:
        for b in self.blocks:
            if b.name == name:
                return b
        where = self.path or NAME
        raise DataError(f"{where}: no block named {name!r} (blocks: {', '.join(b.name for b in self.blocks)})")

    def ground_rotation(self) -> np.ndarray:
        return np.asarray(self.rotation, dtype=np.float64)

    def save(self, path: Path) -> Path:
        data = {k: v for k, v in asdict(self).items() if k != "path"}
        for raw, block in zip(data["blocks"], self.blocks, strict=True):
            raw["cell"], raw["margin"] = block.cell.as_list(), block.margin.as_list()
        write_text(path, json.dumps(data, indent=1) + "\n")
        self.path = path
        return path


def _need(data: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if key not in data:
        raise DataError(f"{where}: key {key!r} missing")
    if not isinstance(data[key], kind):
        raise DataError(f"{where}: key {key!r} has the wrong type ({type(data[key]).__name__})")
    return data[key]


def _rect(values: Any, where: str) -> Rect:
    ok = isinstance(values, list) and len(values) == 4
    if not ok or not all(v is None or isinstance(v, (int, float)) for v in values):
        raise DataError(f"{where}: expected [x0, x1, y0, y1] (numbers or null), got {values!r}")
    return Rect.from_list(values)


def _check_blocks(path: Path, blocks: list[Block]) -> None:
    """Names that are this partition's own (they become folder names: ``../victim`` must never be one),
    folders inside the manifest's folder, each name once, and cells that tile the plane."""
    seen = set()
    for i, b in enumerate(blocks):
        if not BLOCK_NAME.fullmatch(b.name) or b.folder != f"blocks/{b.name}":
            raise DataError(
                f"{path}: blocks[{i}] is named {b.name!r} in folder {b.folder!r}; a partition's blocks are "
                "block_NNN in blocks/block_NNN (rewrite it with scripts/partition.py)"
            )
        if b.name in seen:
            raise DataError(f"{path}: block {b.name} is listed twice; the merge would hold its Gaussians twice")
        seen.add(b.name)
    gap, overlap = tiling_problem([b.cell for b in blocks])
    if gap is not None:
        raise DataError(f"{path}: no block's cell covers ground point {gap}; a block was removed from the manifest?")
    if overlap is not None:
        a, b = overlap
        raise DataError(
            f"{path}: the cells of {blocks[a].name} and {blocks[b].name} overlap; each point needs one block"
        )


def tiling_problem(cells: list[Rect]) -> tuple[tuple[float, float] | None, tuple[int, int] | None]:
    """A ground point no cell covers, or two cells that share a point (None, None when they tile the plane).

    Exact for axis-aligned cells: between consecutive bounds nothing changes, so one point per slab of the
    bounds' grid (and beyond the outermost bounds) decides."""

    def probes(values: set[float]) -> list[float]:
        v = sorted(values)
        if not v:
            return [0.0]
        return [v[0] - 1.0, *((a + b) / 2 for a, b in zip(v, v[1:])), v[-1] + 1.0]

    xs = probes({x for c in cells for x in (c.x0, c.x1) if x is not None})
    ys = probes({y for c in cells for y in (c.y0, c.y1) if y is not None})
    xy = np.array([(x, y) for x in xs for y in ys])
    inside = np.stack([c.contains(xy) for c in cells])  # [cells, probes]
    counts = inside.sum(axis=0)
    if (counts == 0).any():
        x, y = xy[int(np.argmax(counts == 0))]
        return (round(float(x), 3), round(float(y), 3)), None
    if (counts > 1).any():
        both = np.flatnonzero(inside[:, int(np.argmax(counts > 1))])
        return None, (int(both[0]), int(both[1]))
    return None, None


def block_digest(manifest: Manifest, block: Block) -> str:
    """What a block's training depends on in the partition (scene, frame, cell, margin, views): recorded in
    its status, so a run trained on an earlier partition is never taken for this one's."""
    key = [manifest.scene, manifest.rotation, block.name, block.cell.as_list(), block.margin.as_list(), block.views]
    return hashlib.sha1(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]


def load_manifest(path: Path) -> Manifest:
    """Read and check ``path`` (a manifest file, or a folder holding ``manifest.json``)."""
    path = path / NAME if path.is_dir() else path
    if not path.is_file():
        raise DataError(f"{path}: manifest not found (write one with scripts/partition.py)")
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise DataError(f"{path}: not a readable manifest ({exc})") from None
    if not isinstance(data, dict) or data.get("version") != VERSION:
        raise DataError(f"{path}: not a version-{VERSION} partition manifest")
    blocks = []
    for i, raw in enumerate(_need(data, "blocks", list, str(path))):
        where = f"{path}: blocks[{i}]"
        if not isinstance(raw, dict):
            raise DataError(f"{where}: expected an object")
        blocks.append(
            Block(
                _need(raw, "name", str, where),
                _need(raw, "folder", str, where),
                _rect(_need(raw, "cell", list, where), f"{where}.cell"),
                _rect(_need(raw, "margin", list, where), f"{where}.margin"),
                _need(raw, "n_points", int, where),
                _need(raw, "n_cell_points", int, where),
                _need(raw, "views", list, where),
            )
        )
    if not blocks:
        raise DataError(f"{path}: the manifest lists no blocks")
    _check_blocks(path, blocks)
    where = str(path)
    rotation = _need(data, "rotation", list, where)
    if np.asarray(rotation, dtype=float).shape != (3, 3):
        raise DataError(f"{path}: key 'rotation' is not a 3 x 3 matrix")
    return Manifest(
        _need(data, "scene", str, where),
        rotation,
        _need(data, "up_method", str, where),
        _need(data, "split", str, where),
        float(_need(data, "margin_fraction", (int, float), where)),
        float(_need(data, "min_share", (int, float), where)),
        _need(data, "test_every", int, where),
        _need(data, "test_views", list, where),
        _need(data, "n_train_views", int, where),
        blocks,
        _need(data, "links", str, where),
        VERSION,
        path,
    )
