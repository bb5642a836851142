"""The nerfbaselines method (pointrix_lite/integrations/nerfbaselines) driven as nerfbaselines drives it.

nerfbaselines itself pins numpy < 2 and is not in the dev environment: these tests hand the method the
data set mapping nerfbaselines builds (the keys its ``Dataset`` has), which is all the method reads. The
last test checks the registration through nerfbaselines' own registry where nerfbaselines is installed
(``pip install -e '.[nerfbaselines]'``); benchmarks/nerfbaselines_method.py runs the whole CLI there.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
import yaml
from PIL import Image

from pointrix_lite.components import import_all
from pointrix_lite.data.cameras import qvec_to_rotmat
from pointrix_lite.data.demo.make import generate_demo
from pointrix_lite.engine.experiment import load_experiment
from pointrix_lite.engine.trainer import DefaultTrainer
from pointrix_lite.errors import ConfigError, DataError
from pointrix_lite.integrations.nerfbaselines.method import PointrixLite
from pointrix_lite.io.colmap import find_sparse_dir, read_model

STEPS = 20
# orientation: manhattan turns the scene, so render() must turn nerfbaselines' cameras the same way
RECIPE = {
    "name": "nb",
    "seed": 3,
    "device": "cpu",
    "trainer": {"max_steps": STEPS, "val_interval": 0, "save_test_renders": False},
    "dataset": {
        "type": "ColmapDataset",
        "data_path": "unused",
        "white_background": True,
        "orientation": "manhattan",
        "max_points": 3000,  # a small model: seconds per test on the torch rasterizer too
    },
    "model": {"type": "GaussianModel", "sh_degree": 1},
    "renderer": {"type": "GaussianRenderer", "backend": "auto"},
    "strategy": {"type": "DefaultStrategy", "steps_scaler": 0.005, "refine_stop_iter": 3000},
    "hooks": [{"type": "ResolutionScheduleHook", "start_factor": 2, "full_res_at": 0.5}],
    "writers": [],
}


@pytest.fixture(scope="module")
def scene(tmp_path_factory) -> tuple[Path, Path]:
    """A small demo scene (COLMAP layout) and the recipe YAML the tests train."""
    root = tmp_path_factory.mktemp("nb")
    generate_demo(root / "demo", n_views=16, size=48)
    recipe = root / "recipe.yaml"
    recipe.write_text(yaml.safe_dump(RECIPE))
    return root / "demo" / "colmap", recipe


def nb_dataset(colmap: Path, split: str = "train") -> dict:
    """The scene as nerfbaselines' COLMAP loader hands it to a method: its llffhold split (every 8th image by
    name is a test view), camera-to-world poses in OpenCV axes, images as uint8 arrays."""
    model = read_model(find_sparse_dir(colmap))
    images = sorted(model.images.values(), key=lambda im: im.name)
    images = [im for i, im in enumerate(images) if (i % 8 == 0) == (split == "test")]
    poses, intrinsics, sizes = [], [], []
    for im in images:
        R = qvec_to_rotmat(im.qvec)
        poses.append(np.hstack([R.T, (-R.T @ im.tvec)[:, None]]))
        cam = model.cameras[im.camera_id]
        intrinsics.append(cam.params[:4])
        sizes.append((cam.width, cam.height))
    cameras = SimpleNamespace(
        poses=np.stack(poses),
        intrinsics=np.stack(intrinsics),
        camera_models=np.zeros(len(images), np.int32),
        image_sizes=np.array(sizes, np.int32),
    )
    return {
        "cameras": cameras,
        "image_paths": [str(colmap / "images" / im.name) for im in images],
        "image_paths_root": str(colmap / "images"),
        "images": [np.asarray(Image.open(colmap / "images" / im.name).convert("RGB")) for im in images],
        "points3D_xyz": model.xyz,
        "points3D_rgb": model.rgb,
        "metadata": {},
    }


def one_camera(dataset: dict, i: int) -> SimpleNamespace:
    c = dataset["cameras"]
    return SimpleNamespace(poses=c.poses[i], intrinsics=c.intrinsics[i], image_sizes=c.image_sizes[i])


@pytest.fixture(scope="module")
def trained(scene) -> PointrixLite:
    colmap, recipe = scene
    method = PointrixLite(train_dataset=nb_dataset(colmap), config_overrides={"config": str(recipe)})
    for step in range(STEPS):
        out = method.train_iteration(step)
    assert out["num_gaussians"] > 0 and np.isfinite(out["loss"])
    return method


def test_trains_as_train_py_does(scene, trained, tmp_path):
    """The method's steps give the model DefaultTrainer.run gives on the COLMAP scene itself (same views,
    split, hooks, orientation and random draws)."""
    colmap, recipe = scene
    import_all()
    cfg = load_experiment(recipe, [f"dataset.data_path={colmap}", f"output_dir={tmp_path}"])
    reference = DefaultTrainer(cfg, tmp_path / "ref", "cpu")
    reference.run()
    assert trained.get_info()["num_iterations"] == STEPS == reference.global_step
    np.testing.assert_allclose(trained.rotation, reference.dataset.world_rotation, atol=1e-9)
    ours, theirs = trained.trainer.model.state_dict(), reference.model.state_dict()
    assert ours.keys() == theirs.keys()
    for key in ours:
        if torch.is_tensor(ours[key]) and ours[key].is_floating_point():
            torch.testing.assert_close(ours[key], theirs[key], atol=1e-4, rtol=1e-4, msg=key)


def test_render_is_the_datasets_view(scene, trained):
    """A training camera given as nerfbaselines gives it renders what the trainer's own (turned) view renders."""
    colmap, _ = scene
    dataset = nb_dataset(colmap)
    trainer = trained.trainer
    for i in (0, 5):
        color = trained.render(one_camera(dataset, i))["color"]
        view = trainer.dataset.train_views[i]
        assert color.shape == (view.camera.height, view.camera.width, 3) and color.dtype == np.float32
        with torch.no_grad():
            trainer.model.eval()
            expected = trainer.renderer(trainer.model, [view.camera], trainer.dataset.background)["rgb"][0]
            trainer.model.train()
        # the same camera up to float32 rounding of its world-to-camera matrix (built by another route)
        np.testing.assert_allclose(color, expected.clamp(0, 1).numpy(), atol=1e-3)
        assert (color < 0.95).any(axis=2).mean() > 0.2  # the scene is in view, not only the white background


