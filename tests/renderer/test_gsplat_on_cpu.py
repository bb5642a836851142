"""``backend="gsplat"`` on the CPU: our gsplat backend and gsplat's own ``rasterization()`` around
torch stand-ins for its five CUDA stages (gsplat_on_cpu.py), against the native backend.

The stand-ins are checked against gsplat's torch twins where those exist (tile keys), the whole
call against the native backend at test_native.py's tolerances (outputs, meta, every gradient,
absgrad), and an 80-step demo run against the native run of the same config.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from functools import partial
from pathlib import Path

import pytest
import torch

from pointrix_lite.renderer import rasterization

from .cuda_required import needs_cuda
from .dense_reference import random_scene
from .gsplat_on_cpu import emulate_gsplat_on_cpu, fully_fused_projection, isect_tiles
from .native_required import require_native
from .test_native import assert_forward_close, assert_grad_close, run_with_grads

gs = pytest.importorskip("gsplat.cuda._torch_impl")
REPO = Path(__file__).resolve().parents[2]
PLUGIN = Path(__file__).with_name("gsplat_on_cpu.py")


def test_tile_keys_match_gsplats_torch_twin_in_cuda_order() -> None:
    s = random_scene(seed=4, n=40)
    W, H, ts = s["width"], s["height"], 16
    radii, means2d, depths, _, _ = fully_fused_projection(
        s["means"], None, s["quats"], s["scales"], s["viewmats"], s["Ks"], W, H, opacities=s["opacities"]
    )
    means2d = torch.nan_to_num(means2d)  # culled entries are NaN (unwritten on CUDA); their radii are 0
    depths = torch.nan_to_num(depths)
    tw, th = math.ceil(W / ts), math.ceil(H / ts)
    counts, ids, flat = isect_tiles(means2d, radii, depths, ts, tw, th)
    want_counts, want_ids, want_flat = gs._isect_tiles(means2d, radii, depths, ts, tw, th, sort=False)
    # CUDA sorts with cub's stable radix sort; the twin's torch.sort is not stable.
    want_ids, order = torch.sort(want_ids, stable=True)
    n = s["means"].shape[0]
    assert ((flat % n) >= n - 2).sum() >= 2  # the scene's last two Gaussians share a depth: order matters
    assert torch.equal(counts, want_counts) and torch.equal(ids, want_ids) and torch.equal(flat, want_flat[order])


def test_projection_culls_as_the_cuda_kernel_and_leaves_culled_entries_unwritten() -> None:
    from pointrix_lite.renderer.torch_backend.projection import project_gaussians

    s = random_scene(seed=2, n=60)
    W, H = s["width"], s["height"]
    opac = s["opacities"].clone()
    opac[:5] = 0.003  # below 1/255: culled by the kernel, kept (3.33-sigma box) by gsplat's twin
    for mode in (False, True):
        radii, means2d, depths, conics, comps = fully_fused_projection(
            s["means"],
            None,
            s["quats"],
            s["scales"],
            s["viewmats"],
            s["Ks"],
            W,
            H,
            opacities=opac,
            calc_compensations=mode,
            radius_clip=1.0,
        )
        ours = project_gaussians(
            s["means"],
            s["quats"],
            s["scales"],
            opac,
            s["viewmats"],
            s["Ks"],
            W,
            H,
            radius_clip=1.0,
            calc_compensations=mode,
        )
        assert torch.equal(radii, ours.radii)
        vis = (radii > 0).all(-1)
        assert 0 < vis.sum() < vis.numel() and not vis[:, :5].any()
        for got, want in ((means2d, ours.means2d), (depths, ours.depths), (conics, ours.conics)):
            torch.testing.assert_close(got[vis], want[vis], rtol=1e-5, atol=1e-5)
            assert got[~vis].isnan().all()
        if mode:
            torch.testing.assert_close(comps, ours.compensations, rtol=1e-5, atol=1e-6)


CASES = {
    "rgb": ("colors", dict()),
    "sh3-rgb+ed-background": (
        "sh",
        dict(sh_degree=3, render_mode="RGB+ED", backgrounds=torch.tensor([[0.2, 0.5, 0.9]] * 3)),
    ),
    "sh1-antialiased-D": ("sh", dict(sh_degree=1, rasterize_mode="antialiased", render_mode="D")),
    "sh2-absgrad-radius-clip": ("sh", dict(sh_degree=2, absgrad=True, radius_clip=1.5, render_mode="RGB+D")),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_gsplat_backend_on_cpu_matches_native(case: str) -> None:
    require_native()
    colors_key, kw = CASES[case]
    scene = random_scene(seed=1)
    with emulate_gsplat_on_cpu():
        ours = run_with_grads(partial(rasterization, backend="gsplat"), scene, colors_key, **kw)
    assert not ours["meta"]["means2d"].is_leaf  # an intermediate: densification reads its .grad
    _assert_matches_native(ours, scene, colors_key, kw)


@needs_cuda
@pytest.mark.parametrize("case", sorted(CASES))
def test_gsplat_backend_on_cuda_matches_native(case: str) -> None:  # pragma: no cover - no GPU in CI
    """The same comparison with gsplat's real CUDA kernels (passed on an H100: docs/rasterizer.md)."""
    require_native()
    colors_key, kw = CASES[case]
    scene = random_scene(seed=1)
    on_gpu = {k: v.cuda() if torch.is_tensor(v) else v for k, v in scene.items()}
    kw_gpu = {k: v.cuda() if torch.is_tensor(v) else v for k, v in kw.items()}
    ours = run_with_grads(partial(rasterization, backend="gsplat"), on_gpu, colors_key, **kw_gpu)
    absgrad = getattr(ours["meta"]["means2d"], "absgrad", None)
    ours = _to_cpu(ours)
    if absgrad is not None:
        ours["meta"]["means2d"].absgrad = absgrad.cpu()
    _assert_matches_native(ours, scene, colors_key, kw)


