"""``python -m benchmarks suite``'s mechanisms: Strecha's camera files read into COLMAP cameras that project
as the file says, photos reduced by an integer factor with the cameras divided alike, SfM's points moved
into the true frame, the ceiling's overrides, and one-line errors for missing captures and unknown scenes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # benchmarks/ is run from the checkout, not installed

from benchmarks import suite  # noqa: E402
from pointrix_lite.data.cameras import qvec_to_rotmat, rotmat_to_qvec  # noqa: E402
from pointrix_lite.io.colmap import ColmapCamera, ColmapImage, ColmapModel  # noqa: E402


def rotation(seed: int) -> np.ndarray:
    q, r = np.linalg.qr(np.random.default_rng(seed).normal(size=(3, 3)))
    q = q * np.sign(np.diag(r))
    return q if np.linalg.det(q) > 0 else -q


def write_strecha(path: Path, K: np.ndarray, R_c2w: np.ndarray, C: np.ndarray, size: tuple[int, int]) -> None:
    rows = [*K, np.zeros(3), *R_c2w, C]
    path.write_text("\n".join(" ".join(f"{v:.12g}" for v in row) + " " for row in rows) + f"\n{size[0]} {size[1]}\n")


def test_a_strecha_camera_projects_points_as_its_file_says(tmp_path: Path) -> None:
    K = np.array([[2759.48, 0, 1520.69], [0, 2764.16, 1006.81], [0, 0, 1]])
    R_c2w, C = rotation(0), np.array([-7.3, -7.6, 0.2])
    for name in ("a.jpg", "b.jpg"):
        write_strecha(tmp_path / f"{name}.camera", K, R_c2w, C, (3072, 2048))
    X = C + R_c2w @ np.array([0.3, -0.2, 5.0])  # a point in front of the camera
    expected = K @ R_c2w.T @ (X - C)
    expected = expected[:2] / expected[2]

    model = suite.true_model(tmp_path, ["b.jpg", "a.jpg"], factor=2)
    assert sorted(im.name for im in model.images.values()) == ["a.jpg", "b.jpg"]
    im = model.images[1]
    cam = model.cameras[im.camera_id]
    assert (cam.model, cam.width, cam.height) == ("PINHOLE", 1536, 1024)
    fx, fy, cx, cy = cam.params
    x_cam = qvec_to_rotmat(im.qvec) @ X + im.tvec
    uv = np.array([fx * x_cam[0] / x_cam[2] + cx, fy * x_cam[1] / x_cam[2] + cy])
    np.testing.assert_allclose(uv, expected / 2, rtol=0, atol=1e-6)  # the reduced photo: pixel coordinates halved


def test_a_broken_camera_file_and_a_missing_one_are_one_line(tmp_path: Path) -> None:
    (tmp_path / "a.jpg.camera").write_text("1 0 0\n0 1\n")
    with pytest.raises(SystemExit, match=r"a\.jpg\.camera: not a Strecha camera file"):
        suite.true_model(tmp_path, ["a.jpg"], 1)
    with pytest.raises(SystemExit, match=r"b\.jpg\.camera: no true camera for photo b\.jpg"):
        suite.true_model(tmp_path, ["b.jpg"], 1)


def test_photos_are_reduced_by_one_integer_factor_and_kept(tmp_path: Path) -> None:
    from PIL import Image

    src = tmp_path / "src"
    src.mkdir()
    rng = np.random.default_rng(1)
    pixels = rng.integers(0, 256, size=(60, 90, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(src / "p0.png")
    Image.fromarray(pixels[::-1]).save(src / "p1.png")
    (src / "notes.txt").write_text("not a photo")
    dest = tmp_path / "dest"
    assert suite.reduce_photos(src, dest, max_side=40) == (3, ["p0.png", "p1.png"])  # 90 / 3 <= 40 < 90 / 2
    assert sorted(p.name for p in dest.iterdir()) == ["p0.png", "p1.png"]
    small = np.asarray(Image.open(dest / "p0.png"), dtype=np.float64)
    box = pixels.reshape(20, 3, 30, 3, 3).mean(axis=(1, 3))  # the 3x3 box mean of every block
    assert small.shape == (20, 30, 3) and np.abs(small - box).max() <= 1.0
    before = (dest / "p0.png").stat().st_mtime_ns
    suite.reduce_photos(src, dest, max_side=40)
    assert (dest / "p0.png").stat().st_mtime_ns == before  # reused, not written again


def test_sfm_points_move_with_the_similarity_of_the_camera_centres() -> None:
    rng = np.random.default_rng(2)
    s, R, t = 3.0, rotation(3), np.array([1.0, -2.0, 0.5])
    cams = {1: ColmapCamera(1, "PINHOLE", 10, 10, np.array([5.0, 5.0, 5.0, 5.0]))}
    sfm_images, true_images = {}, {}
    for i in range(1, 6):
        rot, centre = rotation(10 + i), rng.normal(size=3)
        sfm_images[i] = ColmapImage(i, rotmat_to_qvec(rot), -rot @ centre, 1, f"{i}.jpg")
        true_rot, true_centre = rot @ R.T, s * R @ centre + t  # the same camera in the true frame
        true_images[i] = ColmapImage(i, rotmat_to_qvec(true_rot), -true_rot @ true_centre, 1, f"{i}.jpg")
    xyz = rng.normal(size=(7, 3))
    rgb = rng.integers(0, 256, size=(7, 3), dtype=np.uint8)
    sfm = ColmapModel(cams, sfm_images, xyz, rgb, {})
    truth = ColmapModel(cams, true_images, np.zeros((0, 3)), np.zeros((0, 3), np.uint8), {})
    moved = suite.with_sfm_points(truth, sfm)
    np.testing.assert_allclose(moved.xyz, s * xyz @ R.T + t, atol=1e-9)
    assert moved.images is truth.images and (moved.rgb == rgb).all()


def test_the_ceiling_stretches_steps_budget_and_schedule() -> None:
    out = suite.ceiling_overrides(REPO / "configs" / "colmap_cpu.yaml")
    assert out == ["trainer.max_steps=30000", "strategy.cap_max=400000", "strategy.steps_scaler=1"]


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "benchmarks", "suite", *args], cwd=REPO, capture_output=True, text=True, timeout=120
    )


def test_a_missing_capture_and_an_unknown_scene_are_one_line(tmp_path: Path) -> None:
    proc = run("--data", str(tmp_path), "--scenes", "sceaux", "--out", str(tmp_path / "out"))
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        f"error: --data: {tmp_path / 'ImageDataset_SceauxCastle'} not found; run with --fetch, or: "
        f"git clone https://github.com/openMVG/ImageDataset_SceauxCastle {tmp_path / 'ImageDataset_SceauxCastle'}"
    ]
    proc = run("--data", str(tmp_path), "--scenes", "castle-P30")
    assert proc.returncode == 1 and proc.stderr.strip().startswith("error: --scenes: unknown castle-P30;")


def test_rows_only_prints_the_kept_rows_and_their_mean(tmp_path: Path) -> None:
    import json

    scores = {"psnr": 20.0, "ssim": 0.8, "lpips": None}
    for scene, psnr in (("sceaux", 20.0), ("monstree", 23.0)):
        folder = tmp_path / "out" / "work" / scene / "default_seed=1"
        folder.mkdir(parents=True)
        row = {"scene": scene, "photos": 11, "registered": 9, "test_views": 2, "unaligned": {**scores, "psnr": psnr}}
        row |= {"aligned": scores, "train_seconds": 300.0, "seeding_seconds": 4.0}
        (folder / "row.json").write_text(json.dumps(row))
    args = ["--data", str(tmp_path / "none"), "--out", str(tmp_path / "out"), "--scenes", "sceaux,monstree"]
    proc = run(*args, "--rows-only", "seed=1")
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stdout.splitlines() if line.startswith("| ")]
    assert lines[2].startswith("| sceaux | 9/11 | 2 | 20.00 | 0.8000 |  | 20.00 |")
    assert lines[4].startswith("| mean of 2 |  |  | 21.50 | 0.8000 |  | 20.00 |")
    proc = run(*args, "--rows-only")  # another run's options: nothing kept
    assert proc.returncode == 1 and "--rows-only: no kept row" in proc.stderr


def test_a_recorded_row_names_the_thread_count(monkeypatch) -> None:
    """Another thread count sums in another order: the stored command says which one a row ran with."""
    import argparse

    from benchmarks import results, suite

    stored: list = []
    monkeypatch.setattr(results, "record", lambda table, key, cells, command, **_: stored.append(command) or key)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.delenv("MKL_NUM_THREADS", raising=False)
    scores = {"psnr": 20.0, "ssim": 0.8, "lpips": None}
    row = {"scene": "sceaux", "photos": 11, "registered": 9, "test_views": 2, "unaligned": scores, "aligned": scores}
    row |= {"train_seconds": 300.0, "seeding_seconds": 4.0}
    args = argparse.Namespace(ceiling=False, against=None, process_args="", shared_sfm=False, overrides=["seed=1"])
    suite.record([row], "shipped", args, ["--data", "D", "--record", "seed=1"])
    assert stored == [["OMP_NUM_THREADS=1", "python", "-m", "benchmarks", "suite", "--data", "D", "seed=1"]]
    monkeypatch.delenv("OMP_NUM_THREADS")
    suite.record([row], "shipped", args, ["--data", "D", "seed=1"])
    assert stored[-1][:3] == ["python", "-m", "benchmarks"]


@pytest.mark.parametrize("shared", [False, True])
def test_shared_sfm_trains_another_tree_on_the_checkouts_process_output(tmp_path: Path, monkeypatch, shared) -> None:
    """Two process.py runs differ (COLMAP's threads) and both seeds of a tree share its one SfM: --shared-sfm
    makes the --against tree train on the SfM the checkout's own process.py made, in the checkout's folder."""
    import argparse

    from benchmarks import workers

    calls: list = []
    image = ColmapImage(1, np.array([1.0, 0, 0, 0]), np.zeros(3), 1, "a.jpg")
    model = ColmapModel({}, {1: image}, np.zeros((0, 3)), np.zeros((0, 3), np.uint8), {})
    monkeypatch.setattr(suite, "process", lambda scene, tree, folder, args: calls.append((tree, folder)) or model)
    report = {"mean": {"psnr": 20.0}, "train_seconds": 1.0}
    monkeypatch.setattr(workers, "train_script", lambda tree, config, overrides, out: calls.append(overrides) or report)
    other = tmp_path / "other_tree"
    args = argparse.Namespace(
        out=tmp_path / "out", against=str(other), process_args="", shared_sfm=shared, skip_true=True
    )
    scene = suite.Scene("sceaux", tmp_path / "photos", ["a.jpg"], None)
    row = suite.run_scene(scene, other, tmp_path / "out" / other.name / "sceaux" / "default", args, ["seed=1"])
    sfm = tmp_path / "out" / ("work" if shared else other.name) / "sceaux" / "sfm"
    assert calls == [(suite.REPO if shared else other, sfm), [f"dataset.data_path={sfm}", "seed=1"]]
    assert row["unaligned"]["psnr"] == 20.0 and row["registered"] == 1


def test_the_ceiling_table_puts_the_default_run_beside_it(tmp_path: Path) -> None:
    """A ceiling row gets the unaligned PSNR of the default run kept with the same options, and the gap;
    a scene whose default run is not kept gets empty cells, and the mean then has none either."""
    import json

    def row(scene: str, psnr: float) -> dict:
        scores = {"psnr": psnr, "ssim": 0.8, "lpips": None}
        return {"scene": scene, "unaligned": scores, "aligned": scores, "train_seconds": 10.0}

    import argparse

    args = argparse.Namespace(process_args="--principal-point refine", shared_sfm=True, overrides=["seed=1"])
    assert suite.run_tag(args, ceiling=True) == "ceiling_--principal-point_refine_shared-sfm_seed=1"
    tag = suite.run_tag(args, ceiling=False)
    assert tag == "default_--principal-point_refine_shared-sfm_seed=1"
    folders = {name: tmp_path / name / tag for name in ("sceaux", "monstree")}
    folders["sceaux"].mkdir(parents=True)
    (folders["sceaux"] / "row.json").write_text(json.dumps(row("sceaux", 18.25) | {"version": "0.1.0 (abc1234)"}))
    rows = suite.with_default_scores([row("sceaux", 19.5), row("monstree", 21.0)], folders)
    cells = suite.cells(rows[0])
    assert (cells["PSNR default run"], cells["ceiling - default dB"]) == ("18.25", "+1.25")
    assert cells["default / ceiling"] == "94 %"  # 18.25 / 19.5
    assert cells["default run version"] == "0.1.0 (abc1234)"
    empty = {suite.cells(rows[1])[k] for k in ("ceiling - default dB", "default / ceiling", "default run version")}
    assert empty == {""}
    table = suite.markdown(rows, (*suite.COLUMNS, *suite.CEILING_COLUMNS)).splitlines()
    assert table[0].endswith("| PSNR default run | ceiling - default dB | default / ceiling | default run version |")
    assert table[-1].startswith("| mean of 2 |") and table[-1].endswith("|  |  |  |  |")
    assert "PSNR default run" not in suite.markdown(rows)  # the default table keeps its columns
    both = suite.with_default_scores([row("sceaux", 19.5), row("sceaux", 20.5)], folders)
    assert suite.markdown(both, suite.CEILING_COLUMNS).splitlines()[-1] == "| 18.25 | +1.75 | 91 % | 0.1.0 (abc1234) |"


def test_a_row_recorded_later_names_the_code_and_machine_that_trained_it(tmp_path: Path, monkeypatch) -> None:
    """A row is trained at one commit on one machine and may be recorded (--rows-only) after more commits or
    on another machine: the stored version and machine are the row's own; a row kept before rows named them
    falls back to this checkout's and this machine's; the mean names each version its rows came from."""
    import argparse

    from benchmarks import results

    stored: list = []
    keys: list = []
    monkeypatch.setattr(results, "record", lambda *a, **kw: stored.append((a[2], kw)) or keys.append(a[1]) or a[1])
    monkeypatch.setattr(results, "version", lambda: "0.1.0 (head000)")
    scores = {"psnr": 20.0, "ssim": 0.8, "lpips": None}
    row = {"scene": "sceaux", "photos": 11, "registered": 9, "test_views": 2, "unaligned": scores, "aligned": scores}
    row |= {"train_seconds": 300.0, "seeding_seconds": 4.0}
    args = argparse.Namespace(ceiling=False, against=None, process_args="", shared_sfm=False, overrides=[])
    old = row | {"scene": "monstree", "version": "0.1.0 (old0000)", "machine": "Some CPU (AVX2, 2 cores)"}
    suite.record([row, old], "shipped", args, ["--data", "D"])
    (cells0, kw0), (cells1, kw1), (mean, kw_mean) = stored
    assert kw0 == {"at": None, "on": None} and cells0["recipe"] == "shipped (0.1.0 (head000))"
    assert kw1 == {"at": "0.1.0 (old0000)", "on": "Some CPU (AVX2, 2 cores)"}
    assert cells1["recipe"] == "shipped (0.1.0 (old0000))"
    assert kw_mean == {"at": None, "on": None}  # one row without a version: the mean's is not known either
    assert keys == ["work sceaux", "work monstree", "work ~mean of 2"]  # stored sorted: the mean's last
    stored.clear()
    suite.record([old, old | {"version": "0.1.0 (new1111)"}], "shipped", args, ["--data", "D"])
    assert stored[-1][1] == {"at": "0.1.0 (old0000), 0.1.0 (new1111)", "on": "Some CPU (AVX2, 2 cores)"}
    monkeypatch.setattr(results, "machine", lambda: "This CPU (AVX-512, 2 cores)")
    assert suite.measured_by(args) == {"version": "0.1.0 (head000)", "machine": "This CPU (AVX-512, 2 cores)"}
    (tmp_path / "pointrix_lite").mkdir()
    assert suite.measured_by(argparse.Namespace(against=str(tmp_path)))["version"] == str(tmp_path.resolve())


def test_a_row_names_the_code_it_was_launched_with(tmp_path: Path, monkeypatch) -> None:
    """A ceiling trains for most of an hour: a commit made meanwhile is not the code that trained it."""
    import json

    from benchmarks import results, workers

    head = {"rev": "0.1.0 (launch0)"}
    monkeypatch.setattr(results, "version", lambda: head["rev"])
    monkeypatch.setattr(results, "machine", lambda: "This CPU (AVX-512, 2 cores)")
    monkeypatch.setattr(suite, "prepare", lambda name, args: suite.Scene(name, tmp_path, ["a.jpg"], None))
    monkeypatch.setattr(workers, "prebuild", lambda tree: None)
    scores = {"psnr": 20.0, "ssim": 0.8, "lpips": None}

    def train(scene, tree, folder, args, overrides) -> dict:
        head["rev"] = "0.1.0 (later00)"  # committed while the scene trains
        return {"scene": scene.name, "unaligned": scores, "aligned": scores, "train_seconds": 1.0}

    monkeypatch.setattr(suite, "run_scene", train)
    out = tmp_path / "out"
    assert suite.main(["--data", str(tmp_path), "--out", str(out), "--scenes", "sceaux,monstree"]) == 0
    for scene in ("sceaux", "monstree"):
        row = json.loads((out / "work" / scene / "default" / "row.json").read_text())
        assert (row["version"], row["machine"]) == ("0.1.0 (launch0)", "This CPU (AVX-512, 2 cores)")
