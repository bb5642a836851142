"""LPIPS wiring: cached-weights-only loading, [-1,1] scaling, gradients, and the unavailable path.

No real ImageNet weights are available offline, so the wiring is checked with a random backbone
(values are then not LPIPS numbers, but every step of the computation is the real one).
"""

from __future__ import annotations

import hashlib
import io
import socket
import warnings
from pathlib import Path

import lpips
import pytest
import torch

from pointrix_lite.metrics import LPIPS, backbone_download, backbone_weights_path
from tests.model.helpers import make_model, make_view


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args, **kwargs):
        raise AssertionError("network access attempted")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(torch.hub, "download_url_to_file", refuse)


@pytest.fixture
def empty_hub(tmp_path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(torch.hub, "get_dir", lambda: str(tmp_path))
    return tmp_path


def _images(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    a = torch.rand(2, 32, 40, 3, generator=g)
    return a, (a + 0.3 * torch.randn(a.shape, generator=g)).clamp(0, 1)


def test_weights_path_uses_torchvision_file_names(empty_hub) -> None:
    assert backbone_weights_path("vgg") == empty_hub / "checkpoints" / "vgg16-397923af.pth"
    assert backbone_weights_path("alex") == empty_hub / "checkpoints" / "alexnet-owt-7be5be79.pth"


def test_unavailable_returns_none_with_reason(empty_hub, no_network) -> None:
    metric = LPIPS("vgg")
    a, b = _images()
    assert metric(a, b) is None
    assert not metric.available
    assert "vgg16-397923af.pth" in metric.reason and "\n" not in metric.reason

    model = make_model(20)
    rendered = {"rgb": b}
    views = [make_view((a[i] * 255).round().to(torch.uint8), i) for i in range(2)]
    metrics = model.get_metric_dict(rendered, views)
    # Both conventions, as papers report them: "lpips" AlexNet, "lpips_vgg" VGG; each None with its reason.
    assert set(metrics) == {"psnr", "ssim", "lpips", "lpips_vgg"}
    assert metrics["lpips"] is None and metrics["lpips_vgg"] is None
    assert model.metric_notes["lpips_vgg"] == metric.reason
    assert "alexnet-owt-7be5be79.pth" in model.metric_notes["lpips"]


def test_random_backbone_identity_difference_and_gradient(no_network) -> None:
    metric = LPIPS("vgg", random_backbone=True)
    a, b = _images(1)
    assert float(metric(a, a)) == pytest.approx(0.0, abs=1e-7)
    a_req = a.clone().requires_grad_(True)
    value = metric(a_req, b)
    assert float(value.detach()) > 0
    value.backward()
    assert torch.isfinite(a_req.grad).all() and a_req.grad.abs().sum() > 0


def test_too_small_images_give_none_with_reason(no_network) -> None:
    metric = LPIPS("alex", random_backbone=True)
    tiny = torch.rand(1, 20, 40, 3)
    assert metric(tiny, tiny) is None
    assert "smaller than alex accepts (31 px)" in metric.last_reason
    a, b = _images(4)
    assert metric(a, b) is not None and metric.last_reason is None


def test_inputs_are_scaled_like_lpips_normalize_flag(no_network) -> None:
    metric = LPIPS("alex", random_backbone=True)
    a, b = _images(2)
    ours = metric(a, b)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        direct = lpips.LPIPS(net="alex", pnet_rand=True, verbose=False)
    direct.load_state_dict(metric._model.state_dict())
    # lpips' own normalize=True maps [0,1] to [-1,1]; without it the inputs would be taken as is.
    with torch.no_grad():
        expected = direct(a.permute(0, 3, 1, 2), b.permute(0, 3, 1, 2), normalize=True).mean()
        unscaled = direct(a.permute(0, 3, 1, 2), b.permute(0, 3, 1, 2), normalize=False).mean()
    torch.testing.assert_close(ours, expected)
    assert abs(float(ours) - float(unscaled)) > 1e-4


def test_cached_backbone_is_loaded_into_lpips(empty_hub, no_network, monkeypatch: pytest.MonkeyPatch) -> None:
    import torchvision

    # A stand-in cache file in torchvision's format (features only, to keep it small).
    tv = torchvision.models.alexnet(weights=None)
    state = {f"features.{k}": v for k, v in tv.features.state_dict().items()}
    buf = io.BytesIO()
    torch.save(state, buf)
    # Named as torch.hub names it, with its own sha256 prefix: the cache check hashes it on load.
    name = f"alexnet-owt-{hashlib.sha256(buf.getvalue()).hexdigest()[:8]}.pth"
    monkeypatch.setattr(backbone_download, "backbone_url", lambda net: f"https://example.invalid/models/{name}")
    path = backbone_weights_path("alex")
    assert path.name == name
    path.parent.mkdir(parents=True)
    path.write_bytes(buf.getvalue())

    metric = LPIPS("alex")
    assert metric.available
    a, b = _images(3)
    assert float(metric(a, b)) > 0
    loaded = metric._model.net.state_dict()
    torch.testing.assert_close(loaded["slice1.0.weight"], state["features.0.weight"])
    torch.testing.assert_close(loaded["slice5.10.bias"], state["features.10.bias"])
    assert len(loaded) == len(state)
    # The package's linear heads come from the file shipped with lpips, not random init.
    heads = torch.load(Path(lpips.__file__).parent / "weights" / "v0.1" / "alex.pth", map_location="cpu")
    torch.testing.assert_close(metric._model.state_dict()["lin0.model.1.weight"], heads["lin0.model.1.weight"])