def _to_cpu(value):
    if torch.is_tensor(value):
        return value.detach().cpu()
    if isinstance(value, dict):
        return {k: _to_cpu(v) for k, v in value.items()}
    return value


def _assert_matches_native(ours: dict, scene: dict, colors_key: str, kw: dict) -> None:
    """``ours`` (run_with_grads through gsplat) against the native backend at test_native's tolerances."""
    ref = run_with_grads(partial(rasterization, backend="native"), scene, colors_key, **kw)
    n_depth = 0 if kw.get("render_mode", "RGB") == "RGB" else 1
    assert_forward_close(ours["colors"], ref["colors"], n_depth)
    assert_forward_close(ours["alphas"], ref["alphas"])
    meta, ref_meta = ours["meta"], ref["meta"]
    C, N = scene["viewmats"].shape[0], scene["means"].shape[0]
    # The packed=False meta that the renderer and the strategies read.
    assert (meta["width"], meta["height"], meta["n_cameras"], meta["tile_size"]) == (
        scene["width"],
        scene["height"],
        C,
        16,
    )
    assert meta["radii"].shape == (C, N, 2) and meta["radii"].dtype == torch.int32
    assert torch.equal(meta["radii"], ref_meta["radii"])
    vis = (meta["radii"] > 0).all(-1)
    assert 0 < vis.sum() < vis.numel()
    for key in ("means2d", "depths", "conics", "opacities"):
        torch.testing.assert_close(meta[key][vis], ref_meta[key][vis], rtol=1e-5, atol=1e-5)
    assert meta["means2d"].shape == (C, N, 2)
    for name, want in ref["grads"].items():
        if want is None:  # colours unused in "D" mode: no gradient on either path
            assert ours["grads"][name] is None and kw.get("render_mode") == "D", name
            continue
        assert_grad_close(ours["grads"][name], want, name)
    if kw.get("absgrad"):
        assert_grad_close(meta["means2d"].absgrad, ref_meta["means2d"].absgrad, "absgrad")