def test_saved_folder_renders_alone(scene, trained, tmp_path):
    colmap, _ = scene
    camera = one_camera(nb_dataset(colmap, "test"), 1)
    before = trained.render(camera)["color"]
    trained.save(str(tmp_path / "ckpt"))
    loaded = PointrixLite(checkpoint=str(tmp_path / "ckpt"))
    assert loaded.get_info()["loaded_step"] == STEPS
    np.testing.assert_allclose(loaded.render(camera)["color"], before, atol=1e-6)
    with pytest.raises(RuntimeError, match="renders only"):
        loaded.train_iteration(STEPS)


def test_bad_input_is_one_line(scene, tmp_path):
    colmap, recipe = scene
    dataset = nb_dataset(colmap)
    with pytest.raises(ConfigError, match="config: .*nope.yaml not found"):
        PointrixLite(train_dataset=dataset, config_overrides={"config": str(tmp_path / "nope.yaml")})
    dataset["images"][2] = dataset["images"][2].astype(np.float32) / 255
    with pytest.raises(DataError, match=r"image r_00\d\.png: float32 .* 8-bit"):
        PointrixLite(train_dataset=dataset, config_overrides={"config": str(recipe)})


def test_registered_with_nerfbaselines():
    """Where nerfbaselines is installed, its registry finds the method through the entry point."""
    registry = pytest.importorskip("nerfbaselines._registry", reason="pip install -e '.[nerfbaselines]'")
    spec = registry.get_method_spec("pointrix-lite")
    assert spec["method_class"] == "pointrix_lite.integrations.nerfbaselines.method:PointrixLite"


@pytest.mark.parametrize("white", [False, True])
def test_a_recipes_backgrounds_stay_unless_the_scene_is_on_white(tmp_path, white) -> None:
    """nerfbaselines' white background_color wins; otherwise the recipe's own background is kept, and a
    config with both is never built (ColmapDataset refuses that)."""
    from pointrix_lite.integrations.nerfbaselines.method import method_config
    from pointrix_lite.registry import DATASETS

    config = method_config({"dataset.mean_background": True, "trainer.random_background": True}, tmp_path, white)
    data = config["dataset"]
    assert data["white_background"] is white
    assert data.get("mean_background", False) is (not white)
    assert config["trainer"]["random_background"] is (not white)  # RGBA on white trains on white
    generate_demo(tmp_path / "demo", n_views=4, size=16)
    DATASETS.build({**data, "data_path": str(tmp_path / "demo" / "colmap")}, "dataset")  # builds: one background
