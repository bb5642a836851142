"""Writers: files re-read by independent readers (TensorBoard EventAccumulator, json, imageio)."""

from __future__ import annotations

import io
import json

import imageio.v3 as iio
import numpy as np
import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from pointrix_lite.registry import WRITERS
from pointrix_lite.writers import JsonlWriter, Writer, WriterGroup, image_to_uint8
from tests.engine.engine_helpers import make_trainer


def _image() -> np.ndarray:
    rng = np.random.default_rng(0)
    return rng.integers(0, 256, size=(6, 5, 3), dtype=np.uint8)


def _events(log_dir) -> EventAccumulator:
    acc = EventAccumulator(str(log_dir), size_guidance={"scalars": 0, "images": 0, "tensors": 0})
    acc.Reload()
    return acc


def test_image_to_uint8_rounds_and_clips():
    img = torch.tensor([[[0.0, 0.5, 1.0], [1.2, -0.1, 0.998]]])
    assert image_to_uint8(img).tolist() == [[[0, 128, 255], [255, 0, 254]]]
    u8 = _image()
    assert image_to_uint8(u8) is not None and np.array_equal(image_to_uint8(u8), u8)
    with pytest.raises(ValueError, match="HxWx3"):
        image_to_uint8(np.zeros((3, 4)))


def test_tensorboard_writer_read_back(tmp_path):
    w = WRITERS.build({"type": "TensorboardWriter"}, "writers[0]", exp_dir=tmp_path)
    for step, value in [(1, 0.5), (2, 0.25), (5, 0.125)]:
        w.write_scalar("train/loss", value, step)
    img = _image()
    w.write_image("val/view", img, 5)
    w.write_image("val/float", img.astype(np.float32) / 255, 6)
    w.write_config({"name": "toy", "trainer": {"max_steps": 3}})
    w.close()
    acc = _events(tmp_path / "tensorboard")
    assert [(e.step, e.value) for e in acc.Scalars("train/loss")] == [(1, 0.5), (2, 0.25), (5, 0.125)]
    for tag, step in (("val/view", 5), ("val/float", 6)):
        (event,) = acc.Images(tag)
        assert event.step == step
        assert np.array_equal(iio.imread(io.BytesIO(event.encoded_image_string)), img)
    text = acc.Tensors("config/text_summary")[0].tensor_proto.string_val[0].decode()
    assert "max_steps: 3" in text


def test_jsonl_writer_read_back(tmp_path):
    w = JsonlWriter(JsonlWriter.Config(), exp_dir=tmp_path)
    w.write_config({"name": "toy"})
    w.write_scalar("train/loss", 0.5, 3)
    w.write_scalar("train/bad", float("nan"), 3)
    w.write_image("val/a b", _image(), 4)
    w.close()
    records = [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert records[0] == {"kind": "config", "config": {"name": "toy"}}
    assert {k: records[1][k] for k in ("kind", "step", "name", "value")} == {
        "kind": "scalar",
        "step": 3,
        "name": "train/loss",
        "value": 0.5,
    }
    assert records[2]["value"] is None  # NaN is not JSON; written as null
    assert records[3]["kind"] == "image" and records[3]["step"] == 4
    assert np.array_equal(iio.imread(tmp_path / records[3]["path"]), _image())


def test_jsonl_image_names_that_meet_once_made_safe_keep_their_own_files(tmp_path):
    w = JsonlWriter(JsonlWriter.Config(), exp_dir=tmp_path)
    for i, name in enumerate(["val/a b", "val/a?b", "val/a_b"]):
        w.write_image(name, np.full((5, 6, 3), 40 * i, np.uint8), 4)
    w.close()
    paths = [json.loads(line)["path"] for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert paths[2] == "images/val_a_b_000004.png" and len(set(paths)) == 3
    for i, path in enumerate(paths):
        assert np.all(iio.imread(tmp_path / path) == 40 * i)  # each image its own file, none overwritten


def test_console_writer_groups_a_step_per_line(capsys):
    w = WRITERS.build({"type": "ConsoleWriter", "precision": 3}, "writers[0]", exp_dir=".")
    w.write_scalar("train/loss", 0.123456, 3)
    w.write_scalar("train/l1", 2.0, 3)
    w.write_scalar("train/loss", 0.1, 4)
    w.write_image("val/[x]", _image(), 4)
    w.close()
    lines = [line for line in capsys.readouterr().out.splitlines() if line.strip()]
    assert lines[0] == "step 3 train/loss=0.123  train/l1=2"
    assert lines[1] == "step 4 image val/[x] (5x6)"
    assert lines[2] == "step 4 train/loss=0.1"


def test_writer_group_fans_out_and_closes_all(tmp_path):
    a = JsonlWriter(JsonlWriter.Config(filename="a.jsonl"), exp_dir=tmp_path)
    b = JsonlWriter(JsonlWriter.Config(filename="b.jsonl", save_images=False), exp_dir=tmp_path)

    class Broken(Writer):
        def close(self):
            raise RuntimeError("broken close")

    group = WriterGroup([Broken(), a, b])
    group.write_scalars({"psnr": torch.tensor(20.0), "lpips": None}, 7, prefix="val/")
    with pytest.raises(RuntimeError, match="broken close"):
        group.close()
    for name in ("a.jsonl", "b.jsonl"):
        (rec,) = [json.loads(x) for x in (tmp_path / name).read_text().splitlines()]
        assert (rec["name"], rec["value"], rec["step"]) == ("val/psnr", 20.0, 7)


def test_trainer_writes_losses_metrics_and_images_to_all_writers(toy_config):
    cfg = toy_config({"writers": [{"type": "TensorboardWriter"}, {"type": "JsonlWriter"}]})
    trainer = make_trainer(cfg)
    trainer.run()
    acc = _events(trainer.exp_dir / "tensorboard")
    records = [json.loads(x) for x in (trainer.exp_dir / "log.jsonl").read_text().splitlines()]
    tb_loss = [(e.step, e.value) for e in acc.Scalars("train/loss")]
    jl_loss = [(r["step"], r["value"]) for r in records if r.get("name") == "train/loss"]
    assert [s for s, _ in tb_loss] == [4, 8, 12]  # LogHook interval 4
    assert tb_loss == [(s, pytest.approx(v, rel=1e-6)) for s, v in jl_loss]
    assert {"train/l2", "train/num_gaussians", "train/lr_means", "time/iter", "time/data"} <= set(acc.Tags()["scalars"])
    assert [e.step for e in acc.Scalars("val/psnr")] == [6, 12]
    assert "val/lpips" not in acc.Tags()["scalars"]  # None metrics are not written as numbers
    metrics = json.loads((trainer.exp_dir / "metrics.json").read_text())
    assert acc.Scalars("test/psnr")[0].value == pytest.approx(metrics["mean"]["psnr"], rel=1e-6)
    (img,) = acc.Images("test/test_000")
    assert (img.width, img.height) == (16, 8)  # gt | render side by side
    assert records[0]["kind"] == "config" and records[0]["config"]["trainer"]["max_steps"] == 12
