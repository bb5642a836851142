"""``python -m benchmarks suite_judge``: the runs the suite kept, read from the folders the suite keeps them in,
side by side, with the issue's rule (mean improves, no scene loses over 0.2 dB, a difference under 0.3 dB only
over two seeds) deciding; recorded rows re-read from the stored table. Trains nothing."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from benchmarks import results, suite, suite_judge


def keep(out: Path, scene: str, folder: str, psnr: float, version: str | None = "0.1.0 (abc1234)") -> None:
    """A row as ``python -m benchmarks suite`` keeps it, under ``out``/work/SCENE/FOLDER."""
    scores = {"psnr": psnr, "ssim": 0.7, "lpips": None}
    row = {"scene": scene, "unaligned": scores, "aligned": scores, "train_seconds": 100.0, "machine": "CPU X"}
    path = out / "work" / scene / folder
    path.mkdir(parents=True)
    (path / "row.json").write_text(json.dumps(row | ({"version": version} if version else {})))


def test_the_rule_decides_per_scene_and_for_the_suite() -> None:
    assert suite_judge.judge_scene([20.0, 20.0], [19.7, 19.8])[1] == "worse by over 0.2 dB"
    assert suite_judge.judge_scene([20.0, 20.0], [19.9, 19.9])[1] == "holds"  # -0.1 over two seeds
    assert suite_judge.judge_scene([20.0], [19.9])[1] == "needs a second seed"
    assert suite_judge.judge_scene([20.0], [19.75])[1] == "needs a second seed"  # under 0.3 dB: not yet a loss
    assert suite_judge.judge_scene([20.0], [19.6])[1] == "worse by over 0.2 dB"
    assert suite_judge.judge_scene([20.0], [20.5])[1] == "holds"  # 0.5 dB: one seed says enough
    diff, _ = suite_judge.judge_scene([20.0, 21.0], [21.0, 21.5])
    assert diff == pytest.approx(0.75)
    assert suite_judge.verdict(["holds", "holds"], 0.1) == "ships"
    assert suite_judge.verdict(["holds"], 0.0) == "does not ship: the mean does not improve"
    said = suite_judge.verdict(["needs a second seed", "worse by over 0.2 dB", "holds"], 0.4)
    assert said == "does not ship: worse by over 0.2 dB; needs a second seed"


def test_each_side_is_read_where_the_suite_kept_it_and_recorded(tmp_path: Path, monkeypatch) -> None:
    """Seed N > 0 is the run with ``seed=N`` first among the overrides; a scene losing 0.3 dB stops the change
    although the mean improves; the stored rows name both sides' code, never this checkout's for a row
    that does not name its own."""
    for folder, psnrs in {"default": (20.0, 15.0), "default_seed=1": (21.0, 16.0)}.items():
        keep(tmp_path, "sceaux", folder, psnrs[0])
        keep(tmp_path, "monstree", folder, psnrs[1], version=None)
    for folder, psnrs in {"default_x.y=1": (19.8, 16.0), "default_seed=1_x.y=1": (20.6, 17.0)}.items():
        keep(tmp_path, "sceaux", folder, psnrs[0], version="0.1.0 (def5678)")
        keep(tmp_path, "monstree", folder, psnrs[1], version="0.1.0 (def5678)")
    store = tmp_path / "store"
    real = results.record
    monkeypatch.setattr(results, "record", lambda *a, **kw: real(*a, **kw, store=store))
    monkeypatch.setattr(results, "version", lambda: "0.1.0 (head000)")
    argv = ["--out", str(tmp_path), "--change", "x.y=1", "--scenes", "sceaux,monstree", "--seeds", "0,1", "--record"]
    assert suite_judge.main(argv) == 0
    stored = json.loads((store / "capture_suite_judged.json").read_text())
    rows = {r["cells"]["scene"]: r for r in stored["rows"]}
    sceaux, monstree, mean = rows["sceaux"], rows["monstree"], rows["mean of 2"]
    assert sceaux["cells"]["change"] == "shipped -> x.y=1"
    assert (sceaux["cells"]["base PSNR"], sceaux["cells"]["changed PSNR"]) == ("20.00 / 21.00", "19.80 / 20.60")
    assert (sceaux["cells"]["per seed"], sceaux["cells"]["dB"]) == ("-0.20 / -0.40", "-0.30")
    assert sceaux["cells"]["verdict"] == "worse by over 0.2 dB"
    assert (monstree["cells"]["dB"], monstree["cells"]["verdict"]) == ("+1.00", "holds")
    assert (mean["cells"]["dB"], mean["cells"]["verdict"]) == ("+0.35", "does not ship: worse by over 0.2 dB")
    assert [r["cells"]["scene"] for r in stored["rows"]][-1] == "mean of 2"  # printed after its scenes
    assert sceaux["version"] == "0.1.0 (def5678)" and sceaux["cells"]["base version"] == "0.1.0 (abc1234)"
    assert monstree["cells"]["base version"] == "unknown" and mean["machine"] == "CPU X"
    assert "--record" not in sceaux["command"] and "suite_judge" in sceaux["command"]
    page = results.render_page(store)
    assert "## Real-capture suite: recipe changes judged" in page
    assert "| shipped -> x.y=1 | mean of 2 |  | 18.00 |  | 18.35 |  | +0.35 |" in page


def test_a_missing_run_names_the_suite_command_that_keeps_it(tmp_path: Path) -> None:
    """The command in the message, run, keeps its row in the folder the judge reads (seed=N before the
    other overrides, the options before both)."""
    keep(tmp_path, "sceaux", "default", 20.0)
    keep(tmp_path, "sceaux", "default_seed=1", 20.0)
    keep(tmp_path, "sceaux", "default_--principal-point_refine_x.y=1", 20.0)
    change = "--process-args '--principal-point refine' x.y=1"
    with pytest.raises(SystemExit) as err:
        suite_judge.main(["--out", str(tmp_path), "--change", change, "--scenes", "sceaux", "--seeds", "0,1"])
    message = str(err.value)
    wanted = tmp_path / "work" / "sceaux" / "default_--principal-point_refine_seed=1_x.y=1" / "row.json"
    assert message.startswith(f"error: no kept row {wanted}: run python -m benchmarks suite ")
    command = shlex.split(message.split(": run ", 1)[1].removesuffix(" first"))
    args = suite.arguments().parse_args(command[4:])
    assert args.out / "work" / "sceaux" / suite.run_tag(args, ceiling=False) / "row.json" == wanted


def test_an_against_side_and_one_on_its_own_sfm_are_read_and_said_so(tmp_path: Path, capsys) -> None:
    """An ``--against`` folder's runs are kept under OUT/<its folder name>; with ``--shared-sfm`` both sides
    train on one SfM output, without it the change's name says each had its own."""
    tree = tmp_path / "old_tree"
    (tree / "pointrix_lite").mkdir(parents=True)
    out = tmp_path / "out"
    for folder in ("default_shared-sfm", "default"):
        path = out / "old_tree" / "sceaux" / folder
        path.mkdir(parents=True)
        (path / "row.json").write_text(json.dumps({"unaligned": {"psnr": 19.0}}))
    keep(out, "sceaux", "default", 20.0)
    argv = ["--out", str(out), "--change", "", "--scenes", "sceaux", "--seeds", "0"]
    assert suite_judge.main([*argv, "--base", f"--against {tree} --shared-sfm"]) == 0
    said = capsys.readouterr().out
    assert said.startswith(f"--against {tree} --shared-sfm -> shipped, seeds 0:")
    assert "| sceaux | 19.00 | 19.00 | 20.00 | 20.00 | +1.00 | +1.00 | holds |" in said
    assert suite_judge.main([*argv, "--base", f"--against {tree}"]) == 0
    assert capsys.readouterr().out.startswith(f"--against {tree} -> shipped (each on its own SfM output), seeds 0:")
    base = suite_judge.side("--base", f"--against {tree}", out)
    assert base.version({}) == "unknown"  # a folder names no commit; never this checkout's version


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--seeds", "0,one"], "--seeds: comma-separated integers"),
        (["--seeds", "1,1"], "--seeds: distinct seeds"),
        (["--scenes", "nowhere"], "--scenes: unknown nowhere"),
        (["--change=--ceiling"], "--change: '--ceiling': a ceiling is not a recipe"),
        (["--change", "seed=3 x.y=1"], "seeds are --seeds, not an override"),
        (["--change", "--process-args '--principal"], "--change: .*No closing quotation"),
        (["--change", "--bogus 1"], "--change: unrecognized arguments: --bogus "),
        (["--change=--help"], "--change: suite options only, not --help"),
        (["--change", " "], "name the same runs"),
    ],
)
def test_bad_input_is_one_line_naming_the_option(tmp_path: Path, argv: list[str], message: str) -> None:
    keep(tmp_path, "sceaux", "default", 20.0)
    with pytest.raises(SystemExit, match=message) as err:
        suite_judge.main(["--out", str(tmp_path), "--change", "x.y=1", "--scenes", "sceaux", *argv])
    assert "\n" not in str(err.value)


def test_a_kept_row_without_scores_is_named(tmp_path: Path) -> None:
    keep(tmp_path, "sceaux", "default", 20.0)
    path = tmp_path / "work" / "sceaux" / "default_x.y=1"
    path.mkdir(parents=True)
    (path / "row.json").write_text(json.dumps({"unaligned": {"psnr": None}}))
    argv = ["--out", str(tmp_path), "--change", "x.y=1", "--scenes", "sceaux", "--seeds", "0"]
    with pytest.raises(SystemExit, match=f"error: {path / 'row.json'}: no test PSNR"):
        suite_judge.main(argv)
    (path / "row.json").write_text("{not json")
    with pytest.raises(SystemExit, match="not a suite row"):
        suite_judge.main(argv)
