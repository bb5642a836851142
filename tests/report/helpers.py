"""A fake run folder with known contents, and a second reader of report.html (``html.parser``)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import yaml
from PIL import Image

SMALL = (40, 30)  # (width, height) of the small views: shown as they are
BIG = (1024, 768)  # shown at 512x384, an exact 2x box filter
LOSS = [(10, 0.5, 0.30), (20, 1.0, 0.20), (30, 1.5, 0.12), (40, 2.0, 0.10)]  # (step, elapsed, value)
VAL_PSNR = [(20, 1.1, 18.0), (40, 2.1, 22.5)]
TEST_PSNR = [(40, 2.6, 23.25)]


def fake_metrics(views: list[str]) -> dict:
    per_view = {v: {"psnr": 20.0 + i * 1.2345, "ssim": 0.8 + i * 0.01234, "lpips": None} for i, v in enumerate(views)}
    aligned = {v: {"psnr": s["psnr"] + 0.5, "ssim": s["ssim"] + 0.001, "lpips": None} for v, s in per_view.items()}
    mean, mean_aligned = (
        {
            k: (None if k == "lpips" else float(np.mean([s[k] for s in table.values()])))
            for k in ("psnr", "ssim", "lpips")
        }
        for table in (per_view, aligned)
    )
    return {
        "mean": mean,
        "per_view": per_view,
        "mean_aligned": mean_aligned,
        "per_view_aligned": aligned,
        "num_gaussians": 12345,
        "steps": 40,
        "train_seconds": 2.25,
        "phase_seconds": {"loading images": 0.1, "setup": 0.5, "validation": 0.2, "export": 0.05, "test": 0.3},
        "notes": {"lpips": "unavailable: no weights"},
    }


def scalar(name: str, step: int, elapsed: float, value: float | None) -> str:
    return json.dumps(
        {"kind": "scalar", "step": step, "name": name, "value": value, "time": 1.7e9 + elapsed, "elapsed": elapsed}
    )


def write_log(path: Path) -> None:
    lines = [json.dumps({"kind": "config", "config": {"name": "fake"}})]
    records = [
        (t, name, step, v)
        for name, rs in (("train/loss", LOSS), ("val/psnr", VAL_PSNR), ("test/psnr", TEST_PSNR))
        for step, t, v in rs
    ]
    lines += [scalar(name, step, t, v) for t, name, step, v in sorted(records)]  # in time order, as a run writes
    lines.append(json.dumps({"kind": "image", "step": 20, "name": "val/a", "path": "images/a.png", "elapsed": 1.2}))
    path.write_text("\n".join(lines) + "\n")


def view_images(seed: int, size: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """(render, gt): gt random; render equal to it but for a block off by 0-89 levels and a few pixels off by 255."""
    rng = np.random.default_rng(seed)
    w, h = size
    gt = rng.integers(0, 256, size=(h, w, 3), dtype=np.uint8)
    render = gt.copy()
    block = gt[h // 4 : h // 2, w // 4 : w // 2].astype(int)
    render[h // 4 : h // 2, w // 4 : w // 2] = np.clip(block + rng.integers(0, 90, size=block.shape), 0, 255)
    render[0, :3] = 255 - gt[0, :3]  # the largest errors: above the 99th percentile
    return render, gt


def make_run(
    root: Path,
    views: dict[str, tuple[int, int]] | None = None,
    log: bool = True,
    metrics: bool = True,
    config: dict | None = None,
) -> tuple[Path, dict[str, tuple[np.ndarray, np.ndarray]]]:
    """A run folder as train.py leaves it; returns it and each view's (render, gt)."""
    views = {"r_000": SMALL, "r_001": SMALL, "r_002": BIG} if views is None else views
    exp = root / "fake_run"
    written = {}
    for i, (name, size) in enumerate(views.items()):
        render, gt = view_images(i, size)
        for kind, image in (("render", render), ("gt", gt)):
            (exp / "renders" / "test" / kind).mkdir(parents=True, exist_ok=True)
            Image.fromarray(image).save(exp / "renders" / "test" / kind / f"{name}.png")
        written[name] = (render, gt)
    exp.mkdir(parents=True, exist_ok=True)
    cfg = config or {
        "name": "fake",
        "trainer": {"max_steps": 40, "save_test_renders": True},
        "writers": [{"type": "TensorboardWriter"}, {"type": "JsonlWriter", "filename": "log.jsonl"}],
    }
    (exp / "config.yaml").write_text(yaml.safe_dump(cfg))
    if metrics:
        (exp / "metrics.json").write_text(json.dumps(fake_metrics(list(views)), indent=2))
    if log:
        write_log(exp / "log.jsonl")
    return exp, written


@dataclass
class Cell:
    tag: str
    attrs: dict
    text: str = ""


@dataclass
class Page:
    tables: dict[str, list[list[Cell]]] = field(default_factory=dict)
    images: list[dict] = field(default_factory=list)  # attrs + "view" (the figure's data-view)
    polylines: list[dict] = field(default_factory=list)  # attrs + "chart" (the svg's aria-label)
    missing: dict[str, list[str]] = field(default_factory=dict)  # section id -> sentences
    colour_scale: float | None = None
    text: str = ""


class PageReader(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.page = Page()
        self.section = self.figure = self.chart = None
        self.table = self.cell = None
        self.missing_text: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list) -> None:
        a = dict(attrs)
        if tag == "section":
            self.section = a.get("id")
        elif tag == "table":
            self.table = self.page.tables.setdefault(a.get("id"), [])
        elif tag == "tr" and self.table is not None:
            self.table.append([])
        elif tag in ("td", "th") and self.table is not None:
            self.cell = Cell(tag, a)
            self.table[-1].append(self.cell)
        elif tag == "figure":
            self.figure = a.get("data-view")
        elif tag == "img":
            self.page.images.append({**a, "view": self.figure})
        elif tag == "svg" and a.get("class") == "chart":
            self.chart = a.get("aria-label")
        elif tag == "svg" and a.get("class") == "colour-bar":
            self.page.colour_scale = float(a["data-scale"])
        elif tag == "polyline":
            self.page.polylines.append({**a, "chart": self.chart})
        elif tag == "p" and a.get("class") == "missing":
            self.missing_text = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th"):
            self.cell = None
        elif tag == "table":
            self.table = None
        elif tag == "figure":
            self.figure = None
        elif tag == "p" and self.missing_text is not None:
            self.page.missing.setdefault(self.section, []).append("".join(self.missing_text))
            self.missing_text = None

    def handle_data(self, data: str) -> None:
        self.page.text += data
        if self.cell is not None:
            self.cell.text += data
        if self.missing_text is not None:
            self.missing_text.append(data)


def read_page(path: Path) -> Page:
    reader = PageReader()
    reader.feed(path.read_text(encoding="utf-8"))
    reader.close()
    return reader.page


def decode_data_uri(uri: str) -> np.ndarray:
    """The pixels of a ``data:image/png;base64,`` URI; fails on anything but a PNG."""
    import base64
    import io

    prefix = "data:image/png;base64,"
    assert uri.startswith(prefix), uri[:40]
    raw = base64.b64decode(uri[len(prefix) :], validate=True)
    assert raw[:8] == b"\x89PNG\r\n\x1a\n"
    with Image.open(io.BytesIO(raw)) as im:
        assert im.format == "PNG"
        return np.asarray(im.convert("RGB"))


def polyline_points(line: dict) -> np.ndarray:
    return np.array([[float(v) for v in p.split(",")] for p in line["points"].split()])
