"""Fetching the LPIPS backbone weights (metrics/backbone_download.py), against a local HTTP server.

The server (127.0.0.1, a thread) serves a stand-in for torchvision's AlexNet file: the features of a
randomly initialised AlexNet, saved the way torchvision's file stores them, under a name that carries
the first 8 hex digits of its sha256 as torchvision's names do. Any connection to another address
fails the test, so nothing here can reach the internet.
"""

from __future__ import annotations

import hashlib
import http.server
import io
import json
import socket
import threading
import time
from pathlib import Path

import pytest
import torch

from pointrix_lite.config import ConfigError
from pointrix_lite.metrics import LPIPS, backbone_download
from pointrix_lite.model.gaussian_model import GaussianModel
from tests.model.helpers import make_model, make_view

SWITCH = backbone_download.SWITCH


class Server:
    """``routes``: URL path -> (status, body, Content-Length sent); counts the requests it answered."""

    def __init__(self) -> None:
        self.routes: dict[str, tuple[int, bytes, int]] = {}
        self.requests: list[str] = []
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                server.requests.append(self.path)
                status, body, length = server.routes.get(self.path, (404, b"not found", 9))
                self.send_response(status)
                self.send_header("Content-Length", str(length))
                self.end_headers()
                self.wfile.write(body)
                self.close_connection = True

            def log_message(self, *args) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.02,), daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}{path}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def local_only(monkeypatch: pytest.MonkeyPatch) -> None:
    real_connect = socket.socket.connect

    def connect(sock, address):
        if address[0] != "127.0.0.1":
            raise AssertionError(f"network access attempted: {address}")
        return real_connect(sock, address)

    monkeypatch.setattr(socket.socket, "connect", connect)


@pytest.fixture
def hub(tmp_path, monkeypatch: pytest.MonkeyPatch, local_only) -> Path:
    monkeypatch.setattr(torch.hub, "get_dir", lambda: str(tmp_path / "hub"))
    monkeypatch.setenv(SWITCH, "1")  # tests/conftest.py turns downloads off for everything else
    return tmp_path / "hub" / "checkpoints"


@pytest.fixture
def server():
    s = Server()
    yield s
    s.close()


@pytest.fixture(scope="module")
def weights() -> tuple[bytes, dict[str, torch.Tensor], str]:
    """(file bytes, state dict, torchvision-style file name with the sha256 prefix)."""
    import torchvision

    torch.manual_seed(0)
    state = {f"features.{k}": v for k, v in torchvision.models.alexnet(weights=None).features.state_dict().items()}
    buf = io.BytesIO()
    torch.save(state, buf)
    data = buf.getvalue()
    return data, state, f"alexnet-owt-{hashlib.sha256(data).hexdigest()[:8]}.pth"


def _serve(server: Server, monkeypatch, name: str, body: bytes, status: int = 200, length: int | None = None) -> str:
    server.routes[f"/models/{name}"] = (status, body, len(body) if length is None else length)
    url = server.url(f"/models/{name}")
    monkeypatch.setattr(backbone_download, "backbone_url", lambda net: url)
    return url


def _images() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(5)
    a = torch.rand(2, 40, 48, 3, generator=g)
    return a, (a + 0.2 * torch.randn(a.shape, generator=g)).clamp(0, 1)


def test_first_use_downloads_once_and_lpips_is_computed(hub, server, weights, monkeypatch) -> None:
    data, state, name = weights
    url = _serve(server, monkeypatch, name, data)
    lines: list[str] = []
    metric = LPIPS("alex", announce=lines.append)

    assert metric.available and metric.reason is None
    path = hub / name
    # Re-read by other readers: the bytes and their hash, and torch's loader.
    assert hashlib.sha256(path.read_bytes()).hexdigest() == hashlib.sha256(data).hexdigest()
    reloaded = torch.load(path, map_location="cpu", weights_only=True)
    assert reloaded.keys() == state.keys() and all(torch.equal(reloaded[k], state[k]) for k in state)
    assert sorted(p.name for p in hub.iterdir()) == [name]  # no temp file left beside it
    assert len(lines) == 2 and all("\n" not in line for line in lines)
    assert url in lines[0] and str(path) in lines[0] and f"{SWITCH}=0" in lines[0]
    assert lines[1].startswith(f"LPIPS: {name} downloaded (")

    a, b = _images()
    assert float(metric(a, b)) > 0  # computed with the downloaded backbone
    torch.testing.assert_close(metric._model.net.state_dict()["slice1.0.weight"], state["features.0.weight"])

    again: list[str] = []
    assert LPIPS("alex", announce=again.append).available
    assert server.requests == [f"/models/{name}"] and again == []  # once per machine: the cache file is used


