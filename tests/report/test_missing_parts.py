"""Folders with parts missing or damaged: the page says what is absent, in a sentence, and never fails."""

from __future__ import annotations

import json

import pytest

from pointrix_lite.errors import DataError
from pointrix_lite.report import write_report

from .helpers import SMALL, make_run, read_page


def test_a_run_with_tensorboard_only_no_test_and_no_renders(tmp_path):
    config = {
        "name": "tb",
        "trainer": {"test_at_end": False, "save_test_renders": False},
        "writers": [{"type": "TensorboardWriter"}],
    }
    exp, _ = make_run(tmp_path, views={}, log=False, metrics=False, config=config)
    page = read_page(write_report(exp))
    assert page.missing["summary"] == ["No metrics.json: no test scores (trainer.test_at_end is false)."]
    assert page.missing["curves"] == [
        "No curves: the run's writers (TensorboardWriter) include no JsonlWriter, whose log this page draws; "
        f"tensorboard --logdir {exp / 'tensorboard'} shows the curves."
    ]
    assert page.missing["views"] == ["No test renders: renders/test/ has no PNGs (trainer.save_test_renders is false)."]
    assert page.missing["per-view"] == page.missing["phases"] == page.missing["summary"]
    assert not page.images and not page.polylines
    assert "config.yaml (" in page.text  # the config is still shown


def test_an_empty_folder_gives_a_page_of_sentences(tmp_path):
    page = read_page(write_report(tmp_path))
    assert page.missing["config"] == ["No config.yaml in this folder (render.py writes none into its --out folder)."]
    assert page.missing["curves"] == [
        "No curves: log.jsonl is not in this folder (render.py writes none; a run writes it with JsonlWriter)."
    ]
    assert page.missing["summary"][0].startswith(
        "No metrics.json: no test scores (the run has not reached its test yet"
    )
    assert page.missing["views"][0].startswith("No test renders")


def test_a_render_py_folder(tmp_path):
    # render.py --ply FILE --out DIR: metrics.json with a source and no steps, renders, nothing else.
    exp, _ = make_run(tmp_path, views={"a": SMALL, "b": SMALL}, log=False)
    (exp / "config.yaml").unlink()
    metrics = json.loads((exp / "metrics.json").read_text())
    (exp / "metrics.json").write_text(
        json.dumps({**metrics, "steps": None, "train_seconds": None, "source": "scene.ply"})
    )
    page = read_page(write_report(exp))
    summary = {r[0].text: r[1].text for r in page.tables["summary-table"]}
    assert summary["model"] == "scene.ply (rendered by render.py --ply, not trained here)"
    assert "steps" not in summary and "training time" not in summary
    assert len(page.images) == 6 and "training" not in {r[0].text for r in page.tables["phase-table"]}
    assert set(page.missing) == {"curves", "config"}


def test_damaged_files_become_sentences(tmp_path):
    exp, _ = make_run(tmp_path, views={"a": SMALL, "b": SMALL, "c": (20, 20)})
    (exp / "metrics.json").write_text('{"mean": ')
    (exp / "config.yaml").write_text("trainer: [unclosed\n")
    (exp / "renders" / "test" / "render" / "a.png").write_bytes(b"not a png")
    (exp / "renders" / "test" / "gt" / "b.png").unlink()
    from PIL import Image

    Image.new("RGB", (40, 30)).save(exp / "renders" / "test" / "gt" / "c.png")  # render 20x20, gt 40x30
    page = read_page(write_report(exp))
    assert page.missing["summary"][0].startswith("metrics.json could not be read (")
    assert page.missing["config"][0].startswith("config.yaml is not valid YAML (")
    views = page.missing["views"]
    assert len(views) == 3 and views[0].startswith("a: render: ") and "cannot decode image" in views[0]
    assert views[1] == "b: no ground truth image (gt/b.png is missing)."
    assert views[2] == "c: render 20x20 and ground truth 40x30 differ in size: no error map."
    assert sorted((i["view"], i["data-kind"]) for i in page.images) == [
        ("a", "gt"),
        ("b", "render"),
        ("c", "gt"),
        ("c", "render"),
    ]
    assert page.polylines  # the log is still read


def test_bad_arguments_are_one_line_errors(tmp_path):
    with pytest.raises(DataError, match=r"^\S*nowhere: no such folder"):
        write_report(tmp_path / "nowhere")
    with pytest.raises(Exception, match="max_side and max_views must be >= 1"):
        write_report(tmp_path, max_side=0)


def test_the_log_is_the_file_the_config_names(tmp_path):
    config = {"name": "x", "writers": [{"type": "JsonlWriter", "filename": "logs/run.jsonl"}]}
    exp, _ = make_run(tmp_path, views={}, metrics=False, config=config)  # log.jsonl: not the log this run names
    page = read_page(write_report(exp))
    assert page.missing["curves"] == [
        "No curves: logs/run.jsonl is not in this folder (the run's JsonlWriter writes it)."
    ]
    (exp / "logs").mkdir()
    (exp / "log.jsonl").rename(exp / "logs" / "run.jsonl")
    page = read_page(write_report(exp))
    assert "curves" not in page.missing
    assert {line["data-series"] for line in page.polylines} == {"train/loss", "val/psnr", "test/psnr"}
