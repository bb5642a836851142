"""A small scene, a reference render and a minimal client of viser's websocket protocol."""

from __future__ import annotations

import io
import math
import time

import msgspec
import numpy as np
import torch
from PIL import Image
from scipy.spatial.transform import Rotation

from pointrix_lite.data.cameras import look_at
from pointrix_lite.model import GaussianModel
from pointrix_lite.renderer.rasterization import rasterization

BACKGROUND = (0.0, 0.0, 0.0)


def make_scene_model(n: int = 3000, sh_degree: int = 1, seed: int = 0) -> GaussianModel:
    """A colourful ball of opaque Gaussians around the origin (radius ~1), SH degree ``sh_degree``."""
    g = torch.Generator().manual_seed(seed)
    means = torch.randn(n, 3, generator=g)
    means = means / means.norm(dim=1, keepdim=True) * torch.rand(n, 1, generator=g).pow(1 / 3)
    k = (sh_degree + 1) ** 2
    params = {
        "means": means,
        "quats": torch.randn(n, 4, generator=g),
        "scales": torch.full((n, 3), math.log(0.06)) + 0.3 * torch.randn(n, 3, generator=g),
        "opacities": torch.full((n,), 2.0),
        "sh0": ((means * 0.5 + 0.5) - 0.5).unsqueeze(1) / 0.28209479177387814,  # colour = position
        "shN": 0.1 * torch.randn(n, k - 1, 3, generator=g),
    }
    model = GaussianModel(GaussianModel.Config(sh_degree=sh_degree, init_num_points=1))
    model.load_params(params)
    model.step = 10**6  # full SH degree active
    return model


def pose_looking_at(eye: tuple[float, float, float], target=(0.0, 0.0, 0.0), up=(0.0, 0.0, 1.0)):
    """(wxyz, position) camera-to-world, OpenCV axes: the pose viser's browser would report."""
    w2c = look_at(np.array(eye), np.array(target), np.array(up))
    c2w_R = w2c[:3, :3].T
    x, y, z, w = Rotation.from_matrix(c2w_R).as_quat()
    return (float(w), float(x), float(y), float(z)), tuple(float(v) for v in eye)


def reference_render(
    model: GaussianModel, wxyz, position, fov: float, width: int, height: int, sh_degree=None
) -> np.ndarray:
    """[H, W, 3] uint8 from ``rasterization()`` with the camera built here, independently of the viewer:
    scipy's quaternion, f = H / (2 tan(fov/2)), principal point at the centre."""
    w, x, y, z = wxyz
    R = Rotation.from_quat([x, y, z, w]).as_matrix()
    viewmat = np.eye(4)
    viewmat[:3, :3] = R.T
    viewmat[:3, 3] = -R.T @ np.asarray(position)
    f = height / (2 * math.tan(fov / 2))
    K = torch.tensor([[f, 0, width / 2], [0, f, height / 2], [0, 0, 1]], dtype=torch.float32)
    p = model.render_params(sh_degree=sh_degree)
    with torch.no_grad():
        colors, _, _ = rasterization(
            p["means"],
            p["quats"],
            p["scales"],
            p["opacities"],
            p["colors"],
            torch.from_numpy(viewmat).float()[None],
            K[None],
            width,
            height,
            sh_degree=p["sh_degree"],
            backgrounds=torch.tensor([BACKGROUND]),
        )
    return (colors[0].clamp(0, 1).numpy() * 255).round().astype(np.uint8)


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return float("inf") if mse == 0 else 10 * math.log10(255.0**2 / mse)


class ViserProtocolClient:
    """Speaks viser 1.1.1's websocket protocol: msgpack messages up; zstd msgpack windows down."""

    def __init__(self, port: int) -> None:
        import viser
        from websockets.sync.client import connect

        self.ws = connect(f"ws://127.0.0.1:{port}", subprotocols=[f"viser-v{viser.__version__}"], max_size=None)

    def send_camera(self, wxyz, position, fov: float, width: int, height: int, look_at_point=(0.0, 0.0, 0.0)) -> None:
        message = {
            "type": "ViewerCameraMessage",
            "wxyz": list(wxyz),
            "position": list(position),
            "fov": fov,
            "near": 0.01,
            "far": 1000.0,
            "image_height": height,
            "image_width": width,
            "look_at": list(look_at_point),
            "up_direction": [0.0, 0.0, 1.0],
        }
        self.ws.send(msgspec.msgpack.encode(message))

    def messages(self, timeout: float):
        """Yield every decoded message dict that arrives within ``timeout`` seconds."""
        import zstandard

        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                raw = self.ws.recv(timeout=left)
            except TimeoutError:
                return
            size, csize = int.from_bytes(raw[:8], "little"), int.from_bytes(raw[8:16], "little")
            inner = zstandard.ZstdDecompressor().decompress(raw[16 : 16 + csize], max_output_size=size)
            yield from msgspec.msgpack.decode(inner)["messages"]

    # 90 s: the first frame of a fresh view.py process imports torch and loads the extension; on 2 cores
    # busy with compiles that took over 30 s once. A healthy run answers in under a second.
    def wait_image(self, size: tuple[int, int], timeout: float = 90.0) -> np.ndarray:
        """The first background image of ``size`` (width, height) the server sends, as [H, W, 3] uint8."""
        seen = []
        for msg in self.messages(timeout):
            if msg.get("type") == "BackgroundImageMessage" and msg.get("rgb_data"):
                image = np.asarray(Image.open(io.BytesIO(msg["rgb_data"])).convert("RGB"))
                seen.append(image.shape[1::-1])
                if tuple(image.shape[1::-1]) == tuple(size):
                    return image
        raise AssertionError(f"no {size} background image within {timeout} s (got sizes {seen})")

    def close(self) -> None:
        self.ws.close()
