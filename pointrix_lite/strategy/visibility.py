"""How many training views have each Gaussian in frame: the strategies' test for floaters no view can see.

A Gaussian whose centre lies in the frame of one training view only (or none) gets no multi-view
constraint: a view that has it in frame sees it along one ray, at any depth. Some end up there, next
to the cameras (grown, relocated or moved during training), where they draw nothing a training view
would notice; a test view between the training views then looks through them (the clutter scene's
held-out view r_024 lost 7 dB to three such Gaussians 0.5 units in front of it; docs/model.md,
"Floaters in front of held-out views"). ``Strategy.Config.min_views`` names the least number of views a Gaussian must
be in frame of; the strategies relocate (MCMC) or prune (the 3DGS rules) the others at refinements.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

# gsplat's default near plane: a centre nearer to a camera than this is culled there, not drawn.
NEAR_PLANE = 0.01


@dataclass(frozen=True)
class Frusta:
    """The training cameras' projections, stacked as one matrix.

    Attributes:
        projection: ``[4, 3V]`` float32: a world point ``[x, y, z, 1]`` times it gives, per view ``v``,
            columns ``3v .. 3v+2``: ``fx X + cx Z``, ``fy Y + cy Z``, ``Z`` (``X, Y, Z`` camera coordinates).
        size: ``[V, 2]`` width, height in pixels.
    """

    projection: Tensor
    size: Tensor

    @classmethod
    def from_cameras(cls, cameras: Sequence[Any]) -> Frusta:
        """From :class:`~pointrix_lite.data.cameras.Camera` objects (pinhole, OpenCV axes), on the CPU."""
        if not cameras:
            raise ValueError("no training cameras to test Gaussians against")
        rows = [c.K.double() @ torch.as_tensor(c.viewmat, dtype=torch.float64)[:3] for c in cameras]  # [3, 4] each
        projection = torch.cat(rows).T.contiguous().float()  # [4, 3V]
        size = torch.tensor([[c.width, c.height] for c in cameras], dtype=torch.float32)
        return cls(projection, size)

    def to(self, device: torch.device) -> Frusta:
        if self.projection.device == device:
            return self
        return Frusta(self.projection.to(device), self.size.to(device))


@torch.no_grad()
def views_in_frame(means: Tensor, frusta: Frusta, chunk: int = 1 << 18) -> Tensor:
    """``[N]`` int32: how many of the views have each centre ``means [N, 3]`` in frame.

    In frame: in front of the near plane and projecting inside the image (``0 <= u < width``,
    ``0 <= v < height`` with ``u = fx X / Z + cx``, pixel centres at +0.5 as gsplat), tested without
    the division (``0 <= u Z < width Z``). One matrix product for all views; ``chunk`` Gaussians at a
    time bound the memory to ``chunk x 3V`` floats.
    """
    frusta = frusta.to(means.device)
    proj, width, height = frusta.projection, frusta.size[:, 0], frusta.size[:, 1]
    x = means.detach().float()
    count = torch.empty(x.shape[0], dtype=torch.int32, device=x.device)
    for s in range(0, x.shape[0], chunk):
        p = torch.addmm(proj[3], x[s : s + chunk], proj[:3]).view(-1, width.shape[0], 3)  # [n, V, 3]
        u, v, z = p.unbind(-1)
        inside = (z > NEAR_PLANE) & (u >= 0) & (u < width * z) & (v >= 0) & (v < height * z)
        count[s : s + chunk] = inside.sum(1, dtype=torch.int32)
    return count


def seen_by_too_few(means: Tensor, frusta: Frusta | None, min_views: int) -> Tensor | None:
    """``[N]`` bool: Gaussians fewer than ``min_views`` views have in frame; None when the test is off
    (``min_views`` 0 or no cameras bound), or when it would take every Gaussian (cameras that see
    none of the model are a wrong frame, not a model of floaters: nothing is taken then)."""
    if min_views <= 0 or frusta is None or means.shape[0] == 0:
        return None
    few = views_in_frame(means, frusta) < min_views
    return None if bool(few.all()) else few
