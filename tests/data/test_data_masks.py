"""Training masks (``masks/<image path>.png``): lookup per view, nearest-neighbour resizing to the
training resolution (``dataset.scale`` and ``images_N``), the resolution schedule, and bad masks."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from data_helpers import make_nerf_scene, make_pycolmap_scene
from PIL import Image

from pointrix_lite.data.cameras import Camera, View
from pointrix_lite.data.resample import downscale_view
from pointrix_lite.errors import DataError
from pointrix_lite.io.images import downscale, read_image, write_png
from pointrix_lite.registry import DATASETS


def write_mask(path, keep: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.where(keep, 255, 0).astype(np.uint8), "L").save(path)


def random_keep(rng: np.random.Generator, h: int, w: int) -> np.ndarray:
    keep = rng.random((h, w)) > 0.4
    keep[0, 0] = True  # never all-zero, even for a tiny mask
    return keep


def nerf(root, **options):
    return DATASETS.build({"type": "NerfSyntheticDataset", "data_path": str(root), **options}, "dataset")


def colmap(root, **options):
    return DATASETS.build({"type": "ColmapDataset", "data_path": str(root), **options}, "dataset")


def nearest_reference(keep: np.ndarray, s: int) -> np.ndarray:
    """Integer factor ``s``: each s x s block's pixel nearest to its centre, i.e. offset s // 2 (PIL agrees)."""
    pil = (
        np.asarray(
            Image.fromarray(keep.astype(np.uint8) * 255, "L").resize(
                (keep.shape[1] // s, keep.shape[0] // s), Image.Resampling.NEAREST
            )
        )
        > 0
    )
    ours = keep[s // 2 :: s, s // 2 :: s][: keep.shape[0] // s, : keep.shape[1] // s]
    np.testing.assert_array_equal(pil, ours)
    return ours


# --- lookup and resizing ------------------------------------------------------------------------------


@pytest.mark.parametrize("scale", [1, 2])
def test_nerf_synthetic_masks_follow_the_split_folders_and_scale(tmp_path, scale):
    make_nerf_scene(tmp_path, n_train=3, n_test=2, size=(16, 12))
    rng = np.random.default_rng(1)
    keeps = {}
    for split, n in (("train", 3), ("test", 2)):
        for i in range(n):  # test masks exist too: they must not be applied with eval on
            keeps[f"{split}/r_{i}"] = random_keep(rng, 12, 16)
            write_mask(tmp_path / "masks" / split / f"r_{i}.png", keeps[f"{split}/r_{i}"])
    ds = nerf(tmp_path, scale=scale)
    for i, v in enumerate(ds.train_views):
        assert v.mask.dtype == torch.bool and v.mask.shape == v.image.shape[:2]
        np.testing.assert_array_equal(v.mask.numpy(), nearest_reference(keeps[f"train/r_{i}"], scale))
    assert all(v.mask is None for v in ds.test_views + ds.val_views)  # metrics judge the whole image
    # eval off: the test split trains too, each view with its own folder's mask (stems repeat).
    merged = nerf(tmp_path, eval=False)
    assert len(merged.train_views) == 5
    np.testing.assert_array_equal(merged.train_views[3].mask.numpy(), keeps["test/r_0"])
    assert not np.array_equal(keeps["test/r_0"], keeps["train/r_0"])


def test_no_masks_folder_means_no_masks(tmp_path):
    make_nerf_scene(tmp_path)
    assert all(v.mask is None for v in nerf(tmp_path).train_views)


def test_colmap_masks_follow_images_n_with_the_right_file_per_view(tmp_path):
    make_pycolmap_scene(tmp_path, n=6, size=(16, 12))
    rng = np.random.default_rng(2)
    (tmp_path / "images_2").mkdir()
    keeps = {}
    for path in sorted((tmp_path / "images").iterdir()):
        write_png(tmp_path / "images_2" / path.name, downscale(read_image(path), 8, 6))
        keeps[path.stem] = random_keep(rng, 12, 16)
        write_mask(tmp_path / "masks" / f"{path.stem}.png", keeps[path.stem])
    ds = colmap(tmp_path, scale=2, test_every=3)
    assert [v.name for v in ds.train_views] == ["im_01", "im_02", "im_04", "im_05"]
    for v in ds.train_views:
        assert v.mask.shape == (6, 8)
        np.testing.assert_array_equal(v.mask.numpy(), nearest_reference(keeps[v.name], 2))
    assert all(v.mask is None for v in ds.test_views)


def test_mask_at_the_training_size_or_a_multiple_is_accepted(tmp_path):
    make_nerf_scene(tmp_path, n_train=2, n_test=1, size=(16, 12))
    rng = np.random.default_rng(3)
    small, big = random_keep(rng, 3, 4), random_keep(rng, 24, 32)  # scale 4 trains at 4x3
    write_mask(tmp_path / "masks/train/r_0.png", small)
    write_mask(tmp_path / "masks/train/r_1.png", big)
    a, b = nerf(tmp_path, scale=4).train_views
    np.testing.assert_array_equal(a.mask.numpy(), small)
    np.testing.assert_array_equal(b.mask.numpy(), big[4::8, 4::8])


def test_grey_palette_and_rgb_masks_keep_every_non_zero_value(tmp_path):
    from pointrix_lite.data.masks import read_mask

    values = np.array([[0, 1, 128], [255, 0, 7]], dtype=np.uint8)
    Image.fromarray(values, "L").save(tmp_path / "l.png")
    rgb = np.zeros((2, 3, 3), np.uint8)
    rgb[0, 1, 2] = 1  # pure dark blue: greyscale conversion would round it to 0
    rgb[1, 0] = 200
    Image.fromarray(rgb, "RGB").save(tmp_path / "rgb.png")
    np.testing.assert_array_equal(read_mask(tmp_path / "l.png"), values != 0)
    np.testing.assert_array_equal(read_mask(tmp_path / "rgb.png"), [[0, 1, 0], [1, 0, 0]])


# --- the resolution schedule ------------------------------------------------------------------------


@pytest.mark.parametrize("s", [2, 3])
def test_schedule_keeps_a_low_res_pixel_only_if_its_whole_block_is_kept(s):
    g = torch.Generator().manual_seed(0)
    mask = torch.rand(10, 13, generator=g) > 0.15
    cam = Camera(fx=20.0, fy=20.0, cx=6.5, cy=5.0, width=13, height=10, viewmat=torch.eye(4))
    v = View(cam, torch.zeros(10, 13, 3, dtype=torch.uint8), "v", 0, mask=mask)
    small = downscale_view(v, s)
    h, w = 10 // s, 13 // s
    ref = np.array([[mask[i * s : (i + 1) * s, j * s : (j + 1) * s].all().item() for j in range(w)] for i in range(h)])
    assert small.mask.shape == small.image.shape[:2] == (h, w)
    np.testing.assert_array_equal(small.mask.numpy(), ref)
    assert ref.any() and not ref.all()  # the draw mixes kept and ignored blocks
    assert downscale_view(View(cam, v.image, "u", 0), s).mask is None


# --- bad masks: one line naming the file ------------------------------------------------------------


def _scene_with_masks(root):
    make_nerf_scene(root, n_train=2, n_test=1, size=(16, 12))
    for i in range(2):
        write_mask(root / f"masks/train/r_{i}.png", np.ones((12, 16), bool))


def _truncated(path):
    path.write_bytes(b"\x89PNG\r\n\x1a\n truncated")


BAD_MASKS = {
    "unreadable": (_truncated, "cannot decode mask"),
    "all zero": (lambda p: write_mask(p, np.zeros((12, 16), bool)), "mask keeps no pixel"),
    "wrong size": (lambda p: write_mask(p, np.ones((12, 15), bool)), "mask is 15x12 but its image is 16x12"),
}


@pytest.mark.parametrize("case", BAD_MASKS)
def test_bad_mask_is_one_line_naming_the_file(tmp_path, case):
    _scene_with_masks(tmp_path)
    spoil, text = BAD_MASKS[case]
    spoil(tmp_path / "masks/train/r_1.png")
    with pytest.raises(DataError) as e:
        nerf(tmp_path)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"{tmp_path / 'masks/train/r_1.png'}: {text}"), msg


def test_a_mask_kept_only_by_pixels_nearest_drops_is_fully_masked(tmp_path):
    _scene_with_masks(tmp_path)
    keep = np.zeros((12, 16), bool)
    keep[0, 0] = True  # at scale 2 the nearest pixels are the odd rows and columns
    write_mask(tmp_path / "masks/train/r_0.png", keep)
    nerf(tmp_path)  # fine at full size
    with pytest.raises(DataError, match="r_0.png: mask keeps no pixel at 8x6"):
        nerf(tmp_path, scale=2)


def test_masks_are_pinned_and_moved_with_their_images(monkeypatch):
    from pointrix_lite.data.cameras import pin_images

    pinned = []
    # pin_memory() itself needs a CUDA runtime; record what would be pinned instead.
    monkeypatch.setattr(torch.Tensor, "pin_memory", lambda t: pinned.append(tuple(t.shape)) or t.clone())
    mask = torch.rand(4, 5) > 0.5
    views = [
        View(None, torch.zeros(4, 5, 3, dtype=torch.uint8), "m", 0, mask=mask),
        View(None, torch.zeros(4, 5, 3, dtype=torch.uint8), "n", 1),
    ]
    pin_images(views)
    assert pinned == [(4, 5, 3), (4, 5), (4, 5, 3)]
    assert torch.equal(views[0].mask_on("cpu"), mask) and views[1].mask_on("cpu") is None
    assert views[0].mask_on() is views[0].mask


# --- the names other tools give masks -----------------------------------------------------------------


@pytest.mark.parametrize("folder", ["mask", "segmentation", "dynamic_masks"])
def test_other_tools_mask_folders_and_file_names_are_read(tmp_path, folder):
    """OpenSplat's folder names; a .jpg mask (kept from mid-grey: JPEG rings) and COLMAP's ``<image name>.png``."""
    make_pycolmap_scene(tmp_path, n=6, size=(32, 24))
    keep = np.zeros((24, 32), bool)
    keep[:, :16] = True  # a hard edge, where JPEG's ringing would keep dropped pixels at any non-zero value
    names = sorted(p.name for p in (tmp_path / "images").iterdir())
    as_jpeg = tmp_path / folder / (names[1].rsplit(".", 1)[0] + ".jpg")
    as_jpeg.parent.mkdir()
    Image.fromarray(np.where(keep, 255, 0).astype(np.uint8), "L").save(as_jpeg, quality=50)
    write_mask(tmp_path / folder / (names[2] + ".png"), ~keep)  # COLMAP: im_02.png.png
    ds = colmap(tmp_path, test_every=3)
    by_name = {v.name: v for v in ds.train_views}
    np.testing.assert_array_equal(by_name[names[1].rsplit(".", 1)[0]].mask.numpy(), keep)
    np.testing.assert_array_equal(by_name[names[2].rsplit(".", 1)[0]].mask.numpy(), ~keep)


def test_an_image_without_a_mask_is_kept_whole_and_said_once(tmp_path, capsys):
    _scene_with_masks(tmp_path)
    (tmp_path / "masks/train/r_1.png").unlink()
    ds = nerf(tmp_path)
    assert ds.train_views[1].mask is None and ds.train_views[0].mask is not None
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("masks:")]
    assert lines == [
        f"masks: {tmp_path / 'masks'} has no mask for 1 of 2 training images (train/r_1.png); those are kept whole"
    ]


def test_two_mask_folders_are_refused_in_one_line(tmp_path):
    _scene_with_masks(tmp_path)
    (tmp_path / "segmentation").mkdir()
    with pytest.raises(DataError) as e:
        nerf(tmp_path)
    assert str(e.value) == (
        f"{tmp_path}: holds masks/, segmentation/: keep one mask folder (or rename the others) so the masks are not guessed"
    )
