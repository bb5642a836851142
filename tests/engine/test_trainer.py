"""DefaultTrainer on the toy components: hook sites, ordering, losses, metrics, special hooks."""

from __future__ import annotations

import gc
import json

import imageio.v3 as iio
import numpy as np
import pytest
import torch

from pointrix_lite.engine.checkpoint import find_latest, load_checkpoint_file
from pointrix_lite.engine.hooks import SITES, Hook, NonFiniteLossError
from pointrix_lite.hook import Priority
from tests.engine.engine_helpers import make_trainer


class SiteRecorder(Hook):
    """Records every site call with its keyword arguments."""

    priority = Priority.LOWEST

    def __init__(self) -> None:
        super().__init__()
        self.events: list[tuple[str, dict]] = []
        self.losses: list[float] = []


def _recorder_site(site):
    def fn(self, **kwargs):
        self.events.append((site, kwargs))
        if site == "after_train_iter":
            self.losses.append(float(self.trainer.loss_dict["loss"]))

    return fn


for _site in SITES:
    setattr(SiteRecorder, _site, _recorder_site(_site))


def test_all_22_sites_fire_in_order_train_val_test(toy_config):
    # Run 1 stops at step 2 and saves; run 2 resumes from it, so after_load_checkpoint fires too.
    first = make_trainer(toy_config({"trainer": {"max_steps": 2, "val_interval": 0, "test_at_end": False}}))
    first.run()
    assert find_latest(first.exp_dir).name == "step_000002.pth"

    trainer = make_trainer(toy_config())  # max_steps 12, val every 6, checkpoint every 8
    rec = SiteRecorder()
    trainer.register_hook(rec)
    trainer.run(resume_from=find_latest(trainer.exp_dir))

    assert len(SITES) == 22
    names = [s for s, _ in rec.events]
    first_seen = list(dict.fromkeys(names))
    assert first_seen == list(SITES)  # every site called, first occurrences in the documented order
    assert names[0] == "before_run" and names[1] == "after_load_checkpoint" and names[-1] == "after_run"
    assert names.count("before_train_iter") == names.count("after_train_iter") == 10  # steps 3..12
    assert names.count("after_train_epoch") == 3  # rest of epoch 0 (2 steps), epochs 1 and 2
    assert names.count("after_val_epoch") == 2  # steps 6 and 12
    assert names.count("before_val_iter") == 4  # 2 val views x 2 validations
    assert names.count("after_test_iter") == 2
    assert names.count("before_save_checkpoint") == 2  # step 8 (interval), step 12 (end)

    kwargs = dict((s, k) for s, k in rec.events)  # last call of each site
    assert kwargs["after_load_checkpoint"]["checkpoint"]["step"] == 2
    assert kwargs["before_save_checkpoint"]["checkpoint"]["step"] == 12
    batch = kwargs["after_train_iter"]["batch"]
    assert isinstance(batch, list) and batch[0].name.startswith("train_")
    assert kwargs["after_val_epoch"]["metrics"].keys() == {"psnr", "mse", "lpips"}
    assert kwargs["after_test_epoch"]["metrics"]["lpips"] is None
    assert [k["batch_idx"] for s, k in rec.events if s == "before_test_iter"] == [0, 1]
    # the toy model fits its image: the loss must go down substantially
    assert rec.losses[-1] < 0.5 * rec.losses[0]


