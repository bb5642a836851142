"""process.py and phone photos: the EXIF orientation is applied to photos and masks before SfM sees them.

Stored pixels are made here from a known upright picture with numpy (orientation 6: the viewer turns
the stored pixels 90 degrees clockwise, so they are the upright ones turned counter-clockwise), and
every output is re-read with imageio, not with the code that wrote it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import imageio.v3 as iio
import numpy as np
import pytest
from PIL import Image, ImageOps

from pointrix_lite.data.demo.scene import build_scene, camera_ring, render
from pointrix_lite.errors import DataError
from pointrix_lite.io.colmap import read_model
from pointrix_lite.process import sfm
from pointrix_lite.process.colmap_import import import_pycolmap
from pointrix_lite.process.inputs import scan_images
from pointrix_lite.process.masks import check_masks, write_colmap_masks
from pointrix_lite.process.options import ProcessOptions
from pointrix_lite.process.upright import upright_array, upright_size, write_upright

REPO = Path(__file__).resolve().parents[2]
ORIENTATION, EXIF_IFD, FOCAL_35MM = 0x0112, 0x8769, 0xA405
W, H = 48, 64  # upright: portrait, as a phone shows it


def stored(upright: np.ndarray, orientation: int) -> np.ndarray:
    """The pixels a camera stores for ``upright`` with the tag ``orientation``."""
    turn = {1: lambda a: a, 3: lambda a: a[::-1, ::-1], 6: lambda a: np.rot90(a, 1), 8: lambda a: np.rot90(a, -1)}
    return np.ascontiguousarray(turn[orientation](upright))


def shown(pixels: np.ndarray, orientation: int) -> np.ndarray:
    """What a viewer shows for stored ``pixels`` tagged ``orientation`` (the inverse of :func:`stored`)."""
    turn = {1: lambda a: a, 3: lambda a: a[::-1, ::-1], 6: lambda a: np.rot90(a, -1), 8: lambda a: np.rot90(a, 1)}
    return turn[orientation](pixels)


def save(path: Path, pixels: np.ndarray, orientation: int) -> None:
    exif = Image.Exif()
    exif[ORIENTATION] = orientation
    exif[0x010F] = "Apple"
    exif.get_ifd(EXIF_IFD)[FOCAL_35MM] = 26  # COLMAP's first focal guess comes from this
    options = {"quality": 95} if path.suffix == ".jpg" else {}
    Image.fromarray(pixels).save(path, exif=exif, **options)


def blocky(seed: int, w: int = W, h: int = H, channels: int = 3) -> np.ndarray:
    """8 x 8 blocks of random colours: JPEG keeps them to a few levels, and no turn of it is itself."""
    rng = np.random.default_rng(seed)
    return np.kron(rng.integers(0, 256, (h // 8, w // 8, channels), dtype=np.uint8), np.ones((8, 8, 1), np.uint8))


def tag(path: Path) -> int | None:
    with Image.open(path) as im:
        return im.getexif().get(ORIENTATION)


def test_upright_array_turns_as_pil_exif_transpose_for_every_orientation(tmp_path) -> None:
    pixels = np.random.default_rng(0).integers(0, 256, (5, 7, 3), dtype=np.uint8)
    for orientation in range(1, 9):
        path = tmp_path / f"o{orientation}.png"
        save(path, pixels, orientation)
        with Image.open(path) as im:
            shown = np.asarray(ImageOps.exif_transpose(im))
        assert np.array_equal(upright_array(pixels, orientation), shown), orientation
        assert upright_size((7, 5), orientation) == (shown.shape[1], shown.shape[0])


@pytest.fixture
def phone_photos(tmp_path) -> tuple[Path, dict[str, np.ndarray]]:
    """Portrait photos stored the ways phones store them, and what each shows (upright)."""
    folder = tmp_path / "photos"
    folder.mkdir()
    truth = {}
    for i, (name, orientation) in enumerate([("a.jpg", 6), ("b.jpg", 3), ("c.jpg", 8), ("d.jpg", 1), ("e.png", 6)]):
        truth[name] = blocky(i)
        save(folder / name, stored(truth[name], orientation), orientation)
    return folder, truth


def test_photos_are_written_as_shown_without_their_tag(phone_photos, tmp_path) -> None:
    folder, truth = phone_photos
    images = scan_images(folder)
    assert images.turned == {"a.jpg": 6, "b.jpg": 3, "c.jpg": 8, "e.png": 6}
    assert images.size == (W, H)  # the first photo, upright (it is stored 64x48)

    dst = tmp_path / "upright"
    write_upright(folder, images.names, images.turned, dst, threads=2)
    for name, upright in truth.items():
        out = iio.imread(dst / name).astype(int)
        assert out.shape == (H, W, 3), name
        source = shown(iio.imread(folder / name), images.turned.get(name, 1)).astype(int)
        if name.endswith(".png"):
            assert np.array_equal(out, upright)  # lossless
        else:  # JPEG: the second encoding (quality 100, 4:4:4) adds < 1 level to the camera's own loss
            assert np.abs(out - source).mean() < 1.0, name
            # The camera's JPEG (quality 95) is ~8 levels from the picture; turned by 180 degrees it is ~80.
            assert np.abs(out - upright).mean() < 12 and np.abs(out - upright[::-1, ::-1]).mean() > 40, name
        # Nothing left that would turn it a second time, in either reader.
        assert tag(dst / name) in (None, 1)
        assert np.array_equal(iio.imread(dst / name, rotate=True), out)
    assert (dst / "d.jpg").read_bytes() == (folder / "d.jpg").read_bytes()  # upright already: untouched
    with Image.open(dst / "a.jpg") as im:
        assert im.getexif().get_ifd(EXIF_IFD)[FOCAL_35MM] == 26  # the other EXIF fields stay


def test_masks_follow_the_photo_as_shown(phone_photos, tmp_path) -> None:
    folder, _ = phone_photos
    names = scan_images(folder).names
    masks = tmp_path / "masks"
    masks.mkdir()
    keep = np.ones((H, W), bool)
    keep[: H // 4, : W // 2] = False  # the upper left corner is ignored
    grey = np.where(keep, 255, 0).astype(np.uint8)
    for name in names:
        Image.fromarray(grey).save(masks / f"{Path(name).stem}.png")  # drawn on the upright photo
    save(masks / "b.png", stored(grey[..., None].repeat(3, -1), 6), 6)  # saved sideways with its own tag

    check_masks(masks, folder, names)
    colmap_masks = write_colmap_masks(masks, names, tmp_path / "colmap_masks")
    for name in names:
        assert np.array_equal(iio.imread(colmap_masks / f"{name}.png") > 0, keep), name

    # A mask drawn on the stored (sideways) pixels does not fit the photo as shown: one line says so.
    Image.fromarray(stored(grey, 6)).save(masks / "a.png")
    with pytest.raises(DataError) as err:
        check_masks(masks, folder, names)
    assert str(err.value) == (
        f"{masks / 'a.png'}: mask is {H}x{W} but photo a.jpg is {W}x{H} as shown (EXIF orientation 6 turns its "
        f"stored {H}x{W} pixels; draw the mask on the upright photo)"
    )


def test_sfm_sees_upright_sizes_one_camera_each_with_the_exif_focal(tmp_path) -> None:
    pycolmap = import_pycolmap()
    folder = tmp_path / "photos"
    folder.mkdir()
    # One phone: every photo stored 64x48; three held sideways (landscape), two upright (portrait).
    for i in range(5):
        orientation = 1 if i < 3 else 6
        save(folder / f"p{i}.jpg", blocky(10 + i, w=H, h=W) if i < 3 else stored(blocky(10 + i), 6), orientation)
    images = scan_images(folder)
    dst = tmp_path / "upright"
    write_upright(folder, images.names, images.turned, dst)
    database = tmp_path / "database.db"
    opts = ProcessOptions(out=tmp_path, threads=1)
    sfm.extract_features(pycolmap, database, dst, images.names, opts, lambda d, t: None)

    db = pycolmap.Database.open(str(database))
    try:
        cameras = {c.camera_id: c for c in db.read_all_cameras()}
        shapes = {im.name: (cameras[im.camera_id].width, cameras[im.camera_id].height) for im in db.read_all_images()}
    finally:
        db.close()
    assert shapes == {"p0.jpg": (H, W), "p1.jpg": (H, W), "p2.jpg": (H, W), "p3.jpg": (W, H), "p4.jpg": (W, H)}
    assert len(cameras) == 2 and all(c.has_prior_focal_length for c in cameras.values())
    focals = {round(float(c.params[0]), 6) for c in cameras.values()}
    assert len(focals) == 1  # the same lens: EXIF's 26 mm (35 mm equivalent) on the same long side


def test_process_trains_on_phone_photos_as_shown(tmp_path) -> None:
    """End to end: portrait renders stored sideways/upside down with tags, and a mask per photo."""
    prims, cams = build_scene(), camera_ring(48, size=160, height=208)[:10]
    photos, masks = tmp_path / "photos", tmp_path / "masks"
    photos.mkdir()
    masks.mkdir()
    truth = {}
    keep = np.ones((208, 160), bool)
    keep[-24:, -24:] = False  # lower right corner ignored (the table's edge; SfM does not need it)
    for i, cam in enumerate(cams):
        upright = np.clip(np.rint(render(prims, cam, supersample=1) * 255), 0, 255).astype(np.uint8)
        orientation = (6, 8, 3, 1)[i % 4]
        truth[cam.name] = upright
        save(photos / f"{cam.name}.jpg", stored(upright, orientation), orientation)
        Image.fromarray(np.where(keep, 255, 0).astype(np.uint8)).save(masks / f"{cam.name}.png")
    out = tmp_path / "scene"
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO / "scripts" / "process.py"),
            "--images",
            str(photos),
            "--out",
            str(out),
            "--masks",
            str(masks),
            "--downscales",
            "1",
            "--threads",
            "1",
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "upright: 8 of 10 photos turned as their EXIF orientation shows them" in " ".join(proc.stdout.split())
    assert json.loads((out / "colmap" / "summary.json").read_text())["turned_upright"] == 8

    model = read_model(out / "sparse" / "0")
    assert len(model.images) >= 7
    for image in model.images.values():
        camera = model.cameras[image.camera_id]
        assert camera.width < camera.height  # portrait, as shown
        photo = iio.imread(out / "images" / image.name)
        assert photo.shape[:2] == (camera.height, camera.width)
        assert np.array_equal(iio.imread(out / "images" / image.name, rotate=True), photo)
        # Undistortion moves pixels by a pixel or two; at 1/8 size the picture must match the render.
        small = lambda a: np.asarray(Image.fromarray(a).resize((20, 26), Image.Resampling.BOX), dtype=float)  # noqa: E731
        stem = Path(image.name).stem
        assert np.abs(small(photo) - small(truth[stem])).mean() < 6, image.name
        mask = iio.imread(out / "masks" / f"{stem}.png") > 0
        assert mask.shape == photo.shape[:2] and not mask[-10:, -10:].any() and mask[:10, :10].all()
        assert iio.imread(out / "images_2" / image.name).shape[:2] == (
            round(camera.height / 2),
            round(camera.width / 2),
        )
