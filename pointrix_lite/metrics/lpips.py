"""LPIPS through the ``lpips`` package, with torchvision's ImageNet backbone from the torch hub cache.

``lpips.LPIPS(pretrained=True)`` would fetch the backbone (torchvision VGG16 / AlexNet) through
torchvision on first use, with no timeout and no way to stop it. Here the backbone is built randomly
(``pnet_rand=True``) and its weights are then loaded from torchvision's own cache file in the torch
hub directory, which :mod:`.backbone_download` fills once per machine (unless
``POINTRIX_LPIPS_DOWNLOAD=0``). The small LPIPS linear heads ship inside the ``lpips`` package. When
the backbone file stays missing, LPIPS is *unavailable*: callers get ``None`` and a one-line reason,
never a number computed with random features.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path

import torch
from torch import Tensor

from ..errors import ConfigError
from .backbone_download import LpipsNet, backbone_weights_path, ensure_backbone

NETS = ("vgg", "alex")
# Smallest image side each backbone accepts (pooling would shrink smaller inputs to nothing).
MIN_SIZE = {"vgg": 16, "alex": 31}


def _status_line(line: str) -> None:
    from ..progress import console  # the console the progress bars use: the line prints above a live bar

    console().print(line, markup=False, highlight=False)


def _load_backbone(model: torch.nn.Module, path: Path) -> None:
    """Copy torchvision ``features.<i>.*`` weights into lpips' ``slice<k>.<i>.*`` modules.

    lpips keeps torchvision's layer index ``i`` inside each slice, so the mapping is by index.
    """
    tv_state = torch.load(path, map_location="cpu", weights_only=True)
    own = model.net.state_dict()
    new_state = {}
    for key in own:
        _, index, leaf = key.split(".")
        new_state[key] = tv_state[f"features.{index}.{leaf}"]
    model.net.load_state_dict(new_state)


class LPIPS:
    """Learned perceptual distance between rendered and reference images.

    Args:
        net: Backbone, ``"vgg"`` (3DGS paper) or ``"alex"``.
        random_backbone: Test-only: keep the randomly initialised backbone instead of requiring
            the cached ImageNet weights. Results are then *not* LPIPS values.
        announce: Gets the status lines of a download of the backbone weights (first use on a machine).

    Attributes:
        reason: ``None`` when available, else one line saying why LPIPS can't be computed.
        last_reason: Why the last call returned ``None`` (also covers too-small images).
    """

    def __init__(
        self, net: LpipsNet = "vgg", random_backbone: bool = False, announce: Callable[[str], object] = _status_line
    ) -> None:
        if net not in NETS:
            raise ConfigError(f"lpips_net: expected one of {', '.join(map(repr, NETS))}, got {net!r}")
        self.net = net
        self.random_backbone = random_backbone
        self._model: torch.nn.Module | None = None
        self.reason: str | None = None
        self.last_reason: str | None = None
        if not random_backbone:
            self.reason = ensure_backbone(net, announce)

    @property
    def available(self) -> bool:
        return self.reason is None

    def _build(self, device: torch.device) -> torch.nn.Module | None:
        if self._model is None:
            import lpips

            with warnings.catch_warnings():
                # torchvision warns about lpips' deprecated `pretrained=` argument; nothing to act on.
                warnings.simplefilter("ignore")
                model = lpips.LPIPS(net=self.net, pretrained=True, pnet_rand=True, verbose=False)
            if not self.random_backbone:
                path = backbone_weights_path(self.net)
                try:
                    _load_backbone(model, path)
                except Exception as exc:  # passed the hash check yet unreadable: a name without a
                    # hash, or a file changed since; LPIPS is then unavailable, never a traceback in the test phase
                    self.reason = (
                        f"unavailable: {path} does not hold the {self.net} weights ({type(exc).__name__}); "
                        "delete it to download it again"
                    )
                    return None
            self._model = model.eval().requires_grad_(False)
        return self._model.to(device)

    def __call__(self, img1: Tensor, img2: Tensor) -> Tensor | None:
        """Mean LPIPS over images.

        Args:
            img1, img2: Images ``[B,H,W,3]`` or ``[H,W,3]`` in [0,1]; scaled to [-1,1] as lpips expects.

        Returns:
            Scalar tensor (differentiable w.r.t. the inputs), or ``None`` when unavailable or the
            images are smaller than the backbone accepts (``last_reason`` says which).
        """
        self.last_reason = self.reason
        if not self.available:
            return None
        if img1.dim() == 3:
            img1, img2 = img1[None], img2[None]
        if min(img1.shape[1:3]) < MIN_SIZE[self.net]:
            self.last_reason = f"unavailable: {tuple(img1.shape[1:3])} images are smaller than {self.net} accepts ({MIN_SIZE[self.net]} px)"
            return None
        model = self._build(img1.device)
        if model is None:
            self.last_reason = self.reason
            return None
        x = img1.permute(0, 3, 1, 2).float() * 2.0 - 1.0
        y = img2.permute(0, 3, 1, 2).float() * 2.0 - 1.0
        return model(x, y).mean()
