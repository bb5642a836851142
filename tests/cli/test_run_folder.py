"""A second run into the same experiment folder: refused with both commands, continued with --resume, replaced
with --overwrite (nothing of the first run left beside the second); printed commands paste back as the same
arguments; seed and name bounds in one line. Real runs of scripts/train.py on the toy components."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pointrix_lite.cli.train import main as train_main
from tests.engine.engine_helpers import TOY_PLUGIN, toy_raw_config
from tests.report.helpers import read_page

REPO = Path(__file__).resolve().parents[2]


def _config(tmp_path: Path, name: str = "toy") -> Path:
    raw = toy_raw_config(tmp_path)
    raw["name"] = name
    path = tmp_path / "toy.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def train(*args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, str(REPO / "scripts" / "train.py"), *args, "--plugin", str(TOY_PLUGIN)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=REPO)


def test_a_second_run_is_refused_then_resumed_or_replaced(tmp_path):
    config = _config(tmp_path)
    exp = tmp_path / "outputs" / "toy"
    first = train("--config", str(config))
    assert first.returncode == 0, first.stderr
    log_lines = len((exp / "log.jsonl").read_text().splitlines())
    before = {p.name: p.stat().st_mtime_ns for p in exp.rglob("*") if p.is_file()}

    again = train("--config", str(config), "trainer.max_steps=4", "seed=1")
    assert again.returncode == 2
    (line,) = again.stderr.strip().splitlines()
    assert line.startswith(f"error: exp_dir: {exp} holds an earlier run; continue it with: ")
    resume_cmd, overwrite_cmd = line.split("continue it with: ")[1].split("; or replace it with: ")
    assert shlex.split(resume_cmd)[2:] == [
        "--config",
        str(exp / "config.yaml"),
        "--resume",
        "--plugin",
        str(TOY_PLUGIN),
    ]
    assert shlex.split(overwrite_cmd)[-5:] == [
        "trainer.max_steps=4",
        "seed=1",
        "--plugin",
        str(TOY_PLUGIN),
        "--overwrite",
    ]
    # Nothing of the first run was touched.
    assert {p.name: p.stat().st_mtime_ns for p in exp.rglob("*") if p.is_file()} == before

    both = train("--config", str(config), "--resume", "--overwrite")
    assert both.returncode == 2 and "pass one" in both.stderr

    (exp / "notes.txt").write_text("mine")  # a user's file beside the run
    replaced = train("--config", str(config), "trainer.max_steps=4", "seed=1", "--overwrite")
    assert replaced.returncode == 0, replaced.stderr
    assert (exp / "notes.txt").read_text() == "mine"
    assert sorted(p.name for p in (exp / "checkpoints").glob("*.pth")) == ["step_000004.pth"]  # no step_000008/12
    log = [json.loads(line) for line in (exp / "log.jsonl").read_text().splitlines()]
    assert len(log) < log_lines and max(r.get("step", 0) for r in log) <= 4  # a new log, not appended to
    assert yaml.safe_load((exp / "config.yaml").read_text())["seed"] == 1

    resumed = train("--config", str(exp / "config.yaml"), "--resume", "trainer.max_steps=8")
    assert resumed.returncode == 0, resumed.stderr


def test_printed_commands_paste_back_as_the_same_arguments(tmp_path):
    name = "a b>c"
    config = _config(tmp_path, name)
    done = train("--config", str(config), "writers=[{type: TensorboardWriter}]")
    assert done.returncode == 0, done.stderr
    exp = tmp_path / "outputs" / name
    lines = {line.split(None, 1)[0]: line for line in done.stdout.splitlines() if line.startswith("  ")}
    longer = lines["train"].split("train longer", 1)[1].strip()
    assert shlex.split(longer)[1:] == [
        "scripts/train.py",
        "--config",
        str(exp / "config.yaml"),
        "--resume",
        "trainer.max_steps=24",
        "--plugin",
        str(TOY_PLUGIN),
    ]
    tb = lines["tensorboard"].split("tensorboard", 1)[1].strip()
    assert shlex.split(tb) == ["tensorboard", "--logdir", str(exp / "tensorboard")]
    # report.html names the same command where its curves would be (no JsonlWriter, no log to draw)
    (curves,) = read_page(exp / "report.html").missing["curves"]
    shown = curves.split("; ", 1)[1].removesuffix(" shows the curves.")
    assert shlex.split(shown) == ["tensorboard", "--logdir", str(exp / "tensorboard")]


def test_seed_and_name_out_of_bounds_are_one_line(tmp_path):
    config = _config(tmp_path)
    for override, message in (
        ("seed=-1", "seed: must be in 0 .. 2**32 - 1, got -1"),
        (f"seed={2**32}", f"seed: must be in 0 .. 2**32 - 1, got {2**32}"),
        ("name=" + "n" * 300, "name: is 300 bytes; a folder name takes at most 255"),
    ):
        proc = train("--config", str(config), override)
        assert proc.returncode == 2 and proc.stderr.strip() == f"error: {message}", proc.stderr


def test_what_counts_as_a_run_and_what_overwrite_may_remove(tmp_path):
    from pointrix_lite.engine.run_folder import RUN_OUTPUTS, SETUP_FILES, clear_run, earlier_run
    from pointrix_lite.errors import ConfigError

    exp = tmp_path / "exp"
    exp.mkdir()
    for name in ("config.yaml", "log.jsonl", "notes.txt"):
        (exp / name).write_text("x")
    assert earlier_run(exp) == []  # a run that stopped in its set-up: nothing to keep or resume
    clear_run(exp, SETUP_FILES)
    assert sorted(p.name for p in exp.iterdir()) == ["notes.txt"]
    (exp / "checkpoints").mkdir()
    (exp / "checkpoints" / "step_000010.pth").write_bytes(b"x")
    assert earlier_run(exp) == [exp / "checkpoints" / "step_000010.pth"]  # even without latest.txt
    (exp / "sparse").mkdir()  # exp_dir pointed at a data set: its images/ are photos, never a writer's
    with pytest.raises(ConfigError, match="holds a data set"):
        clear_run(exp, RUN_OUTPUTS)
    assert (exp / "checkpoints" / "step_000010.pth").exists()


def _train_here(capsys, config: Path, *args: str) -> tuple[int, str]:
    """scripts/train.py in this process (a run of the toy model takes a second, its start-up five more)."""
    code = train_main(["--config", str(config), *args, "--plugin", str(TOY_PLUGIN)])
    return code, capsys.readouterr().err


def test_overwrite_clears_the_logs_images_and_tensorboard_under_the_names_the_config_gives_them(tmp_path, capsys):
    raw = toy_raw_config(tmp_path)
    raw["writers"] = [
        {"type": "JsonlWriter", "filename": "logs/run.jsonl", "image_dir": "pngs"},
        {"type": "TensorboardWriter", "subdir": "tb"},
    ]
    config = tmp_path / "toy.yaml"
    config.write_text(yaml.safe_dump(raw))
    exp = tmp_path / "outputs" / "toy"
    assert _train_here(capsys, config)[0] == 0
    (exp / "logs" / "notes.txt").write_text("mine")  # a user's file beside the custom log

    assert _train_here(capsys, config, "trainer.max_steps=4", "--overwrite")[0] == 0
    log = [json.loads(line) for line in (exp / "logs" / "run.jsonl").read_text().splitlines()]
    assert max(r.get("step", 0) for r in log) == 4  # a new log, not the 12-step one appended to
    assert [p.name for p in (exp / "pngs").iterdir()] == ["test_test_000_000004.png"]  # no step-6/12 images
    assert len(list((exp / "tb").iterdir())) == 1  # one event file: TensorBoard would draw both runs
    assert (exp / "logs" / "notes.txt").read_text() == "mine"


def test_load_ckpt_before_run_starts_a_new_run_from_elsewhere_and_continues_one_in_place(tmp_path, capsys):
    config = _config(tmp_path)
    exp, src = tmp_path / "outputs" / "toy", tmp_path / "outputs" / "src"
    assert _train_here(capsys, config, "name=src", "trainer.max_steps=8")[0] == 0
    start = f"load_ckpt_before_run={src / 'checkpoints' / 'step_000008.pth'}"

    # A checkpoint of another folder: a new run, with its own config.yaml (render.py and --resume read it).
    assert _train_here(capsys, config, start)[0] == 0
    assert yaml.safe_load((exp / "config.yaml").read_text())["trainer"]["max_steps"] == 12
    assert sorted(p.name for p in (exp / "checkpoints").glob("*.pth")) == ["step_000012.pth"]

    # One of exp_dir's own checkpoints: that run continues (as --resume would), nothing is refused.
    own = f"load_ckpt_before_run={exp / 'checkpoints' / 'step_000012.pth'}"
    assert _train_here(capsys, config, own, "trainer.max_steps=16")[0] == 0
    assert (exp / "checkpoints" / "step_000016.pth").is_file()
    code, err = _train_here(capsys, config, own, "trainer.max_steps=20", "--overwrite")
    assert code == 2 and err.startswith(f"error: load_ckpt_before_run: {exp} holds the checkpoint it names")
    assert (exp / "checkpoints" / "step_000012.pth").is_file()

    # From elsewhere again with --overwrite: the folder's earlier checkpoints go.
    assert _train_here(capsys, config, start, "--overwrite")[0] == 0
    assert sorted(p.name for p in (exp / "checkpoints").glob("*.pth")) == ["step_000012.pth"]
    assert yaml.safe_load((exp / "config.yaml").read_text())["load_ckpt_before_run"].endswith("step_000008.pth")