def test_the_model_reports_a_number_after_the_download(hub, server, weights, monkeypatch) -> None:
    data, _, name = weights
    _serve(server, monkeypatch, name, data)
    model = make_model(20, lpips_net="alex")
    a, b = _images()
    views = [make_view((a[i] * 255).round().to(torch.uint8), i) for i in range(2)]
    metrics = model.get_metric_dict({"rgb": b}, views)
    assert metrics["lpips"] is not None and float(metrics["lpips"]) > 0
    assert "lpips" not in model.metric_notes
    assert (hub / name).is_file()


@pytest.mark.parametrize(
    "case, expected",
    [
        ("corrupt", "does not match"),  # same length, other bytes: the sha256 check
        ("short", "transfer ended after"),  # the connection closes before Content-Length bytes
        ("missing", "HTTP Error 404"),
    ],
)
def test_failed_download_leaves_nothing_in_the_cache(hub, server, weights, monkeypatch, case, expected) -> None:
    data, _, name = weights
    if case == "corrupt":
        url = _serve(server, monkeypatch, name, bytes([data[0] ^ 1]) + data[1:])
    elif case == "short":
        url = _serve(server, monkeypatch, name, data[: len(data) // 2], length=len(data))
    else:
        url = server.url(f"/models/{name}")
        monkeypatch.setattr(backbone_download, "backbone_url", lambda net: url)
    lines: list[str] = []
    metric = LPIPS("alex", announce=lines.append)

    assert not metric.available and metric(*_images()) is None
    reason = metric.reason
    assert reason.startswith("unavailable: alex weights could not be downloaded (") and expected in reason
    assert "\n" not in reason and url in reason and str(hub / name) in reason and f"{SWITCH}=0" in reason
    assert list(hub.iterdir()) == []  # neither the file nor a temp file
    assert lines[-1] == f"LPIPS: {reason}"


def test_a_server_that_never_answers_times_out_quickly(hub, weights, monkeypatch) -> None:
    _, _, name = weights
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(1)  # accepts the connection (the kernel does) but never sends a byte
    monkeypatch.setattr(backbone_download, "TIMEOUT_S", 0.5)
    monkeypatch.setattr(
        backbone_download, "backbone_url", lambda net: f"http://127.0.0.1:{silent.getsockname()[1]}/{name}"
    )
    start = time.perf_counter()
    try:
        metric = LPIPS("alex", announce=lambda line: None)
    finally:
        silent.close()
    assert time.perf_counter() - start < 5.0
    assert "timed out" in metric.reason and list(hub.iterdir()) == []


def test_an_unwritable_cache_is_the_reason(hub, server, weights, monkeypatch) -> None:
    data, _, name = weights
    _serve(server, monkeypatch, name, data)
    hub.parent.mkdir(parents=True)
    hub.write_text("a file where the checkpoints folder should be")
    metric = LPIPS("alex", announce=lambda line: None)
    assert not metric.available and "cannot write" in metric.reason and "\n" not in metric.reason


@pytest.mark.parametrize("value", ["0", "off", "False"])
def test_switched_off_never_connects(hub, server, weights, monkeypatch, value) -> None:
    data, _, name = weights
    url = _serve(server, monkeypatch, name, data)
    monkeypatch.setenv(SWITCH, value)
    lines: list[str] = []
    metric = LPIPS("alex", announce=lines.append)
    assert server.requests == [] and lines == [] and not (hub / name).exists()
    assert metric.reason == (
        f"unavailable: alex weights not in torch hub cache ({hub / name}); downloads are off ({SWITCH}=0): copy {url} there"
    )


def test_a_misspelt_switch_is_a_one_line_config_error_at_config_load(hub, monkeypatch) -> None:
    monkeypatch.setenv(SWITCH, "maybe")
    with pytest.raises(ConfigError) as err:
        GaussianModel.Config()
    assert str(err.value) == (
        f"{SWITCH}=maybe: expected 0 or 1 (0 never downloads the LPIPS backbone weights; "
        "LPIPS is then null unless the file is in the torch hub cache)"
    )
    with pytest.raises(ConfigError, match=f"^{SWITCH}=maybe: expected 0 or 1"):
        LPIPS("alex")


def test_lpips_net_is_checked_with_its_key(hub) -> None:
    with pytest.raises(ConfigError, match=r"^model\.lpips_net: expected one of 'both', 'alex', 'vgg', got 'squeeze'$"):
        GaussianModel.Config(lpips_net="squeeze")
    with pytest.raises(ConfigError, match=r"^lpips_net: expected one of 'vgg', 'alex', got 'squeeze'$"):
        LPIPS("squeeze")  # type: ignore[arg-type]


def test_a_corrupt_cached_file_is_the_reason_not_a_traceback(hub, server, weights, monkeypatch) -> None:
    """A file under the right name whose bytes are not the weights (a cut copy, a disk error): checked on
    load, never downloaded over silently, and the metric is None with a line saying what to do."""
    data, _, name = weights
    url = _serve(server, monkeypatch, name, data)
    hub.mkdir(parents=True)
    (hub / name).write_bytes(data[: len(data) // 2])
    lines: list[str] = []
    metric = LPIPS("alex", announce=lines.append)
    assert not metric.available and server.requests == []
    assert metric.reason.startswith(f"unavailable: {hub / name} is corrupt (sha256 ") and url in metric.reason
    assert lines == [f"LPIPS: {metric.reason}"] and "\n" not in metric.reason
    a, b = _images()
    assert metric(a, b) is None
    model = make_model(20, lpips_net="alex")
    views = [make_view((a[i] * 255).round().to(torch.uint8), i) for i in range(2)]
    metrics = model.get_metric_dict({"rgb": b}, views)
    assert metrics["lpips"] is None and "corrupt" in model.metric_notes["lpips"]
    (hub / name).unlink()  # the fix the line gives: delete it, and the next run downloads it
    assert LPIPS("alex", announce=lines.append).available


def test_a_file_that_passes_the_hash_check_but_is_not_the_weights_is_the_reason(hub, monkeypatch) -> None:
    """A name without torch.hub's hash (nothing to check it against), holding something else: the metric is
    None with the file named, at the first evaluation, not a traceback from torch.load."""
    monkeypatch.setattr(backbone_download, "backbone_url", lambda net: "http://127.0.0.1:9/models/alexnet.pth")
    hub.mkdir(parents=True)
    (hub / "alexnet.pth").write_bytes(b"not a checkpoint")
    metric = LPIPS("alex", announce=print)
    assert metric.available  # nothing to check the file against until it is read
    a, b = _images()
    assert metric(a, b) is None
    assert (
        metric.last_reason
        == metric.reason
        == (
            f"unavailable: {hub / 'alexnet.pth'} does not hold the alex weights (UnpicklingError); "
            "delete it to download it again"
        )
    )


def test_a_training_run_over_corrupt_cached_weights_writes_null_with_the_reason_and_exits_0(tmp_path) -> None:
    """The real command line with a TORCH_HOME whose hub cache holds cut-short copies of both backbones
    (torchvision's own file names): training and the test phase finish, metrics.json holds null for both
    LPIPS keys and, under notes, the line naming the file and what to do; the files are left as they were."""
    from tests.reliability.cli_helpers import run_train, write_config
    from tests.reliability.scene import real_raw_config, write_tiny_scene

    scene = write_tiny_scene(tmp_path / "scene", n_train=3, n_test=1)
    raw = real_raw_config(tmp_path / "out", scene, "torch", max_steps=2, test_at_end=True)
    home = tmp_path / "torch_home"
    hub = home / "hub" / "checkpoints"
    hub.mkdir(parents=True)
    cut = b"PK\x03\x04 a copy cut short" * 1000
    for name in ("alexnet-owt-7be5be79.pth", "vgg16-397923af.pth"):
        (hub / name).write_bytes(cut)
    proc = run_train(
        "--config", str(write_config(tmp_path / "run.yaml", raw)), env={"TORCH_HOME": str(home), SWITCH: "0"}
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    report = json.loads((tmp_path / "out" / "tiny" / "metrics.json").read_text())
    assert report["mean"]["lpips"] is None and report["mean"]["lpips_vgg"] is None
    assert isinstance(report["mean"]["psnr"], float)
    digest = hashlib.sha256(cut).hexdigest()[:8]
    for key, name, url_hash in (("lpips", "alexnet-owt", "7be5be79"), ("lpips_vgg", "vgg16", "397923af")):
        path = hub / f"{name}-{url_hash}.pth"
        assert report["notes"][key] == (
            f"unavailable: {path} is corrupt (sha256 {digest} does not match {url_hash} in its name); delete it "
            f"and copy https://download.pytorch.org/models/{path.name} there (downloads are off: {SWITCH}=0)"
        )
        assert f"LPIPS: {report['notes'][key]}" in proc.stdout.replace("\n", " ")  # said once when the test starts
        assert path.read_bytes() == cut  # never replaced nor deleted behind the user's back
