"""Which Gaussians an export keeps: validity, opacity, a box or a sphere, and the SH degree cut.

Each filter is a boolean mask over the Gaussians still selected; :func:`select` applies them in
order and records how many each one removed (what the export command reports).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial

import torch
from torch import Tensor

from ..errors import ConfigError

Params = Mapping[str, Tensor]


@dataclass(frozen=True)
class Selection:
    """Filters applied before writing; ``None`` leaves that filter off.

    ``min_opacity``: keep ``sigmoid(opacity) >= min_opacity``. ``box``: keep centres with
    ``x0 <= x <= x1`` (same for y, z), given as ``(x0, y0, z0, x1, y1, z1)``. ``sphere``: keep
    centres within distance ``r`` of ``(cx, cy, cz)``, given as ``(cx, cy, cz, r)``.
    ``max_distance``: keep centres within this distance of the scene centre, the per-axis median of
    the centres still selected (a median, so the strays this drops do not move it); drops the stray
    far Gaussians that would cost an SPZ file its precision (``spz.precision_note``).
    ``sh_degree``: keep SH bands up to this degree (a model with fewer keeps all of its own).
    """

    min_opacity: float | None = None
    box: tuple[float, ...] | None = None
    sphere: tuple[float, ...] | None = None
    max_distance: float | None = None
    sh_degree: int | None = None

    def __post_init__(self) -> None:
        if self.min_opacity is not None and not 0.0 <= self.min_opacity <= 1.0:
            raise ConfigError(f"--min-opacity: must be in [0, 1] (an alpha, not a logit), got {self.min_opacity}")
        if self.box is not None:
            if len(self.box) != 6 or not all(map(math.isfinite, self.box)):
                raise ConfigError(f"--box: expects 6 finite numbers x0 y0 z0 x1 y1 z1, got {list(self.box)}")
            if any(self.box[i] > self.box[i + 3] for i in range(3)):
                raise ConfigError(f"--box: the first corner must be <= the second on every axis, got {list(self.box)}")
        if self.sphere is not None:
            if len(self.sphere) != 4 or not all(map(math.isfinite, self.sphere)) or self.sphere[3] <= 0:
                raise ConfigError(f"--sphere: expects cx cy cz r with finite values and r > 0, got {list(self.sphere)}")
        if self.max_distance is not None and not (math.isfinite(self.max_distance) and self.max_distance > 0):
            raise ConfigError(
                f"--max-distance: must be a finite distance > 0 from the scene centre, got {self.max_distance:g}"
            )
        if self.sh_degree is not None and not 0 <= self.sh_degree <= 3:
            raise ConfigError(f"--sh-degree: must be in 0..3, got {self.sh_degree}")


def sh_degree_of(params: Params) -> int:
    """SH degree of ``shN [N,K-1,3]``: K = (degree + 1)^2."""
    return math.isqrt(params["shN"].shape[1] + 1) - 1


def cut_sh(params: Params, degree: int) -> dict[str, Tensor]:
    """``params`` with ``shN`` reduced to ``degree`` (no-op when the model has no more than that)."""
    keep = (degree + 1) ** 2 - 1
    return {**params, "shN": params["shN"][:, :keep]}


def take(params: Params, mask: Tensor) -> dict[str, Tensor]:
    """Rows of every parameter where ``mask [N]`` is true."""
    return {k: v[mask] for k, v in params.items()}


def valid_mask(p: Params) -> Tensor:
    """``[N]`` bool: every value finite and the rotation not all zero (encoders divide by its norm)."""
    finite = torch.ones(p["means"].shape[0], dtype=torch.bool)
    for v in p.values():
        # flatten, not reshape(N, -1): with N = 0 the -1 is ambiguous and torch refuses it
        finite &= torch.isfinite(v[:, None] if v.dim() == 1 else v.flatten(1)).all(dim=1)
    return finite & (p["quats"].abs().sum(dim=1) > 0)


MaskFn = Callable[[dict[str, Tensor]], Tensor]


def _masks(sel: Selection) -> list[tuple[str, MaskFn]]:
    masks: list[tuple[str, MaskFn]] = [("invalid (non-finite or zero rotation)", valid_mask)]
    if sel.min_opacity is not None:
        masks.append((f"opacity < {sel.min_opacity:g}", lambda p: torch.sigmoid(p["opacities"]) >= sel.min_opacity))
    if sel.box is not None:
        lo, hi = torch.tensor(sel.box[:3]), torch.tensor(sel.box[3:])
        box = " ".join(f"{v:g}" for v in sel.box)
        masks.append((f"outside box {box}", lambda p: ((p["means"] >= lo) & (p["means"] <= hi)).all(dim=1)))
    if sel.sphere is not None:
        centre, r = torch.tensor(sel.sphere[:3], dtype=torch.float64), sel.sphere[3]
        sphere = " ".join(f"{v:g}" for v in sel.sphere)
        masks.append((f"outside sphere {sphere}", lambda p: (p["means"].double() - centre).norm(dim=1) <= r))
    if sel.max_distance is not None:
        masks.append(
            (f"farther than {sel.max_distance:g} from the scene centre", partial(near_centre, sel.max_distance))
        )
    return masks


def near_centre(max_distance: float, p: Params) -> Tensor:
    """``[N]`` bool: centres within ``max_distance`` of the per-axis median of all centres."""
    means = p["means"].double()
    if len(means) == 0:
        return torch.ones(0, dtype=torch.bool)
    centre = means.median(dim=0).values
    return (means - centre).norm(dim=1) <= max_distance


def select(params: Params, sel: Selection) -> tuple[dict[str, Tensor], list[tuple[str, int]]]:
    """Apply ``sel`` to float32 CPU ``params`` (means [N,3], scales [N,3], quats [N,4],
    opacities [N], sh0 [N,1,3], shN [N,K-1,3]).

    Returns:
        The kept Gaussians and ``(filter description, number removed)`` per filter, in order.
    """
    p = {k: v.detach().float().cpu() for k, v in params.items()}
    removed = []
    for name, mask_fn in _masks(sel):
        mask = mask_fn(p)
        removed.append((name, int((~mask).sum())))
        p = take(p, mask)
    if sel.sh_degree is not None:
        p = cut_sh(p, sel.sh_degree)
    return p, removed
