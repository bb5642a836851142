"""scripts/render.py on a finished demo run: exp dir, PLY + data, orbit video, bad input."""

from __future__ import annotations

import json
import subprocess
import sys

import imageio.v2 as imageio
import numpy as np
import pytest

from pointrix_lite.cli.render import main as render_main

from .conftest import DEMO_DATA, REPO, SCALE


def _same_metrics(a: dict, b: dict, tol: float) -> None:
    assert sorted(a["per_view"]) == sorted(b["per_view"])
    for name, metrics in a["per_view"].items():
        for key, value in metrics.items():
            other = b["per_view"][name][key]
            assert (value is None and other is None) or abs(value - other) <= tol, (name, key, value, other)
    for key, value in a["mean"].items():
        assert (value is None and b["mean"][key] is None) or abs(value - b["mean"][key]) <= tol


def test_exp_dir_rerender_reproduces_training_metrics(trained_run, tmp_path, capsys):
    out = tmp_path / "rerender"
    assert render_main(["--exp-dir", str(trained_run.exp_dir), "--out", str(out)]) == 0
    again = json.loads((out / "metrics.json").read_text())
    _same_metrics(trained_run.metrics, again, 1e-6)
    assert (
        again["steps"] == trained_run.metrics["steps"]
        and again["num_gaussians"] == trained_run.metrics["num_gaussians"]
    )
    for kind in ("render", "gt"):
        for png in (trained_run.exp_dir / "renders" / "test" / kind).glob("*.png"):
            assert np.array_equal(imageio.imread(png), imageio.imread(out / "renders" / "test" / kind / png.name))
    assert f"PSNR {again['mean']['psnr']:.2f} dB" in capsys.readouterr().out


def test_ply_with_data_renders_and_scores(trained_run, tmp_path):
    out = tmp_path / "ply_render"
    ply = trained_run.exp_dir / "point_cloud.ply"
    args = ["--ply", str(ply), "--data", str(DEMO_DATA), "--scale", str(SCALE), "--out", str(out)]
    assert render_main(args) == 0  # dataset type inferred from transforms_train.json
    report = json.loads((out / "metrics.json").read_text())
    # The PLY stores the raw float32 parameters, so the renders are those of the trained model.
    _same_metrics(trained_run.metrics, report, 1e-6)
    assert report["source"] == str(ply) and report["steps"] is None
    assert sorted(p.name for p in (out / "renders" / "test" / "render").glob("*.png")) == sorted(
        f"{n}.png" for n in report["per_view"]
    )


def test_ply_renders_at_the_scale_its_run_trained_at(trained_run, tmp_path):
    """Without --scale, a PLY in an experiment folder is rendered at that run's dataset.scale (SCALE here),
    read from the config.yaml beside it: the same views, so the same metrics as the run's test."""
    out = tmp_path / "ply_default_scale"
    ply = trained_run.exp_dir / "point_cloud.ply"
    assert render_main(["--ply", str(ply), "--data", str(DEMO_DATA), "--out", str(out)]) == 0
    _same_metrics(trained_run.metrics, json.loads((out / "metrics.json").read_text()), 1e-6)
    alone = tmp_path / "alone" / "model.ply"  # no config.yaml beside it: full size unless asked
    alone.parent.mkdir()
    alone.write_bytes(ply.read_bytes())
    for name, extra in (("full", []), ("auto", ["--scale", "auto"])):  # auto: 160x160 fits the CPU's budget
        assert render_main(["--ply", str(alone), "--data", str(DEMO_DATA), "--out", str(tmp_path / name), *extra]) == 0
        assert imageio.imread(next((tmp_path / name / "renders" / "test" / "render").glob("*.png"))).shape[0] == 160


def test_orbit_trajectory_writes_frames_and_video(trained_run, tmp_path):
    out = tmp_path / "orbit"
    args = ["--exp-dir", str(trained_run.exp_dir), "--out", str(out), "--trajectory", "orbit", "--frames", "12"]
    assert render_main(args) == 0
    frames = sorted((out / "trajectory" / "orbit").glob("*.png"))
    assert len(frames) == 12
    images = [imageio.imread(f) for f in frames]
    size = 160 // SCALE
    assert all(im.shape == (size, size, 3) for im in images)
    # The model is in view: frames are not the plain white background, and they differ along the path.
    assert all((im < 200).any(axis=-1).mean() > 0.2 for im in images)
    assert not np.array_equal(images[0], images[6])
    video = out / "trajectory" / "orbit.mp4"
    assert video.stat().st_size > 0
    with imageio.get_reader(video, format="FFMPEG") as reader:  # an independent decoder (ffmpeg)
        decoded = list(reader.iter_data())
    assert len(decoded) == 12 and decoded[0].shape == (size, size, 3)
    # Lossy codec: close to the PNG frame, not equal.
    assert np.abs(decoded[3].astype(float) - images[3].astype(float)).mean() < 12.0


@pytest.mark.parametrize("kind", ["interp", "ellipse", "spiral"])
def test_other_trajectories_render_the_model_in_view(trained_run, tmp_path, kind):
    out = tmp_path / kind
    args = ["--exp-dir", str(trained_run.exp_dir), "--out", str(out), "--trajectory", kind, "--frames", "4"]
    assert render_main([*args, "--video", "gif"]) == 0
    frames = [imageio.imread(f) for f in sorted((out / "trajectory" / kind).glob("*.png"))]
    assert len(frames) == 4 and all((im < 200).any(axis=-1).mean() > 0.05 for im in frames)


