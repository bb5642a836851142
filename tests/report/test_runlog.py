"""Curves read back from JSON-lines logs: JsonlWriter's own, resumed runs, old and damaged logs."""

from __future__ import annotations

import json

import pytest

from pointrix_lite.report.charts import MAX_POINTS, thin
from pointrix_lite.report.runlog import Point, read_log
from pointrix_lite.writers import JsonlWriter

from .helpers import scalar


def test_jsonl_writer_records_elapsed_seconds_the_report_reads(tmp_path):
    writer = JsonlWriter(JsonlWriter.Config(), exp_dir=tmp_path)
    writer.write_config({"name": "toy"})
    for step in (5, 10, 15):
        writer.write_scalar("train/loss", 1.0 / step, step)
    writer.write_scalar("val/psnr", float("nan"), 15)  # written as null: no point
    writer.close()
    records = [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    elapsed = [r["elapsed"] for r in records if r["kind"] == "scalar"]
    assert elapsed == sorted(elapsed) and 0 <= elapsed[0] < 5  # seconds since the writer opened
    log = read_log(tmp_path / "log.jsonl")
    assert [(p.step, p.seconds, p.value) for p in log.series["train/loss"]] == [
        (r["step"], r["elapsed"], r["value"]) for r in records if r.get("name") == "train/loss"
    ]
    assert "val/psnr" not in log.series and log.problems == [] and log.resumes == 0


def test_a_resumed_run_replaces_the_steps_after_its_checkpoint(tmp_path):
    first = [
        scalar("train/loss", s, t, v) for s, t, v in ((10, 1.0, 0.9), (20, 2.0, 0.8), (30, 3.0, 0.7), (40, 4.0, 0.6))
    ]
    # Resumed from the checkpoint of step 20 (the first run went on to 40 and was stopped).
    second = [scalar("train/loss", s, t, v) for s, t, v in ((30, 0.5, 0.65), (40, 1.5, 0.55), (50, 2.5, 0.45))]
    path = tmp_path / "log.jsonl"
    path.write_text("\n".join(first + second) + "\n")
    log = read_log(path)
    assert [(p.step, p.seconds, p.value) for p in log.series["train/loss"]] == [
        (10, 1.0, 0.9),
        (20, 2.0, 0.8),
        (30, 2.5, 0.65),
        (40, 3.5, 0.55),
        (50, 4.5, 0.45),
    ]
    assert log.resumes == 1


def test_a_log_without_elapsed_uses_wall_time_and_says_so(tmp_path):
    old = [
        {"kind": "scalar", "step": s, "name": "train/loss", "value": v, "time": 1000.0 + t}
        for s, t, v in ((10, 0.0, 0.9), (20, 4.0, 0.8), (15, 60.0, 0.85), (25, 62.0, 0.75))
    ]
    path = tmp_path / "log.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in old) + "\n")
    log = read_log(path)
    # The step going back starts the resumed part; the 56 s between the runs are not counted.
    assert [(p.step, p.seconds) for p in log.series["train/loss"]] == [(10, 0.0), (15, 0.0), (25, 2.0)]
    assert log.resumes == 1
    assert any("wall time" in p for p in log.problems)


def test_damaged_lines_are_skipped_and_counted(tmp_path):
    path = tmp_path / "log.jsonl"
    path.write_text(
        "\n".join(
            [
                scalar("train/loss", 10, 1.0, 0.5),
                "not json",
                json.dumps({"kind": "scalar", "name": "x"}),
                json.dumps([1, 2]),
                scalar("train/loss", 20, 2.0, None),
                scalar("train/loss", 30, 3.0, 0.25),
            ]
        )
        + '\n{"kind": "scalar", "step": 4'  # a line cut off while the run was writing
    )
    log = read_log(path)
    assert [(p.step, p.value) for p in log.series["train/loss"]] == [(10, 0.5), (30, 0.25)]
    assert log.problems == ["4 line(s) of log.jsonl could not be read and were skipped."]


@pytest.mark.parametrize("n", [MAX_POINTS, MAX_POINTS * 2 + 500])
def test_long_series_are_averaged_to_the_point_limit(n):
    points = [Point(i, i * 0.5, float(i % 7)) for i in range(n)]
    thinned = thin(points)
    if n <= MAX_POINTS:
        assert thinned == points
        return
    assert len(thinned) == MAX_POINTS
    assert sum(p.value for p in thinned) == pytest.approx(sum(p.value for p in points) / (n / MAX_POINTS), rel=0.01)
    assert thinned[0].step < thinned[-1].step and thinned[-1].step <= n - 1
