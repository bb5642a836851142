"""process.py --masks: COLMAP finds no features on ignored pixels, masks are undistorted with their
photo's mapping (nearest neighbour) into OUT/masks, and bad masks are one-line errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from pointrix_lite.cli import process as cli
from pointrix_lite.data.masks import read_mask
from pointrix_lite.io.colmap import read_model
from pointrix_lite.io.undistort import undistort
from pointrix_lite.process import sfm
from pointrix_lite.process.colmap_import import import_pycolmap
from pointrix_lite.process.masks import undistort_masks, write_colmap_masks
from pointrix_lite.process.options import ProcessOptions

W, H = 96, 72


def _mask(path: Path, keep: np.ndarray) -> None:
    Image.fromarray(np.where(keep, 255, 0).astype(np.uint8), "L").save(path)


def _blocky(rng: np.random.Generator, block: int = 8) -> np.ndarray:
    """Random 8 x 8 blocks: nearest and bilinear warps then agree away from block edges."""
    return np.kron(rng.random((H // block, W // block)) > 0.5, np.ones((block, block), bool))


def _photos(folder: Path, n: int = 3, seed: int = 0) -> list[str]:
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    for i in range(n):
        Image.fromarray(rng.integers(0, 256, (H, W, 3), dtype=np.uint8)).save(folder / f"p{i}.png")
    return [f"p{i}.png" for i in range(n)]


def test_no_keypoints_on_masked_pixels(tmp_path):
    pycolmap = import_pycolmap()
    names = _photos(tmp_path / "photos")
    (tmp_path / "masks").mkdir()
    keep = np.zeros((H, W), bool)
    keep[:, : W // 2] = True  # features on the left half only
    for name in names:
        _mask(tmp_path / "masks" / f"{Path(name).stem}.png", keep)
    opts = ProcessOptions(out=tmp_path, threads=1, max_image_size=W)
    colmap_masks = write_colmap_masks(tmp_path / "masks", names, tmp_path / "colmap_masks")
    assert sorted(p.name for p in colmap_masks.iterdir()) == [f"{n}.png" for n in names]  # COLMAP's naming

    def keypoint_x(mask_dir):
        db_path = tmp_path / f"db{mask_dir is not None}.db"
        sfm.extract_features(pycolmap, db_path, tmp_path / "photos", names, opts, lambda d, t: None, mask_dir)
        db = pycolmap.Database.open(str(db_path))
        try:
            return np.concatenate([db.read_keypoints(im.image_id)[:, 0] for im in db.read_all_images()])
        finally:
            db.close()

    masked, free = keypoint_x(colmap_masks), keypoint_x(None)
    assert len(masked) >= 20 and masked.max() < W / 2
    assert (free > W / 2).sum() >= 20  # without the masks the right half has features


def _simple_radial_scene(root: Path, k: float) -> list[str]:
    pycolmap = import_pycolmap()
    rec = pycolmap.Reconstruction()
    camera = pycolmap.Camera(model="SIMPLE_RADIAL", width=W, height=H, params=[80.0, 47.0, 35.5, k], camera_id=1)
    rec.add_camera_with_trivial_rig(camera)
    names = _photos(root / "photos", n=2)
    for i, name in enumerate(names):
        pose = pycolmap.Rigid3d(np.hstack([np.eye(3), [[0.1 * i], [0.0], [0.0]]]))
        rec.add_image_with_trivial_frame(pycolmap.Image(name=name, camera_id=1, image_id=i + 1), pose)
    rec.add_point3D(np.array([0.0, 0.0, 5.0]), pycolmap.Track(), np.zeros(3, np.uint8))
    (root / "distorted").mkdir()
    rec.write_binary(str(root / "distorted"))
    return names


def simple_radial_reference(keep: np.ndarray, pinhole, k: float) -> np.ndarray:
    """The undistorted mask by COLMAP's formulas, written out: each pinhole pixel centre is distorted
    (``x (1 + k r^2)``) into the photo and takes the pixel it lands in; outside the photo: ignored."""
    fx, fy, cx, cy = pinhole.params
    v, u = np.mgrid[0 : pinhole.height, 0 : pinhole.width] + 0.5
    x, y = (u - cx) / fx, (v - cy) / fy
    radial = 1.0 + k * (x * x + y * y)
    ud, vd = 80.0 * x * radial + 47.0, 80.0 * y * radial + 35.5
    col, row = np.floor(ud).astype(int), np.floor(vd).astype(int)
    inside = (col >= 0) & (col < W) & (row >= 0) & (row < H)
    return np.where(inside, keep[row.clip(0, H - 1), col.clip(0, W - 1)], False)


@pytest.mark.parametrize("k", [0.12, -0.08])
def test_masks_are_undistorted_with_the_photo_mapping(tmp_path, k):
    pycolmap = import_pycolmap()
    names = _simple_radial_scene(tmp_path, k)
    rng = np.random.default_rng(4)
    (tmp_path / "masks").mkdir()
    keeps = {}
    for name in names:  # the photos show their own mask, so COLMAP's image warp is a second reference
        keeps[name] = _blocky(rng)
        _mask(tmp_path / "masks" / f"{Path(name).stem}.png", keeps[name])
        Image.fromarray(np.repeat(np.where(keeps[name], 255, 0).astype(np.uint8)[..., None], 3, -1)).save(
            tmp_path / "photos" / name
        )
    undistort(pycolmap, tmp_path / "distorted", tmp_path / "photos", tmp_path / "out", 1)
    written = undistort_masks(
        pycolmap, tmp_path / "distorted", tmp_path / "out/sparse/0", tmp_path / "masks", tmp_path / "out/masks"
    )
    assert sorted(p.name for p in written) == ["p0.png", "p1.png"]
    model = read_model(tmp_path / "out/sparse/0")
    pinhole = next(iter(model.cameras.values()))
    assert pinhole.model == "PINHOLE" and (pinhole.width, pinhole.height) != (W, H)  # undistortion resized
    for name in names:
        ours = read_mask(tmp_path / "out/masks" / name)
        ref = simple_radial_reference(keeps[name], pinhole, k)
        assert ours.shape == (pinhole.height, pinhole.width)
        np.testing.assert_array_equal(ours, ref)
        photo = np.asarray(Image.open(tmp_path / "out/images" / name).convert("L")) >= 128  # bilinear
        assert photo.shape == ours.shape and (photo == ours).mean() > 0.97
    assert keeps[names[0]].mean() > 0.2 and 0.2 < ours.mean() < 0.8  # a real pattern, not all kept


def test_bad_masks_are_one_line_errors(tmp_path, capsys):
    photos = tmp_path / "photos"
    names = _photos(photos)
    masks = tmp_path / "masks"
    masks.mkdir()
    for name in names[:2]:
        _mask(masks / f"{Path(name).stem}.png", np.ones((H, W), bool))

    def run(*extra):
        code = cli.main(["--images", str(photos), "--out", str(tmp_path / "out"), "--masks", str(masks), *extra])
        lines = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and len(lines) == 1, lines
        return lines[0]

    assert f"{masks / 'p2.png'}: mask not found" in run()
    _mask(masks / "p2.png", np.ones((H, W - 1), bool))
    assert f"{masks / 'p2.png'}: mask is {W - 1}x{H} but photo p2.png is {W}x{H}" in run()
    _mask(masks / "p2.png", np.zeros((H, W), bool))
    assert f"{masks / 'p2.png'}: mask keeps no pixel" in run()
    (masks / "p2.png").write_bytes(b"not a png")
    assert f"{masks / 'p2.png'}: cannot decode mask" in run()
    assert "--masks works with --images only" in _video_error(tmp_path)
    assert not (tmp_path / "out").exists()  # nothing ran


def _video_error(tmp_path: Path) -> str:
    from pointrix_lite.errors import DataError

    argv = ["--video", str(tmp_path / "v.mp4"), "--out", str(tmp_path / "o"), "--masks", str(tmp_path)]
    args = cli.build_parser().parse_args(argv)
    with pytest.raises(DataError) as e:
        cli.to_options(args)
    return str(e.value)
