"""The test views of a run: render, ground truth and an error map per view, shrunk for the page.

Images come from ``renders/test/{render,gt}/<view>.png`` (what ``DefaultTrainer.test`` saves). They
are shown at most ``max_side`` pixels on the long side (box filter, ``io/images.py``) so that the
page stays a few MB for dozens of views; only the shrunk copies are kept, one view's full-size
images at a time. The error is computed at full size and then area-averaged to the shown size.
"""

from __future__ import annotations

import base64
import io
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from PIL import Image

from ..errors import DataError

# Anchors of a dark-to-bright map (black, purple, red, orange, pale yellow): brightness grows with
# the error, so it reads in grey print too, and no two errors share a colour.
ANCHORS = np.array([[0, 0, 4], [87, 16, 110], [188, 55, 84], [249, 142, 9], [252, 255, 164]], dtype=np.float32)
COLOURS = (
    np.stack(
        [np.interp(np.linspace(0, 1, 256), np.linspace(0, 1, len(ANCHORS)), ANCHORS[:, c]) for c in range(3)], axis=-1
    )
    .round()
    .astype(np.uint8)
)  # [256, 3]
SCALE_PERCENTILE = 99.0  # of every pixel's error over the views shown: outliers do not wash the maps out
_SUM_LEVELS = 3 * 255 + 1  # a pixel's |render - gt| summed over RGB is an integer in [0, 765]


@dataclass
class ViewImages:
    name: str
    size: tuple[int, int] | None = None  # (width, height) on disk
    render: np.ndarray | None = None  # [h, w, 3] uint8 at the shown size
    gt: np.ndarray | None = None
    error: np.ndarray | None = None  # [h, w] float32: mean |render - gt| over RGB, in [0, 1], area-averaged
    # render.py --outputs: "normal" / "depth" / "median_depth" (depth as grey, near dark, over the view's own range), shown size
    maps: dict[str, np.ndarray] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


@dataclass
class ShownViews:
    views: list[ViewImages] = field(default_factory=list)
    total: int = 0  # views on disk; ``views`` may hold an even subset of them
    # Over the views' full-size pixels: how many have each RGB sum of |render - gt| (the scale's percentile).
    error_histogram: np.ndarray = field(default_factory=lambda: np.zeros(_SUM_LEVELS, dtype=np.int64))

    @property
    def downscaled(self) -> int:
        return sum(1 for v in self.views if v.size and v.render is not None and v.render.shape[1] < v.size[0])


def colour_index(error: np.ndarray, scale: float) -> np.ndarray:
    """[H, W] errors -> [H, W] uint8 indices into :data:`COLOURS`: 0 for none, 255 for ``scale`` and above."""
    return np.clip(np.rint(error / scale * 255.0), 0, 255).astype(np.uint8)


def error_scale(histogram: np.ndarray) -> float | None:
    """The top of the error maps' colour scale: the 99th percentile pixel error, rounded up to 2 digits."""
    total = int(histogram.sum())
    if total == 0:
        return None
    level = int(np.searchsorted(np.cumsum(histogram), math.ceil(total * SCALE_PERCENTILE / 100.0)))
    top = level / (_SUM_LEVELS - 1)
    if top <= 0:
        return 1.0 / 255.0  # (nearly) identical images: any scale shows them dark
    digits = 1 - math.floor(math.log10(top))
    return max(math.ceil(top * 10**digits - 1e-9) / 10**digits, 1.0 / 255.0)


def shown_size(width: int, height: int, max_side: int) -> tuple[int, int]:
    """``(width, height)`` scaled so that the long side is at most ``max_side`` (never enlarged)."""
    factor = max(width, height) / max_side
    if factor <= 1:
        return width, height
    return max(1, round(width / factor)), max(1, round(height / factor))


