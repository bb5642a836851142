"""Which training views the plane sweep runs on (``model.seeding.mvs_views``).

The sweep costs the same for every view it runs on (a reduced image matched against its neighbours), so
its cost grows with the capture, while what it adds does not: on a dense capture neighbouring views see
the same surfaces, and their depths land in the same voxels. A run of few steps on many views would
spend a large share of its time seeding points that a fraction of the views also finds. ``mvs_views``
bounds the views swept; ``auto`` ties the bound to the run's steps (:func:`auto_views`), so a short run
sweeps fewer views and a long one all of them.

The views kept are spread over the capture (:func:`spread_views`): farthest-point order over camera
centre and viewing direction, so every part of the scene keeps views looking at it from its sides, and
the neighbours each view is matched against are then those of the kept views.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

# mvs_views: auto sweeps one view per this many training steps, and never fewer than MIN_VIEWS
STEPS_PER_VIEW = 20
MIN_VIEWS = 24


def auto_views(max_steps: int) -> int:
    """``mvs_views: auto`` for a run of ``max_steps``: one view per ``STEPS_PER_VIEW`` steps, at least
    ``MIN_VIEWS`` (a sparse capture is swept whole at any length)."""
    return max(MIN_VIEWS, int(max_steps) // STEPS_PER_VIEW)


def spread_views(cameras: Sequence[Any], n: int) -> list[int]:
    """Indices (ascending) of ``n`` of ``cameras`` spread over the capture; all of them when ``n`` is 0
    or at least their number.

    Farthest-point order from the first camera, over a camera's centre in units of the centres' median
    distance from their mean, beside its unit viewing direction: two views at one place looking
    opposite ways (a room turned around in) count as far apart, as two views of one side from far apart
    do.

    Args:
        cameras: :class:`~pointrix_lite.data.cameras.Camera` objects (``viewmat`` world to camera, OpenCV).
        n: How many to keep.
    """
    if n <= 0 or n >= len(cameras):
        return list(range(len(cameras)))
    centres = torch.stack([c.camera_center.double() for c in cameras])  # [V, 3]
    # the camera's z axis in the world (the third row of world-to-camera R): where it looks
    forward = torch.stack([torch.as_tensor(c.viewmat, dtype=torch.float64)[2, :3] for c in cameras])
    spread = (centres - centres.mean(0)).norm(dim=1).median().clamp_min(1e-12)
    features = torch.cat([centres / spread, forward], dim=1)
    chosen = [0]
    gap = (features - features[0]).norm(dim=1)
    gap[0] = -1.0  # chosen: never again, even among cameras at one pose
    for _ in range(n - 1):
        i = int(gap.argmax())
        chosen.append(i)
        gap = torch.minimum(gap, (features - features[i]).norm(dim=1))
        gap[i] = -1.0
    return sorted(chosen)