def test_loss_decreases_and_metrics_json_matches_saved_pngs(toy_config):
    cfg = toy_config({"trainer": {"max_steps": 40, "val_interval": 0}})
    trainer = make_trainer(cfg)
    losses = []

    class LossProbe(Hook):
        def after_train_iter(self, batch_idx, batch):
            losses.append(float(self.trainer.loss_dict["loss"]))

    trainer.register_hook(LossProbe())
    trainer.run()
    assert losses[-1] < 0.2 * losses[0]

    report = json.loads((trainer.exp_dir / "metrics.json").read_text())
    assert report["steps"] == 40 and report["num_gaussians"] == 64 and report["train_seconds"] > 0
    assert report["mean"]["lpips"] is None  # a None metric stays None, never a made-up number
    assert "LPIPS" in report["notes"]["lpips"]
    assert set(report["per_view"]) == {"test_000", "test_001"}
    # Independent check: PSNR from the PNGs on disk (8-bit quantised, so ~0.1 dB tolerance).
    for name, metrics in report["per_view"].items():
        render = iio.imread(trainer.exp_dir / "renders/test/render" / f"{name}.png").astype(np.float64) / 255
        gt = iio.imread(trainer.exp_dir / "renders/test/gt" / f"{name}.png").astype(np.float64) / 255
        psnr = -10 * np.log10(np.mean((render - gt) ** 2))
        assert psnr == pytest.approx(metrics["psnr"], abs=0.15)
        initial = -10 * np.log10(np.mean((0.5 - gt) ** 2))  # untrained model renders sigmoid(0) = 0.5
        assert psnr > initial + 5
    assert report["mean"]["psnr"] == pytest.approx(np.mean([m["psnr"] for m in report["per_view"].values()]))


def test_custom_site_and_unknown_site(toy_config):
    trainer = make_trainer(toy_config())
    seen = []

    class Densify(Hook):
        def after_densify(self, n_new):
            seen.append((self.name, n_new))

    class Other(Hook):
        priority = Priority.HIGH

        def after_densify(self, n_new):
            seen.append((self.name, n_new))

    trainer.register_hook(Densify())
    trainer.register_hook(Other())
    trainer.call_hook("after_densify", n_new=5)
    assert seen == [("Other", 5), ("Densify", 5)]  # HIGH (30) before NORMAL (50)
    trainer.call_hook("no_hook_has_this")  # nobody defines it: nothing happens


def test_type_error_in_hook_names_the_hook(toy_config):
    trainer = make_trainer(toy_config())

    class WrongSignatureHook(Hook):
        def after_train_iter(self):  # missing batch_idx, batch
            pass

    # Caught when the hook is registered, before anything runs (tests/hook/test_hook_signatures.py).
    with pytest.raises(TypeError, match=r"hook WrongSignatureHook: WrongSignatureHook.after_train_iter\(self\)"):
        trainer.register_hook(WrongSignatureHook())

    trainer = make_trainer(toy_config())

    class BuggyHook(Hook):
        def before_train(self):
            len(5)

    trainer.register_hook(BuggyHook())
    with pytest.raises(TypeError, match=r"hook BuggyHook .*'before_train'.*has no len"):
        trainer.run()


def test_hooks_hold_weak_reference(toy_config):
    trainer = make_trainer(toy_config())
    hook = trainer.hooks[0]
    assert hook.trainer is trainer
    del trainer
    gc.collect()
    with pytest.raises(RuntimeError, match="not attached to a live trainer"):
        _ = hook.trainer


def test_hook_table_lists_sites_in_execution_order(toy_config):
    trainer = make_trainer(toy_config({"hooks": [{"type": "NaNGuardHook"}, {"type": "ProfilerHook", "priority": 55}]}))
    table = trainer.hook_table()
    assert table.startswith("Hooks will be executed in the following order:")
    block = table.split("after_train_iter:\n")[1].split("---")[0].strip().splitlines()
    assert block == [
        "(VERY_HIGH   ) NaNGuardHook",
        "(NORMAL      ) IterTimerHook",
        "(55          ) ProfilerHook",
        "(BELOW_NORMAL) LogHook",
        "(VERY_LOW    ) CheckPointHook",
    ]
    assert "before_run:" not in table  # no hook implements it


