"""process.py: bad inputs (one line, exit 2), the zlib import order, frame selection, downscaling."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import imageio.v3 as iio
import numpy as np
import pytest

from pointrix_lite.cli import process as cli
from pointrix_lite.errors import DataError
from pointrix_lite.process import sfm
from pointrix_lite.process.downscale import write_downscaled
from pointrix_lite.process.inputs import scan_images
from pointrix_lite.process.report import registration_verdict

REPO = Path(__file__).resolve().parents[2]


def _png(path: Path, seed: int, size: tuple[int, int] = (48, 64)) -> None:
    rng = np.random.default_rng(seed)
    iio.imwrite(path, rng.integers(0, 256, (*size, 3), dtype=np.uint8))


def _photos(folder: Path, n: int, bad: int = 0) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        _png(folder / f"p{i:02d}.png", i)
    for i in range(bad):
        (folder / f"broken{i}.jpg").write_bytes(b"\xff\xd8\xff\xe0 not really a jpeg")
    return folder


def _run(argv: list[str], capsys) -> tuple[int, str]:
    code = cli.main(argv)
    return code, capsys.readouterr().err


# --- the zlib / pycolmap import order ---------------------------------------------------------------

PNG_WRITE = "import numpy as np; from PIL import Image; Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save({!r})"


def test_import_pycolmap_keeps_later_png_writes_alive(tmp_path):
    ok = tmp_path / "ok.png"
    code = f"from pointrix_lite.process.colmap_import import import_pycolmap; import_pycolmap(); {PNG_WRITE.format(str(ok))}"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-1000:]
    assert iio.imread(ok).shape == (8, 8, 3)
    # The trap the helper avoids: with this project's Pillow and pycolmap wheels the bare import order
    # aborts the process in free(); other builds (a GPU machine's image, 2026-11-25) write the PNG fine.
    bare = f"import pycolmap; {PNG_WRITE.format(str(tmp_path / 'bad.png'))}"
    proc = subprocess.run([sys.executable, "-c", bare], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0 or "free()" in proc.stderr, proc.stderr[-1000:]


# --- bad input: one line, exit code 2 ---------------------------------------------------------------


def test_missing_empty_and_too_small_image_folders(tmp_path, capsys):
    code, err = _run(["--images", str(tmp_path / "nope"), "--out", str(tmp_path / "o")], capsys)
    assert code == 2 and err.strip() == f"error: --images {tmp_path / 'nope'}: not a folder"
    (tmp_path / "empty").mkdir()
    code, err = _run(["--images", str(tmp_path / "empty"), "--out", str(tmp_path / "o")], capsys)
    assert code == 2 and "no image files" in err and err.count("\n") == 1
    code, err = _run(["--images", str(_photos(tmp_path / "two", 2, bad=3)), "--out", str(tmp_path / "o")], capsys)
    assert code == 2 and "2 readable image(s) (3 unreadable skipped" in err and "at least 3" in err
    assert not (tmp_path / "o").exists()  # nothing written for a rejected input


def test_unreadable_files_are_skipped_and_counted(tmp_path):
    images = scan_images(_photos(tmp_path / "p", 4, bad=2))
    assert images.names == [f"p{i:02d}.png" for i in range(4)]
    assert [name for name, _ in images.skipped] == ["broken0.jpg", "broken1.jpg"]
    assert images.size == (64, 48)


def test_existing_output_is_not_overwritten_without_flag(tmp_path, capsys):
    photos = _photos(tmp_path / "p", 3)
    out = tmp_path / "out"
    (out / "sparse" / "0").mkdir(parents=True)
    (out / "sparse" / "0" / "keep.txt").write_text("mine")
    (out / "notes.txt").write_text("also mine")
    code, err = _run(["--images", str(photos), "--out", str(out)], capsys)
    assert code == 2 and "already holds sparse" in err and "--overwrite" in err
    assert (out / "sparse" / "0" / "keep.txt").read_text() == "mine"
    # --overwrite removes only what process.py writes (checked before the worker starts).
    opts = cli.to_options(cli.build_parser().parse_args(["--images", str(photos), "--out", str(out), "--overwrite"]))
    cli.check_inputs(opts)
    assert not (out / "sparse").exists() and (out / "notes.txt").read_text() == "also mine"


def test_video_and_option_errors(tmp_path, capsys):
    code, err = _run(["--video", str(tmp_path / "v.mp4"), "--out", str(tmp_path / "o")], capsys)
    assert code == 2 and "v.mp4: file not found" in err
    photos = _photos(tmp_path / "p", 3)
    code, err = _run(["--images", str(photos), "--out", str(tmp_path / "o"), "--matcher", "vocab_tree"], capsys)
    assert code == 2 and "needs --vocab-tree FILE" in err
    code, err = _run(
        ["--images", str(photos), "--out", str(tmp_path / "o"), "--vocab-tree", str(tmp_path / "t.bin")], capsys
    )
    assert code == 2 and "t.bin: file not found" in err
    code, err = _run(["--images", str(photos), "--out", str(tmp_path / "o"), "--num-frames", "1"], capsys)
    assert code == 2 and "--num-frames: must be >= 3" in err
    code, err = _run(["--images", str(photos), "--out", str(tmp_path / "o"), "--retrieval-neighbors", "0"], capsys)
    assert code == 2 and "--retrieval-neighbors: must be >= 1, got 0" in err


def test_video_without_frames_and_not_a_video(tmp_path):
    from pointrix_lite.process.video import select_frames

    fake = tmp_path / "fake.mp4"
    fake.write_bytes(b"\x00" * 1000)
    with pytest.raises(DataError, match="fake.mp4"):
        select_frames(fake, tmp_path / "f", 5, sharp=True)
    assert not (tmp_path / "f").exists()


def test_video_without_imageio_ffmpeg_is_a_config_error(tmp_path, monkeypatch):
    from pointrix_lite.errors import ConfigError
    from pointrix_lite.process.video import select_frames

    monkeypatch.setitem(sys.modules, "imageio_ffmpeg", None)  # import raises ImportError, as when not installed
    video = tmp_path / "clip.mp4"
    video.write_bytes(b"\x00" * 1000)
    with pytest.raises(ConfigError, match=r"^--video needs the imageio-ffmpeg package: pip install imageio-ffmpeg$"):
        select_frames(video, tmp_path / "f", 5, sharp=True)
    assert not (tmp_path / "f").exists()


def test_no_overlapping_pairs_is_one_line(tmp_path):
    """Unrelated noise photos: features, but no pair survives verification (the real worker runs)."""
    photos = _photos(tmp_path / "noise", 3)
    out = tmp_path / "out"
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO / "scripts" / "process.py"),
            "--images",
            str(photos),
            "--out",
            str(out),
            "--threads",
            "1",
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2, proc.stdout[-1500:] + proc.stderr[-1500:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ")
    assert "no overlapping image pairs: 3 pair(s) matched but none passed geometric verification" in lines[0]
    assert (out / "colmap" / "colmap.log").stat().st_size > 0  # COLMAP's log went to the file


def _rec(names: list[str]) -> SimpleNamespace:
    images = {i: SimpleNamespace(name=n) for i, n in enumerate(names)}
    return SimpleNamespace(
        num_reg_images=lambda: len(names), reg_image_ids=lambda: list(images), image=images.__getitem__
    )


def test_pick_model_takes_the_largest_and_names_the_rest():
    names = [f"im{i}.png" for i in range(6)]
    chosen = sfm.pick_model({0: _rec(names[:2]), 1: _rec(names[2:5])}, names, 3)
    assert chosen.index == 1 and chosen.registered == names[2:5]
    assert chosen.unregistered == ["im0.png", "im1.png", "im5.png"] and chosen.dropped == [(0, 2)]
    with pytest.raises(DataError, match=r"registered only 2 of 6 images \(need 3\); not registered: im2.png"):
        sfm.pick_model({0: _rec(names[:2])}, names, 3)
    with pytest.raises(DataError, match="registered no images out of 6"):
        sfm.pick_model({}, names, 3)


def test_suspicious_intrinsics_suggest_another_model():
    def rec(fx, fy):
        cam = SimpleNamespace(camera_id=1, focal_length_x=fx, focal_length_y=fy, width=400, height=300)
        return SimpleNamespace(cameras={1: cam})

    assert sfm.check_intrinsics(rec(380.0, 382.0), "OPENCV") == [(380.0, 382.0)]
    with pytest.raises(DataError, match="fx/fy = 2.00.*--camera-model SIMPLE_RADIAL"):
        sfm.check_intrinsics(rec(800.0, 400.0), "OPENCV")
    with pytest.raises(DataError, match="focal length 20.0 px"):
        sfm.check_intrinsics(rec(20.0, 20.0), "SIMPLE_RADIAL")


def test_worker_abort_is_reported_with_its_stage(tmp_path, capsys, monkeypatch):
    photos, out = _photos(tmp_path / "p", 3), tmp_path / "out"

    class AbortingWorker:
        def __init__(self, args, env):
            assert args[3] == cli.WORKER_FLAG
            (out / "colmap").mkdir(parents=True)
            (out / "colmap" / "stage.txt").write_text("matching\n")

        def wait(self):
            return -6  # SIGABRT, as a C++ abort inside pycolmap ends the worker

    monkeypatch.setattr(cli.subprocess, "Popen", AbortingWorker)
    code, err = _run(["--images", str(photos), "--out", str(out)], capsys)
    assert code == 1
    assert err.strip() == (
        f"error: pycolmap stopped the process (SIGABRT) during stage 'matching'; COLMAP's log: "
        f"{out / 'colmap' / 'colmap.log'}; files written before it are kept"
    )


def test_registration_wording_follows_nerfstudio():
    assert registration_verdict(3, 10)[1].startswith("COLMAP only found poses for 30.00% of the images. This is low.")
    assert registration_verdict(6, 10)[1].startswith("Warning: COLMAP only found poses for 60.00%")
    assert registration_verdict(9, 10) == ("bold green", "COLMAP found poses for 90.00% of the images.")


# --- downscaled folders -----------------------------------------------------------------------------


def test_downscaled_folders_are_block_means_with_rounded_sizes(tmp_path):
    (tmp_path / "images").mkdir()
    img = np.random.default_rng(0).integers(0, 256, (12, 20, 3), dtype=np.uint8)
    iio.imwrite(tmp_path / "images" / "a.png", img)
    folders = write_downscaled(tmp_path, 2)
    assert [f.name for f in folders] == ["images_2", "images_4"]
    half = iio.imread(tmp_path / "images_2" / "a.png")
    quarter = iio.imread(tmp_path / "images_4" / "a.png")
    assert half.shape == (6, 10, 3) and quarter.shape == (3, 5, 3)
    expected = img.astype(np.float64).reshape(6, 2, 10, 2, 3).mean(axis=(1, 3))
    assert np.abs(half - expected).max() <= 0.5 + 1e-4
    expected4 = img.astype(np.float64).reshape(3, 4, 5, 4, 3).mean(axis=(1, 3))
    assert np.abs(quarter - expected4).max() <= 0.5 + 1e-4


# --- video frame selection --------------------------------------------------------------------------


def test_sharp_frames_are_chosen_from_blurred_duplicates(tmp_path):
    """6 windows of 5 frames: one sharp frame per window (never the middle one), 4 blurred copies."""
    import imageio_ffmpeg

    from pointrix_lite.process.video import select_frames, sharpness

    rng = np.random.default_rng(0)
    h, w, per = 64, 64, 5
    sharp_at = [0, 1, 3, 4, 0, 4]  # position of the sharp frame inside each window
    originals = []
    video = tmp_path / "clip.mp4"
    writer = imageio_ffmpeg.write_frames(
        str(video),
        (w, h),
        fps=10,
        codec="libx264",
        quality=None,
        output_params=["-qp", "0"],
        pix_fmt_out="yuv444p",
        macro_block_size=1,
    )
    writer.send(None)
    for pos in sharp_at:
        sharp = np.kron(rng.integers(0, 256, (h // 4, w // 4, 3)), np.ones((4, 4, 1))).astype(np.uint8)
        blurred = sharp.astype(np.float64)
        for axis in (0, 1):  # a 9-tap box blur: the same picture, out of focus
            blurred = sum(np.roll(blurred, s, axis=axis) for s in range(-4, 5)) / 9
        blurred = blurred.astype(np.uint8)
        originals.append((sharp, blurred))
        for i in range(per):
            writer.send(np.ascontiguousarray(sharp if i == pos else blurred))
    writer.close()

    names = select_frames(video, tmp_path / "sharp", len(sharp_at), sharp=True)
    assert names == [f"frame_{k:05d}.png" for k in range(len(sharp_at))]
    for k, name in enumerate(names):
        got = iio.imread(tmp_path / "sharp" / name).astype(np.float64)
        sharp, blurred = originals[k]
        assert np.abs(got - sharp).mean() < 0.3 * np.abs(got - blurred).mean(), k
        assert sharpness(got.astype(np.uint8)) > 3 * sharpness(blurred)

    # Without --sharp-frames each window's middle frame (a blurred one here) is taken.
    names = select_frames(video, tmp_path / "middle", len(sharp_at), sharp=False)
    for k, name in enumerate(names):
        got = iio.imread(tmp_path / "middle" / name).astype(np.float64)
        sharp, blurred = originals[k]
        assert np.abs(got - blurred).mean() < np.abs(got - sharp).mean(), k


def test_every_window_gives_its_middle_frame_when_the_count_does_not_divide(tmp_path):
    """120 frames into 100 windows (and 7 frames into 3): one frame per window, its middle one."""
    import imageio_ffmpeg

    from pointrix_lite.process.video import select_frames

    for total, n in ((120, 100), (7, 3)):
        video = tmp_path / f"count_{total}.mp4"
        writer = imageio_ffmpeg.write_frames(
            str(video),
            (16, 16),
            fps=10,
            codec="libx264",
            quality=None,
            output_params=["-qp", "0"],
            pix_fmt_out="yuv444p",
            macro_block_size=1,
        )
        writer.send(None)
        for i in range(
            total
        ):  # frame i = 60 a + b shows red 4 b + 2, green 100 a + 50: read back despite +-1 codec error
            frame = np.zeros((16, 16, 3), np.uint8)
            frame[..., 0], frame[..., 1] = 4 * (i % 60) + 2, 100 * (i // 60) + 50
            writer.send(frame)
        writer.close()
        names = select_frames(video, tmp_path / f"frames_{total}", n, sharp=False)
        assert len(names) == n
        got = []
        for name in names:
            rgb = iio.imread(tmp_path / f"frames_{total}" / name).reshape(-1, 3).mean(0)
            got.append(60 * round((rgb[1] - 50) / 100) + round((rgb[0] - 2) / 4))
        # window w: the frames i with floor(i n / total) == w; the middle one of them
        windows = [[i for i in range(total) if i * n // total == w] for w in range(n)]
        expected = [frames[(len(frames) - 1) // 2] for frames in windows]
        assert got == expected, (total, n)
