"""``python -m benchmarks results``: recorded rows replace by key, the page is generated from them alone,
and docs/results.md is what the committed rows give (so the page cannot be edited away from its data)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # benchmarks/ is run from the checkout, not installed

from benchmarks.results import PAGE, STORE, Table, record, render_page  # noqa: E402

TABLE = Table("speed", "Speed", "What it measures.", ("scene", "PSNR", "seconds"), order=5)


def test_a_row_with_the_same_key_replaces_the_earlier_one(tmp_path: Path) -> None:
    record(TABLE, "demo", {"scene": "demo", "PSNR": 30.0, "seconds": 90.0}, ["cmd", "a b"], on="cpu X", store=tmp_path)
    record(TABLE, "photo", {"scene": "photo", "PSNR": 33.5}, "cmd photo", on="cpu X", store=tmp_path)
    path = record(TABLE, "demo", {"scene": "demo", "PSNR": 31.25, "seconds": 80.0}, "cmd b", on="cpu Y", store=tmp_path)
    rows = json.loads(path.read_text())["rows"]
    assert [(r["key"], r["cells"].get("PSNR"), r["machine"]) for r in rows] == [
        ("demo", 31.25, "cpu Y"),
        ("photo", 33.5, "cpu X"),
    ]
    page = render_page(tmp_path)
    lines = page.splitlines()
    assert "## Speed" in lines and "What it measures." in lines
    assert "| scene | PSNR | seconds | machine | version |" in lines
    demo = next(line for line in lines if line.startswith("| demo |"))
    assert demo.split(" | ")[1:4] == ["31.25", "80", "cpu Y"]
    assert next(line for line in lines if line.startswith("| photo |")).split(" | ")[2] == ""  # no seconds
    assert "cmd b" in lines and "cmd photo" in lines and "cmd 'a b'" not in lines  # the replaced row's command


def test_an_unknown_column_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no column"):
        record(TABLE, "demo", {"dB": 1.0}, "cmd", on="cpu", store=tmp_path)


def test_check_tells_a_stale_page_and_the_command_rewrites_it(tmp_path: Path) -> None:
    record(TABLE, "demo", {"scene": "demo"}, "cmd", on="cpu", store=tmp_path)
    page = tmp_path / "results.md"
    page.write_text("hand edited\n")
    args = [sys.executable, "-m", "benchmarks", "results", "--store", str(tmp_path), "--page", str(page)]
    stale = subprocess.run([*args, "--check"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert stale.returncode == 1 and "python -m benchmarks results" in stale.stdout
    assert subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=60).returncode == 0
    assert page.read_text() == render_page(tmp_path)
    fresh = subprocess.run([*args, "--check"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert fresh.returncode == 0, fresh.stdout


def test_docs_results_md_is_generated_from_the_committed_rows() -> None:
    if not any(STORE.glob("*.json")):
        pytest.skip("no recorded results yet")
    assert PAGE.read_text() == render_page(STORE), "docs/results.md is stale: run python -m benchmarks results"


def test_any_benchmark_run_with_record_stores_its_closing_lines(tmp_path):
    from types import SimpleNamespace

    from benchmarks.__main__ import recorded

    def fine(args):
        print("warming up\nscene small: 12.5 ms\nscene large: 80.1 ms\nratio 6.4x")
        return 0

    assert recorded("rasterizer", SimpleNamespace(main=fine), ["--scenes", "small"], store=tmp_path) == 0
    row = json.loads((tmp_path / "rasterizer.json").read_text())["rows"][0]
    assert row["cells"] == {
        "arguments": "--scenes small",
        "result": "scene small: 12.5 ms / scene large: 80.1 ms / ratio 6.4x",
    }
    assert row["command"] == "python -m benchmarks rasterizer --scenes small"
    failed = SimpleNamespace(main=lambda args: 1)
    assert recorded("train", failed, [], store=tmp_path) == 1 and not (tmp_path / "train.json").exists()
