"""Test views whose names meet once made safe for a file ("a b", "a?b" -> a_b) each keep their own
PNGs, metrics.json names each view's file, and report.html shows each view with its own scores."""

from __future__ import annotations

import json

import imageio.v3 as iio
import numpy as np
import torch

from pointrix_lite.io.file_names import name_hash
from pointrix_lite.report import write_report
from tests.engine.engine_helpers import make_trainer
from tests.report.helpers import read_page

NAMES = ["a b", "a?b", "a_b", "r_000", "x.png", "x"]


def test_colliding_view_names_get_their_own_files_through_the_test_phase(toy_config):
    trainer = make_trainer(toy_config({"dataset": {"num_test": len(NAMES)}}))
    for i, (view, name) in enumerate(zip(trainer.dataset.test_views, NAMES)):
        view.name = view.camera.name = name
        view.image = torch.full_like(view.image, 20 * (i + 1))  # uint8: its own photo, an overwrite shows
    trainer.test()

    metrics = json.loads((trainer.exp_dir / "metrics.json").read_text())
    files = metrics["render_files"]
    assert list(metrics["per_view"]) == list(files) == NAMES
    assert files == {
        "a b": f"a_b-{name_hash('a b')}.png",
        "a?b": f"a_b-{name_hash('a?b')}.png",
        "a_b": "a_b.png",
        "r_000": "r_000.png",
        "x.png": f"x-{name_hash('x.png')}.png",
        "x": f"x-{name_hash('x')}.png",
    }
    for kind in ("render", "gt"):  # every view's file, and nothing else
        assert sorted(p.name for p in (trainer.exp_dir / "renders/test" / kind).iterdir()) == sorted(files.values())
    for i, name in enumerate(NAMES):
        gt = iio.imread(trainer.exp_dir / "renders/test/gt" / files[name])
        assert np.all(gt == 20 * (i + 1)), name  # its own photo, not another view's

    page = read_page(write_report(trainer.exp_dir))
    shown = {image["view"] for image in page.images}
    assert shown == set(NAMES)  # each figure under its view's name, none under a file stem
    for name in NAMES:
        psnr = metrics["per_view"][name]["psnr"]
        caption = f"{name} · PSNR {psnr:.2f}"
        assert caption in page.text, caption  # the view's own scores beside its images
    assert f"file a_b-{name_hash('a b')}.png" in page.text and "file a_b.png" not in page.text