def test_strategy_step_sequence(toy_config):
    trainer = make_trainer(
        toy_config(
            {"strategy": {"type": "ToyStrategy", "reg_weight": 0.5}, "trainer": {"max_steps": 3, "test_at_end": False}}
        )
    )
    strategy = trainer.strategy
    assert strategy.checked and strategy.max_steps == 3 and strategy.scene_extent == 1.0
    trainer.run()
    assert strategy.calls == [(c, s) for s in range(3) for c in ("extra_loss", "pre_backward", "post_backward")]
    assert strategy.grads_cleared == [True, True, True]
    loss = trainer.loss_dict
    assert float(loss["loss"]) == pytest.approx(float(loss["l2"] + loss["reg"]), rel=1e-6)


def test_nan_guard_stops_and_keeps_last_good_checkpoint(toy_config):
    cfg = toy_config(
        {
            "model": {"nan_at_step": 7},
            "trainer": {"max_steps": 12, "val_interval": 0},
            "hooks": [{"type": "NaNGuardHook"}, {"type": "CheckPointHook", "interval": 8}],
        },
        overrides=["hooks.1.interval=4"],
    )
    trainer = make_trainer(cfg)
    with pytest.raises(NonFiniteLossError, match=r"^step 7: non-finite loss \(loss=nan\); .*step_000004\.pth$"):
        trainer.run()
    latest = find_latest(trainer.exp_dir)
    assert latest.name == "step_000004.pth"
    assert torch.isfinite(load_checkpoint_file(latest)["model"]["params.means"]).all()
    assert not (trainer.exp_dir / "checkpoints" / "step_000008.pth").exists()


def test_profiler_hook_writes_chrome_trace(toy_config):
    trainer = make_trainer(
        toy_config(
            {
                "hooks": [{"type": "ProfilerHook", "start_step": 2, "num_steps": 2}],
                "trainer": {"max_steps": 5, "test_at_end": False, "val_interval": 0},
            }
        )
    )
    trainer.run()
    trace = trainer.exp_dir / "profile" / "trace_steps_2-3.json"
    events = json.loads(trace.read_text())["traceEvents"]
    assert any(e.get("name", "").startswith("aten::") for e in events)


def test_log_hook_bar_on_terminal_plain_lines_otherwise(toy_config, capsys):
    extra = {"trainer": {"max_steps": 8, "val_interval": 0, "test_at_end": False}}
    make_trainer(toy_config({**extra, "hooks": [{"type": "LogHook", "interval": 4, "force_terminal": False}]})).run()
    plain = capsys.readouterr().out
    assert [line.split(" |")[0] for line in plain.splitlines() if line.startswith("step ")] == ["step 4/8", "step 8/8"]

    trainer = make_trainer(toy_config({**extra, "hooks": [{"type": "LogHook", "interval": 4, "force_terminal": True}]}))
    trainer.run()
    bar = capsys.readouterr().out
    assert "step 4/8 |" not in bar  # no plain lines when the bar is shown
    assert "8/8" in bar and "GS 64" in bar and "lr " in bar


def test_training_steps_ask_for_depth_only_when_the_model_reads_it() -> None:
    """GaussianModel's loss reads no depth, so its steps render without it (a fourth blended channel
    saved; the same bits otherwise, tests/renderer/test_renderer_component.py); a model that reads
    depth, or that says nothing, keeps it, and a renderer without the flag is called as before."""
    from pointrix_lite.engine.loop import step_render_kw as _step_render_kw
    from pointrix_lite.model.gaussian_model import GaussianModel
    from pointrix_lite.renderer import GaussianRenderer

    class ReadsDepth(GaussianModel):
        train_depth = True

    def old_style_renderer(model, cameras, background):
        return {}

    gaussian = GaussianModel(GaussianModel.Config(init_num_points=8))
    assert _step_render_kw(gaussian, GaussianRenderer()) == {"depth": False}
    assert _step_render_kw(ReadsDepth(GaussianModel.Config(init_num_points=8)), GaussianRenderer()) == {}
    assert _step_render_kw(object(), GaussianRenderer()) == {}  # a model that does not say: depth as before
    assert _step_render_kw(gaussian, old_style_renderer) == {}
