"""``python -m benchmarks gsplat_trainer``: what it asks of gsplat's trainer, what it reads back, and a whole
dry run on the CPU (this project's run real, gsplat's trainer a stand-in that writes its stats files)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from benchmarks import gsplat_trainer

# Writes what gsplat 1.5.3's simple_trainer.py writes under --result_dir (stats/ at the last step), and the
# arguments it was given, so the test can read both.
STAND_IN = """
import json, sys
from pathlib import Path
args = sys.argv[1:]
value = lambda flag: args[args.index(flag) + 1]
steps = int(value("--max_steps"))
stats = Path(value("--result_dir")) / "stats"
stats.mkdir(parents=True, exist_ok=True)
(stats.parent / "argv.json").write_text(json.dumps(args))
(stats.parent / "cwd.txt").write_text(str(Path.cwd()))
last = steps - 1
for step, psnr in ((last // 2, 10.0), (last, 23.5)):
    (stats / f"val_step{step:04d}.json").write_text(json.dumps({"psnr": psnr, "ssim": 0.81, "lpips": 0.2, "ellipse_time": 0.01, "num_GS": 1234}))
    (stats / f"train_step{step:04d}_rank0.json").write_text(json.dumps({"mem": 1.0, "ellipse_time": 4.5 + step, "num_GS": 1234}))
"""


@pytest.fixture
def stand_in(tmp_path: Path) -> Path:
    script = tmp_path / "examples" / "simple_trainer.py"
    script.parent.mkdir()
    script.write_text(STAND_IN)
    return script


def test_the_command_is_gsplats_default_at_full_size_evaluated_at_the_last_step(tmp_path) -> None:
    cmd = gsplat_trainer.gsplat_command(Path("st.py"), Path("/d"), Path("/r"), 7000, ["--packed"])
    assert cmd[0] == sys.executable and cmd[1:3] == ["st.py", "default"]
    flags = dict(zip(cmd[3:-3:2], cmd[4:-3:2]))
    assert flags == {
        "--data_dir": "/d",
        "--data_factor": "1",
        "--result_dir": "/r",
        "--max_steps": "7000",
        "--eval_steps": "7000",
        "--save_steps": "7000",
        "--ply_steps": "7000",
    }
    assert cmd[-3:] == ["--disable_viewer", "--disable_video", "--packed"]


def test_scores_come_from_the_last_steps_files(tmp_path, stand_in) -> None:
    import subprocess

    subprocess.run(
        [sys.executable, str(stand_in), "--max_steps", "120", "--result_dir", str(tmp_path / "r")], check=True
    )
    # step 59 sorts after 119 as text; the number decides
    assert gsplat_trainer.gsplat_scores(tmp_path / "r") == {
        "psnr": 23.5,
        "ssim": 0.81,
        "seconds": 123.5,
        "gaussians": 1234,
    }
    with pytest.raises(SystemExit, match="no val_step"):
        gsplat_trainer.gsplat_scores(tmp_path / "empty")


def test_a_dry_run_trains_ours_and_reads_the_stand_ins_stats(tmp_path, stand_in, capsys) -> None:
    from benchmarks._common import REPO
    from pointrix_lite.data.demo import ensure_demo

    scene = ensure_demo(REPO / "data" / "demo") / "colmap"
    out = tmp_path / "out"
    args = ["--trainer", str(stand_in), "--scene", str(scene), "--steps", "5", "--out", str(out), "--device", "cpu"]
    assert gsplat_trainer.main(args) == 0
    table = capsys.readouterr().out
    row = next(line for line in table.splitlines() if line.startswith("| colmap |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    metrics = json.loads((out / "colmap" / "ours" / "metrics.json").read_text())
    assert metrics["steps"] == 5
    assert cells[:2] == ["colmap", "5"] and float(cells[2]) == round(metrics["mean"]["psnr"], 2)
    assert float(cells[4]) == round(metrics["train_seconds"], 1)
    assert cells[6:] == ["23.5", "0.81", "8.5", "1234"]
    argv = json.loads((out / "colmap" / "gsplat" / "argv.json").read_text())
    assert argv[argv.index("--data_dir") + 1] == str(scene.resolve())
    assert (out / "colmap" / "gsplat" / "cwd.txt").read_text() == str(stand_in.parent)


def test_bad_arguments_stop_in_one_line(tmp_path, stand_in) -> None:
    with pytest.raises(SystemExit, match="--trainer: no file"):
        gsplat_trainer.main(["--trainer", str(tmp_path / "none.py"), "--scene", str(tmp_path)])
    with pytest.raises(SystemExit, match="no images/ folder"):
        gsplat_trainer.main(["--trainer", str(stand_in), "--scene", str(tmp_path)])