def test_renderer_and_strategy_read_gsplats_meta() -> None:
    """One training step's renderer -> loss -> backward -> densification statistics, via gsplat."""
    from pointrix_lite.renderer.renderer import GaussianRenderer
    from pointrix_lite.strategy.default import DefaultStrategy

    require_native()
    scene = random_scene(seed=3)
    stats = {}
    for backend in ("gsplat", "native"):
        model = _SceneModel(scene)
        renderer = GaussianRenderer(GaussianRenderer.Config(backend=backend, absgrad=True))
        strategy = DefaultStrategy(DefaultStrategy.Config(absgrad=True, refine_start_iter=10**6))
        with emulate_gsplat_on_cpu() if backend == "gsplat" else _no_context():
            out = renderer(model, model.cameras, (0.1, 0.2, 0.3))
            strategy.step_pre_backward(model, None, 0, out)
            (out["rgb"].square().sum() + out["depth"].mean() + out["alpha"].sum()).backward()
            strategy.step_post_backward(model, None, 0, out)
        assert set(out) >= {"rgb", "depth", "alpha", "means2d", "radii", "visibility", "width", "height", "n_cameras"}
        stats[backend] = {k: v.clone() for k, v in strategy.state.items() if v is not None}
        stats[backend]["visibility"] = out["visibility"]
    assert torch.equal(stats["gsplat"]["visibility"], stats["native"]["visibility"])
    assert torch.equal(stats["gsplat"]["count"], stats["native"]["count"]) and stats["native"]["count"].sum() > 0
    assert_grad_close(stats["gsplat"]["grad2d"], stats["native"]["grad2d"], "grad2d")


class _SceneModel:
    """The minimal model a GaussianRenderer and DefaultStrategy read (render_params, params, N)."""

    def __init__(self, scene: dict) -> None:
        self.params = {
            "means": scene["means"].clone().requires_grad_(True),
            "quats": scene["quats"].clone().requires_grad_(True),
            "scales": scene["scales"].log().requires_grad_(True),
            "opacities": torch.logit(scene["opacities"]).requires_grad_(True),
            "sh": scene["sh"].clone().requires_grad_(True),
        }
        self.num_gaussians = scene["means"].shape[0]
        K = scene["Ks"]
        self.cameras = [_Camera(scene["viewmats"][i], K[i], scene["width"], scene["height"]) for i in range(len(K))]

    def render_params(self) -> dict:
        p = self.params
        return {
            "means": p["means"],
            "quats": p["quats"],
            "scales": p["scales"].exp(),
            "opacities": p["opacities"].sigmoid(),
            "colors": p["sh"],
            "sh_degree": 3,
        }


class _Camera:
    def __init__(self, viewmat: torch.Tensor, K: torch.Tensor, width: int, height: int) -> None:
        self.viewmat, self.K, self.width, self.height, self.name = viewmat, K, width, height, "cam"


class _no_context:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def _train_demo(exp_dir: Path, *overrides: str) -> dict:
    cmd = [
        sys.executable,
        str(REPO / "scripts" / "train.py"),
        "--config",
        str(REPO / "configs" / "demo.yaml"),
        "trainer.max_steps=80",
        "dataset.scale=2",  # 80x80: gsplat's path composites in torch; the full 160x160 tested nothing more
        "save_ckpt_after_iter=0",
        f"exp_dir={exp_dir}",
        *overrides,
    ]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads((exp_dir / "metrics.json").read_text())


@pytest.mark.slow
def test_80_step_demo_through_gsplat_matches_native(tmp_path: Path) -> None:
    """The trainer, densification (three refinements from step 50) and evaluation on gsplat's path
    (torch compositing: its cost grows with the Gaussians, so the steps after growth are the dear ones)."""
    require_native()
    native = _train_demo(tmp_path / "native", "renderer.backend=native", "device=cpu")
    via_gsplat = _train_demo(tmp_path / "gsplat", "--plugin", str(PLUGIN), "renderer.backend=gsplat", "device=cpu")
    config = (tmp_path / "gsplat" / "config.yaml").read_text()
    assert "backend: gsplat" in config
    assert via_gsplat["num_gaussians"] == native["num_gaussians"] > 3249  # densification ran the same
    assert abs(via_gsplat["mean"]["psnr"] - native["mean"]["psnr"]) <= 0.1, (via_gsplat["mean"], native["mean"])
    assert via_gsplat["mean"]["psnr"] > 16.0  # the run trained (the untrained model is near 10 dB)


