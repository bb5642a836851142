"""report.html of a fake run folder, read back with a second reader (html.parser, PIL)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from pointrix_lite.report import write_report
from pointrix_lite.report.views import COLOURS

from .helpers import BIG, LOSS, SMALL, TEST_PSNR, VAL_PSNR, decode_data_uri, make_run, polyline_points, read_page


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    exp, written = make_run(tmp_path_factory.mktemp("report"))
    path = write_report(exp)
    return exp, written, path, read_page(path)


def test_the_page_is_written_atomically_into_the_run_folder(run):
    exp, _, path, _ = run
    assert path == exp / "report.html"
    assert not list(exp.glob(".report.html.*.tmp"))


def test_the_per_view_table_holds_metrics_json(run):
    exp, _, _, page = run
    metrics = json.loads((exp / "metrics.json").read_text())
    header, *rows = page.tables["per-view-table"]
    assert [c.text for c in header] == [
        "view",
        "psnr",
        "ssim",
        "lpips",
        "psnr (aligned)",
        "ssim (aligned)",
        "lpips (aligned)",
    ]
    assert [r[0].text for r in rows] == ["mean", *metrics["per_view"]]
    expected = [(metrics["mean"], metrics["mean_aligned"])] + [
        (metrics["per_view"][v], metrics["per_view_aligned"][v]) for v in metrics["per_view"]
    ]
    for row, (given, aligned) in zip(rows, expected):
        values = [json.loads(c.attrs["data-value"]) for c in row[1:]]
        assert values == [given["psnr"], given["ssim"], None, aligned["psnr"], aligned["ssim"], None]
        assert [c.text for c in row[1:]] == [
            f"{given['psnr']:.2f}",
            f"{given['ssim']:.4f}",
            "n/a",
            f"{aligned['psnr']:.2f}",
            f"{aligned['ssim']:.4f}",
            "n/a",
        ]


def test_summary_and_phase_tables(run):
    exp, _, _, page = run
    metrics = json.loads((exp / "metrics.json").read_text())
    summary = {r[0].text: r[1].text for r in page.tables["summary-table"]}
    assert summary["steps"] == "40" and summary["Gaussians"] == "12,345"
    mean = metrics["mean"]
    assert summary["test"] == f"PSNR {mean['psnr']:.2f} · SSIM {mean['ssim']:.4f} · LPIPS n/a · 3 views"
    assert summary["note: lpips"] == "unavailable: no weights"
    phases = {r[0].text: float(r[1].attrs["data-value"]) for r in page.tables["phase-table"][1:]}
    assert phases == {
        "training": 2.25,
        "loading images (in setup)": 0.1,
        "setup": 0.5,
        "validation (in training)": 0.2,
        "export": 0.05,
        "test": 0.3,
    }
    shares = [r[2].text.strip() for r in page.tables["phase-table"][1:]]
    assert shares[0] == f"{2.25 / 3.1:.0%}"  # nested phases are not counted twice in the total


def test_images_decode_to_the_written_pixels(run):
    _, written, _, page = run
    shown = {(img["view"], img["data-kind"]): img for img in page.images}
    assert set(shown) == {(v, k) for v in written for k in ("render", "gt", "error")}
    for view, (render, gt) in written.items():
        for kind, image in (("render", render), ("gt", gt)):
            got = decode_data_uri(shown[view, kind]["src"])
            if image.shape[:2] == SMALL[::-1]:
                np.testing.assert_array_equal(got, image)
            else:  # the big view, 2x box-filtered to fit 512 px
                h, w = BIG[1] // 2, BIG[0] // 2
                blocks = image.reshape(h, 2, w, 2, 3).astype(np.float64).mean(axis=(1, 3))
                np.testing.assert_array_equal(got, np.rint(blocks).astype(np.uint8))
            assert (int(shown[view, kind]["width"]), int(shown[view, kind]["height"])) == got.shape[1::-1]


def test_error_maps_follow_the_printed_scale(run):
    _, written, _, page = run
    errors = {v: np.abs(r.astype(int) - g.astype(int)).sum(axis=-1) / 765.0 for v, (r, g) in written.items()}
    every = np.sort(np.concatenate([e.ravel() for e in errors.values()]))
    p99 = every[math.ceil(0.99 * every.size) - 1]
    scale = page.colour_scale
    assert p99 <= scale < p99 * 1.1 + 1e-9 and float(f"{scale:.2g}") == scale  # rounded up to 2 digits
    shown = {(img["view"], img["data-kind"]): img for img in page.images}
    for view, error in errors.items():
        got = decode_data_uri(shown[view, "error"]["src"])
        if error.shape == SMALL[::-1]:
            position = np.clip(error / scale * 255, 0, 255)
            ok = (got == COLOURS[np.rint(position).astype(int)]).all(-1)
            tie = np.abs(position % 1 - 0.5) < 1e-3  # float32 or float64 rounding may go either way
            ok |= tie & (got == COLOURS[np.ceil(position).astype(int)]).all(-1)
            ok |= tie & (got == COLOURS[np.floor(position).astype(int)]).all(-1)
            assert ok.all()
            assert (got[error == 0] == COLOURS[0]).all() and tuple(COLOURS[0]) == (0, 0, 4)  # no error: darkest
            assert (got[error >= scale] == COLOURS[255]).all() and tuple(COLOURS[255]) == (252, 255, 164)
        else:  # area-averaged error of 2x2 blocks, then coloured
            h, w = error.shape[0] // 2, error.shape[1] // 2
            index = np.clip(np.rint(error.reshape(h, 2, w, 2).mean(axis=(1, 3)) / scale * 255), 0, 255).astype(int)
            assert (got == COLOURS[index]).all(axis=-1).mean() > 0.999


def test_chart_polylines_follow_the_logged_values(run):
    _, _, _, page = run
    charts = {}
    for line in page.polylines:
        charts.setdefault(line["chart"], {})[line["data-series"]] = polyline_points(line)
    assert set(charts) == {
        "PSNR (dB) against steps",
        "PSNR (dB) against seconds",
        "loss against steps",
        "loss against seconds",
    }
    logged = {"train/loss": LOSS, "val/psnr": VAL_PSNR, "test/psnr": TEST_PSNR}
    for title, series in charts.items():
        assert set(series) == ({"train/loss"} if title.startswith("loss") else {"val/psnr", "test/psnr"})
        axis = 0 if title.endswith("steps") else 1
        xs = np.concatenate([[r[axis] for r in logged[n]] for n in series])
        ys = np.concatenate([[r[2] for r in logged[n]] for n in series])
        pts = np.concatenate(list(series.values()))
        assert len(pts) == len(xs)
        # One affine map per axis for every series of a chart: x grows with the step (or second),
        # y (SVG, downwards) falls as the value grows.
        for logged_values, svg, sign in ((xs, pts[:, 0], 1), (ys, pts[:, 1], -1)):
            slope, offset = np.polyfit(logged_values, svg, 1)
            assert np.sign(slope) == sign
            assert np.abs(slope * logged_values + offset - svg).max() < 0.01


def test_the_views_note_states_the_image_cap(run):
    _, _, _, page = run
    assert "at most 512 px on the long side (1 of 3 views box-filtered down to it)" in page.text
    assert not page.missing  # every part was there


def test_a_smaller_cap_and_fewer_views(tmp_path):
    views = {f"v{i}": SMALL for i in range(5)}
    exp, written = make_run(tmp_path, views=views, log=False)
    page = read_page(write_report(exp, max_side=20, max_views=3))
    shown = sorted({img["view"] for img in page.images})
    assert shown == ["v0", "v2", "v4"]  # evenly spread, first and last
    assert "3 of the 5 test views are shown" in page.text
    got = decode_data_uri(next(i["src"] for i in page.images if i["view"] == "v2" and i["data-kind"] == "render"))
    assert got.shape == (15, 20, 3)  # 40x30 -> long side 20
    assert len(page.tables["per-view-table"]) == 1 + 1 + 5  # header, mean, every view
