"""Export Gaussians to a file: filters, the format's SH and opacity limits, encoding, an atomic write."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from torch import Tensor

from ..errors import DataError
from ..io.ply import ply_file_size
from .filters import Selection, cut_sh, select, sh_degree_of, take
from .formats import ExportFormat, FormatNote


@dataclass
class ExportReport:
    """What one export wrote, for the command's summary and the hook's log."""

    path: Path
    format: str
    size: int  # bytes written
    num_in: int  # Gaussians in the source
    num_out: int  # Gaussians in the file
    sh_degree: int  # SH degree stored in the file
    removed: list[tuple[str, int]] = field(default_factory=list)  # (filter, Gaussians it removed)
    full_ply_size: int = 0  # the same Gaussians as a full-precision PLY with the source's SH, in bytes
    source_ply_size: int = 0  # every source Gaussian as a full-precision PLY, in bytes
    notes: list[FormatNote] = field(default_factory=list)  # the format's own lines (SPZ: its precision)

    def summary(self) -> str:
        mb = 1e6
        lines = [
            f"wrote {self.path} ({self.format}): {self.size / mb:.2f} MB, {self.num_out:,} Gaussians, SH degree {self.sh_degree}",
            "  removed: " + (", ".join(f"{name}: {n:,}" for name, n in self.removed) or "none"),
            f"  {self.full_ply_size / self.size:.2f}x smaller than the full PLY of these Gaussians "
            f"({self.full_ply_size / mb:.2f} MB); source: {self.num_in:,} Gaussians, {self.source_ply_size / mb:.2f} MB as full PLY "
            f"({self.source_ply_size / self.size:.2f}x)",
            *(f"  {note.text}" for note in self.notes),
        ]
        return "\n".join(lines)


def prepare(
    params: Mapping[str, Tensor], fmt: ExportFormat, selection: Selection | None = None
) -> tuple[dict[str, Tensor], list[tuple[str, int]]]:
    """The Gaussians ``fmt`` will store: ``selection``'s filters, then the format's own cut and SH limit.

    Returns:
        float32 CPU params and ``(filter, removed)`` per filter applied.
    """
    selection = selection or Selection()
    p, removed = select(params, selection)
    if fmt.keep is not None:
        mask = fmt.keep(p)
        removed.append((fmt.keep_reason, int((~mask).sum())))
        p = take(p, mask)
    return cut_sh(p, min(sh_degree_of(p), fmt.max_sh_degree)), removed


def export_gaussians(
    params: Mapping[str, Tensor], fmt: ExportFormat, path: str | Path, selection: Selection | None = None
) -> ExportReport:
    """Write ``params`` (means [N,3], scales [N,3] log, quats [N,4] wxyz, opacities [N] logit,
    sh0 [N,1,3], shN [N,K-1,3]) to ``path`` in ``fmt``, atomically (an existing file is replaced
    only once the new one is complete).

    Raises:
        DataError: the source holds no Gaussian, or none is left after filtering, or the format
            cannot store them (SPZ: a centre beyond 24-bit fixed point); nothing is written.
        CheckpointWriteError: the file cannot be written.
    """
    from ..io.atomic import atomic_write

    path = Path(path)
    num_in = int(params["means"].shape[0])
    if num_in == 0:  # e.g. a run that pruned every Gaussian: one line, not an encoder's traceback
        raise DataError(f"{path}: nothing to export as {fmt.name}: the source holds no Gaussians")
    p, removed = prepare(params, fmt, selection)
    num_out = int(p["means"].shape[0])
    if num_out == 0:
        detail = "; ".join(f"{name}: {n:,}" for name, n in removed if n)
        raise DataError(f"{path}: no Gaussians left to export out of {num_in:,} (removed by {detail})")
    notes = [fmt.describe(p)] if fmt.describe is not None else []  # before writing: a refusal leaves no file
    atomic_write(path, lambda f: fmt.write(p, f))
    num_rest = int(params["shN"].shape[1])
    return ExportReport(
        path=path,
        format=fmt.name,
        size=path.stat().st_size,
        num_in=num_in,
        num_out=num_out,
        sh_degree=sh_degree_of(p),
        removed=removed,
        full_ply_size=ply_file_size(num_out, num_rest),
        source_ply_size=ply_file_size(num_in, num_rest),
        notes=notes,
    )