def png_data_uri(image: np.ndarray, palette: np.ndarray | None = None) -> str:
    """``data:image/png;base64,...`` of an [H, W, 3] uint8 image, or of [H, W] indices into ``palette``.

    An error map goes as indices: a third of the bytes of its RGB pixels, the same colours decoded.
    """
    if palette is None:
        picture = Image.fromarray(np.ascontiguousarray(image), "RGB")
        level = 1  # photo-like: zlib 6 is 3x slower for 8 % fewer bytes (io/images.py's write_png says the same)
    else:
        picture = Image.fromarray(np.ascontiguousarray(image, dtype=np.uint8), "P")
        picture.putpalette(palette.astype(np.uint8).ravel().tolist())
        level = 6  # smooth index maps, small: the default level pays off
    buffer = io.BytesIO()
    picture.save(buffer, format="PNG", compress_level=level)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def read_test_views(renders: Path, max_side: int, max_views: int) -> ShownViews:
    """Pairs of ``renders/render/*.png`` and ``renders/gt/*.png`` by file name; at most ``max_views``."""
    from ..io.images import load_all  # lazy: numpy and PIL load only when views are read; report.py --help stays quick

    found = ShownViews()
    names = sorted({p.name for d in (renders / "render", renders / "gt") if d.is_dir() for p in d.glob("*.png")})
    found.total = len(names)
    if len(names) > max_views:  # an even spread over the split, first and last included
        names = [names[i] for i in np.linspace(0, len(names) - 1, max_views).round().astype(int)]
    # Decoding dominates (1600x1000 PNGs); a few threads, each holding one view's full-size images.
    for view, histogram in load_all(names, lambda name: _read_view(renders, name, max_side), advance=lambda: None):
        found.views.append(view)
        if histogram is not None:
            found.error_histogram += histogram
    return found


def _read_view(renders: Path, name: str, max_side: int) -> tuple[ViewImages, np.ndarray | None]:
    """One view shrunk to ``max_side``, and the histogram of its full-size pixel errors (None without one)."""
    view = ViewImages(Path(name).stem)
    render = _read(renders / "render" / name, "render", view)
    gt = _read(renders / "gt" / name, "ground truth", view)
    histogram = None
    if render is not None and gt is not None and render.shape != gt.shape:
        view.problems.append(
            f"render {render.shape[1]}x{render.shape[0]} and ground truth {gt.shape[1]}x{gt.shape[0]} "
            "differ in size: no error map."
        )
    elif render is not None and gt is not None:
        sums = np.abs(render.astype(np.int16) - gt.astype(np.int16)).sum(axis=-1)
        histogram = np.bincount(sums.ravel(), minlength=_SUM_LEVELS)
        error = Image.fromarray(sums.astype(np.float32) / np.float32(_SUM_LEVELS - 1), "F")
        view.error = np.asarray(error.resize(shown_size(*error.size, max_side), Image.Resampling.BOX))
    full = render if render is not None else gt
    view.size = None if full is None else (full.shape[1], full.shape[0])
    view.render, view.gt = _shrink(render, max_side), _shrink(gt, max_side)
    for kind in ("normal", "depth", "median_depth"):  # written only by render.py --outputs; absent is no problem
        path = renders / kind / name
        if path.is_file():
            image = _read(path, kind, view) if kind == "normal" else _depth_grey(path, view)
            if image is not None:
                view.maps[kind] = _shrink(image, max_side)
    return view, histogram


def _depth_grey(path: Path, view: ViewImages) -> np.ndarray | None:
    """A 16-bit depth PNG as [H, W, 3] uint8 grey: its nearest surface black, its farthest white, no surface white."""
    try:
        depth = np.asarray(Image.open(path), dtype=np.float64)
    except (OSError, ValueError) as exc:
        view.problems.append(f"depth: {path.name} is not a readable PNG ({exc}).")
        return None
    seen = depth > 0
    if not seen.any():
        return np.full((*depth.shape, 3), 255, np.uint8)
    lo, hi = depth[seen].min(), depth[seen].max()
    grey = np.where(seen, (depth - lo) / max(hi - lo, 1e-9) * 255, 255)
    return np.repeat(np.round(grey).astype(np.uint8)[..., None], 3, axis=2)


def _shrink(image: np.ndarray | None, max_side: int) -> np.ndarray | None:
    from ..io.images import downscale  # lazy, as in read_test_views

    return None if image is None else downscale(image, *shown_size(image.shape[1], image.shape[0], max_side))


def _read(path: Path, what: str, view: ViewImages) -> np.ndarray | None:
    if not path.is_file():
        view.problems.append(f"no {what} image ({path.parent.name}/{path.name} is missing).")
        return None
    from ..io.images import read_image  # lazy, as in read_test_views

    try:
        image = read_image(path)
    except DataError as exc:
        view.problems.append(f"{what}: {exc}.")
        return None
    # Test renders are RGB; a hand-made RGBA file is shown without its alpha.
    return np.ascontiguousarray(image[..., :3])