def test_a_camera_path_file_renders_its_cameras(trained_run, tmp_path):
    """The test cameras written as a path file render the same pixels as the test split's renders."""
    from pointrix_lite.trajectory import save_path

    out = tmp_path / "path"
    assert render_main(["--exp-dir", str(trained_run.exp_dir), "--out", str(tmp_path / "test")]) == 0
    test_renders = sorted((tmp_path / "test" / "renders" / "test" / "render").glob("*.png"))
    from pointrix_lite.cli.common import open_experiment

    trainer = open_experiment(trained_run.exp_dir, None, tmp_path / "scratch", None)
    save_path([v.camera for v in trainer.dataset.test_views], tmp_path / "path.json")
    args = ["--exp-dir", str(trained_run.exp_dir), "--out", str(out), "--camera-path", str(tmp_path / "path.json")]
    assert render_main([*args, "--video", "gif"]) == 0
    frames = sorted((out / "trajectory" / "path").glob("*.png"))
    assert len(frames) == len(test_renders) > 0
    for frame, ref in zip(frames, test_renders):
        diff = np.abs(imageio.imread(frame).astype(int) - imageio.imread(ref).astype(int))
        assert diff.max() <= 1, (frame, ref)


def test_orbit_gif(trained_run, tmp_path):
    out = tmp_path / "gif"
    args = [
        "--exp-dir",
        str(trained_run.exp_dir),
        "--out",
        str(out),
        "--trajectory",
        "orbit",
        "--frames",
        "3",
        "--video",
        "gif",
    ]
    assert render_main(args) == 0
    frames = imageio.mimread(out / "trajectory" / "orbit.gif")
    assert len(frames) == 3


def test_mp4_without_imageio_ffmpeg_is_one_line_before_any_frame(trained_run, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "imageio_ffmpeg", None)  # import raises ImportError, as when not installed
    out = tmp_path / "orbit"
    code = render_main(
        ["--exp-dir", str(trained_run.exp_dir), "--out", str(out), "--trajectory", "orbit", "--frames", "2"]
    )
    err = capsys.readouterr().err.strip()
    assert (
        code == 2 and err.startswith("error: --video mp4") and "pip install imageio-ffmpeg" in err and "\n" not in err
    )
    assert not (out / "trajectory").exists()


@pytest.mark.parametrize(
    "args, message",
    [
        (["--exp-dir", "/nonexistent/exp"], "no config.yaml"),
        (["--ply", "/nonexistent/a.ply", "--data", str(DEMO_DATA)], "--ply: file not found"),
        (["--ply", "{ply}"], "--ply needs --data"),
        (["--ply", "{ply}", "--data", "{tmp}"], "cannot tell the layout"),
        (["--ply", "{ply}", "--data", str(DEMO_DATA), "--dataset-type", "Nope"], "--dataset-type"),
        (["--ply", "{config}", "--data", str(DEMO_DATA)], "config.yaml"),  # not a PLY file
        (["--exp-dir", "{exp}", "--frames", "0", "--trajectory", "orbit"], "--frames"),
        (["--exp-dir", "{exp}", "--data", str(DEMO_DATA)], "go with --ply"),
        (["--trajectory", "orbit"], "one of the arguments --exp-dir --ply is required"),
        (["--ply", "{ply}", "--data", str(DEMO_DATA), "--scale", "0"], "--scale: must be positive, got 0"),
        (
            ["--ply", "{ply}", "--data", str(DEMO_DATA), "--scale", "half"],
            "--scale: expected a number or auto, got 'half'",
        ),
    ],
)
def test_bad_input_is_one_line_exit_2(trained_run, tmp_path, capsys, args, message):
    subst = {
        "{ply}": str(trained_run.exp_dir / "point_cloud.ply"),
        "{tmp}": str(tmp_path),
        "{exp}": str(trained_run.exp_dir),
        "{config}": str(trained_run.exp_dir / "config.yaml"),
    }
    args = [subst.get(a, a) for a in args]
    try:
        code = render_main(args)
    except SystemExit as exc:  # argparse-level mistakes exit from the parser
        code = exc.code
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert err.startswith("error: ") and "\n" not in err and message in err, err


def test_script_wrapper_runs_as_a_program(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "render.py"), "--exp-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert proc.returncode == 2
    assert (
        proc.stderr.strip().splitlines()[-1]
        == f"error: --exp-dir {tmp_path}: no config.yaml (not an experiment folder written by train.py)"
    )


def test_a_second_render_into_the_same_out_needs_overwrite(trained_run, tmp_path, capsys):
    out = tmp_path / "again"
    args = ["--exp-dir", str(trained_run.exp_dir), "--out", str(out)]
    assert render_main(args) == 0
    first = (out / "metrics.json").read_bytes()
    capsys.readouterr()
    assert render_main(args) == 2
    err = capsys.readouterr().err.strip()
    assert (
        err
        == f"error: --out {out}: already holds metrics.json, renders; pass --overwrite to replace them or choose another folder"
    )
    assert (out / "metrics.json").read_bytes() == first
    assert render_main([*args, "--overwrite"]) == 0
    orbit = [*args, "--trajectory", "orbit", "--frames", "2", "--video", "gif"]
    assert render_main(orbit) == 0  # a path beside the test split is another output
    assert render_main(orbit) == 2 and "trajectory/orbit" in capsys.readouterr().err