# The strategies a short run grows with: the demo's, and colmap_cpu.yaml's MCMC with multi-view error
# scores, whose probe render (renderer.blend_weights) is a second forward and backward through gsplat.
STRATEGY_OVERRIDES = {
    "default": ["strategy.steps_scaler=0.02", "strategy.refine_stop_iter=2500", "strategy.cap_max=5000"],
    "mcmc-error": [
        "strategy={type: MCMCStrategy, steps_scaler: 0.02, cap_max: 5000, error_every: 1, error_weight: 1.0,"
        " relocate_error: 0.9}"
    ],
}


@pytest.mark.parametrize("strategy", sorted(STRATEGY_OVERRIDES))
def test_training_with_every_cuda_side_choice(monkeypatch, tmp_path: Path, strategy: str) -> None:
    """The trainer as on a GPU: gsplat's path, torch SSIM (CUDA's choice where triton is missing;
    the fused kernels are checked against it in tests/kernels), the fused Adam, pinned images
    (faked: pinning needs a CUDA runtime), densification and the end-of-run test and export."""
    from pointrix_lite import device_policy

    monkeypatch.setattr(device_policy, "ssim_backend", lambda device, loaded: "torch")
    monkeypatch.setattr(device_policy, "fused_adam", lambda devices: True)
    monkeypatch.setattr(device_policy, "pin_host_images", lambda device: True)
    pinned = []
    monkeypatch.setattr(torch.Tensor, "pin_memory", lambda t: pinned.append(t.shape) or t.clone())
    with emulate_gsplat_on_cpu():
        trainer = _short_run(tmp_path, "cpu", strategy)
    assert len(pinned) == len(trainer.dataset.train_views)


@needs_cuda
@pytest.mark.parametrize("strategy", sorted(STRATEGY_OVERRIDES))
def test_training_on_cuda(tmp_path: Path, strategy: str) -> None:  # pragma: no cover - no GPU in CI
    trainer = _short_run(tmp_path, "cuda", strategy)
    assert all(v.image.is_pinned() for v in trainer.dataset.train_views)
    assert trainer.model.params["means"].is_cuda


def _short_run(exp_dir: Path, device: str, strategy: str = "default"):
    """40 densifying steps of the demo at 40x40 on gsplat's path, then the test and the PLY."""
    from pointrix_lite.components import import_all
    from pointrix_lite.engine.experiment import load_experiment
    from pointrix_lite.engine.trainer import DefaultTrainer

    import_all()
    overrides = [
        f"exp_dir={exp_dir}",
        f"device={device}",
        "renderer.backend=gsplat",
        "writers=[]",
        "dataset.scale=4",
        "trainer.max_steps=40",
        "save_ckpt_after_iter=0",
        *STRATEGY_OVERRIDES[strategy],
    ]
    cfg = load_experiment(REPO / "configs" / "demo.yaml", overrides)
    trainer = DefaultTrainer(cfg, exp_dir, cfg.device)
    n_start = trainer.model.num_gaussians
    trainer.run()
    assert all(group.get("fused") is True for group in trainer.optimizer.param_groups)  # fused Adam, as on CUDA
    assert trainer.model.num_gaussians > n_start  # grown (DefaultStrategy: from gsplat's means2d gradients)
    if trainer.strategy.config.error_every:  # scored through gsplat, rows kept aligned through growth
        mass = trainer.strategy.state["err_mass"]
        assert mass.shape == (trainer.model.num_gaussians,) and mass.device == trainer.model.device
        assert torch.isfinite(mass).all() and trainer.strategy.error_views >= 0
    metrics = json.loads((exp_dir / "metrics.json").read_text())
    assert math.isfinite(metrics["mean"]["psnr"]) and math.isfinite(float(trainer.loss_dict["loss"]))
    assert (exp_dir / "point_cloud.ply").is_file()
    return trainer
