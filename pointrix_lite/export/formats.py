"""The file formats Gaussians are exported to, and their encoders.

``ply`` is the project's full-precision INRIA-layout writer (:mod:`.ply`). ``splat`` and
``ply_compressed`` are encoded by ``gsplat.exporter.export_splats`` (plain torch, runs on the
CPU); this module only fixes what those bytes need to load in the viewers:

- ``ply_compressed``: gsplat always writes an ``sh`` element, with zero properties at SH degree 0.
  PlayCanvas (SuperSplat, splat-transform) accepts a third element only with 9, 24 or 45 ``f_rest``
  columns, so the empty element is removed; degree 4 (72 columns) is not loadable, so the format
  stores at most degree 3. gsplat drops Gaussians with opacity <= 1/255 itself: that cut is applied
  here first (same expression) so it can be reported.
- ``spz`` (:mod:`.spz`, SPZ version 3), ``sog`` (:mod:`.sog`, PlayCanvas SOG) and ``glb``
  (:mod:`.glb`, glTF with ``KHR_gaussian_splatting``) are the project's own writers; all store at
  most SH degree 3 (the highest the web readers or the glTF extension define). SPZ and SOG keep
  PLY's frame, as their readers expect (SPZ in Niantic's RUB with :func:`spz_format`); glTF turns
  the Gaussians into its own (:mod:`.axes`). SPZ's 24-bit centres take fewer fractional bits when a
  scene reaches past +-2048; the export says how many it chose and which centre forced them.
- ``splat``: gsplat writes records in Morton order; antimatter15's own converter (and viewers that
  stream the file) expect the most visible Gaussians first, so the 32-byte records are reordered by
  descending ``scale_x * scale_y * scale_z * alpha`` read back from the records themselves.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from functools import partial
from typing import IO

import numpy as np
import torch
from torch import Tensor

Params = Mapping[str, Tensor]

SPLAT_RECORD_BYTES = 32  # position f32x3, scale f32x3, RGBA u8x4, rotation u8x4
PLAYCANVAS_CHUNK = 256  # Gaussians per chunk of bounds in the compressed PLY


def _write_ply(params: Params, f: IO[bytes]) -> None:
    from ..io.ply import ply_data

    ply_data(params).write(f)


def _gsplat_bytes(params: Params, fmt: str) -> bytes:
    from gsplat.exporter import export_splats

    p = {k: v.detach().float().cpu() for k, v in params.items()}
    return export_splats(p["means"], p["scales"], p["quats"], p["opacities"], p["sh0"], p["shN"], format=fmt)


def sort_splat_records(data: bytes) -> bytes:
    """Reorder ``.splat`` records by descending volume x alpha (antimatter15's convert.py order).

    The key is read from the records (float scales, u8 alpha), so the file is sorted by what a
    reader decodes; the sort is stable, ties keep gsplat's Morton order.
    """
    records = np.frombuffer(data, dtype=np.uint8).reshape(-1, SPLAT_RECORD_BYTES)
    scales = records[:, 12:24].copy().view("<f4").astype(np.float64)
    key = scales.prod(axis=1) * records[:, 27]
    return records[np.argsort(-key, kind="stable")].tobytes()


def _write_splat(params: Params, f: IO[bytes]) -> None:
    f.write(sort_splat_records(_gsplat_bytes(params, "splat")))


def drop_empty_sh_element(data: bytes) -> bytes:
    """Remove the ``element sh N`` header line when no property follows it (0 bytes of data)."""
    end = data.index(b"end_header\n")
    lines = data[:end].split(b"\n")
    if lines[-2].startswith(b"element sh "):  # lines[-1] is the empty piece before end_header
        lines.pop(-2)
    return b"\n".join(lines) + data[end:]


def _write_ply_compressed(params: Params, f: IO[bytes]) -> None:
    f.write(drop_empty_sh_element(_gsplat_bytes(params, "ply_compressed")))


def _write_spz(params: Params, f: IO[bytes], frame: str = "rdf") -> None:
    from .spz import write_spz

    write_spz(params, f, frame)


def _describe_spz(params: Params, frame: str = "rdf") -> FormatNote:
    from .spz import precision_note

    return precision_note(params, frame)


def _write_sog(params: Params, f: IO[bytes]) -> None:
    from .sog import write_sog

    write_sog(params, f)


def _write_glb(params: Params, f: IO[bytes]) -> None:
    from .glb import write_glb

    write_glb(params, f)


def compressed_ply_visible(params: Params) -> Tensor:
    """``[N]`` bool: the Gaussians gsplat's compressed-PLY encoder keeps (alpha > 1/255)."""
    return torch.sigmoid(params["opacities"].detach().float().cpu()) > 1 / 255


@dataclass(frozen=True)
class FormatNote:
    """One line on how a format stores these particular Gaussians (SPZ: the centres' precision)."""

    text: str
    degraded: bool = False  # coarser than the format's usual: the export hook prints it too


@dataclass(frozen=True)
class ExportFormat:
    name: str
    suffix: str  # appended to a file stem; what the viewers look for
    max_sh_degree: int  # higher bands are cut before encoding
    viewers: str
    write: Callable[[Params, IO[bytes]], None]
    keep: Callable[[Params], Tensor] | None = None  # the format's own cut: [N] bool of Gaussians it stores
    keep_reason: str = ""
    # a line for the summary, from the Gaussians about to be written; called before writing (it may refuse)
    describe: Callable[[Params], FormatNote] | None = None


FORMATS: dict[str, ExportFormat] = {
    f.name: f
    for f in (
        ExportFormat("ply", ".ply", 4, "every 3DGS viewer (INRIA layout, float32, all SH)", _write_ply),
        ExportFormat("splat", ".splat", 0, "antimatter15 splat viewer and its forks", _write_splat),
        ExportFormat(
            "ply_compressed",
            ".compressed.ply",
            3,
            "SuperSplat / PlayCanvas",
            _write_ply_compressed,
            keep=compressed_ply_visible,
            keep_reason="ply_compressed drops opacity <= 1/255",
        ),
        ExportFormat(
            "spz",
            ".spz",
            3,
            "SuperSplat / PlayCanvas, Spark, Babylon.js (SPZ v3, gzip, PLY's frame)",
            _write_spz,
            describe=_describe_spz,
        ),
        ExportFormat(
            "sog", ".sog", 3, "SuperSplat / PlayCanvas, Babylon.js (SOG v2: WebP images in a ZIP)", _write_sog
        ),
        ExportFormat(
            "glb", ".glb", 3, "glTF 2.0 viewers with KHR_gaussian_splatting (point cloud elsewhere)", _write_glb
        ),
    )
}


def get_format(name: str, key: str = "--format") -> ExportFormat:
    """The format called ``name``.

    Raises:
        ConfigError: an unknown name (the message lists the known ones and names ``key``).
    """
    from ..errors import ConfigError

    if name not in FORMATS:
        raise ConfigError(f"{key}: unknown export format {name!r} (known: {', '.join(FORMATS)})")
    return FORMATS[name]


def spz_format(frame: str, key: str = "--spz-frame") -> ExportFormat:
    """The ``spz`` format storing ``frame``: ``rdf`` (PLY's axes, the default) or ``rub``.

    Raises:
        ConfigError: an unknown frame (the message names ``key`` and the known frames).
    """
    from ..errors import ConfigError
    from .axes import SPZ_FRAMES

    if frame not in SPZ_FRAMES:
        raise ConfigError(f"{key}: unknown SPZ frame {frame!r} (known: {', '.join(SPZ_FRAMES)})")
    return replace(FORMATS["spz"], write=partial(_write_spz, frame=frame), describe=partial(_describe_spz, frame=frame))
