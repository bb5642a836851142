"""Typed config end to end, hook dispatch and evaluation without a trainer (issue 46).

- each section is checked once, into its class's Config, and the component receives that object;
- the resolved config still writes the same config.yaml and reloads to itself;
- hooks are ordered as a stable sort would, each class's sites checked once;
- an Evaluator scores a checkpoint without an optimizer or strategy, with training's numbers.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from pointrix_lite.cli.common import open_experiment
from pointrix_lite.config import OptionError
from pointrix_lite.engine.evaluator import Evaluator
from pointrix_lite.engine.experiment import dump_config, load_experiment, save_config
from pointrix_lite.engine.hook_list import HookList
from pointrix_lite.engine.hooks import Hook
from pointrix_lite.engine.hooks import resolve as hook_resolve
from pointrix_lite.registry import MODELS, Component
from tests.engine.engine_helpers import make_trainer, toy_raw_config


def test_each_section_is_checked_once_and_the_component_gets_that_object(tmp_path: Path) -> None:
    cfg = load_experiment(None, data=toy_raw_config(tmp_path))
    assert isinstance(cfg.model, Component) and isinstance(cfg.dataset, Component)
    assert all(isinstance(h, Component) for h in cfg.hooks)
    trainer = make_trainer(cfg)
    # The very Config objects the config loaded into: nothing was converted back and forth.
    assert trainer.model.config is cfg.model.config
    log_hook = next(h for h in trainer.hooks if h.name == "LogHook")
    entry = next(h for h in cfg.hooks if h["type"] == "LogHook")
    assert log_hook.config is entry.config and entry["interval"] == 4


def test_resolved_config_writes_the_same_yaml_and_reloads_to_itself(tmp_path: Path) -> None:
    cfg = load_experiment(None, data=toy_raw_config(tmp_path))
    text = dump_config(cfg)
    data = yaml.safe_load(text)
    assert data["model"]["type"] == "ToyModel" and list(data["hooks"][0])[:3] == ["type", "priority", "enabled"]
    (tmp_path / "c.yaml").write_text(text)
    again = load_experiment(tmp_path / "c.yaml")
    assert dump_config(again) == text
    assert again.model == cfg.model and again.hooks == cfg.hooks  # Components compare as their mappings


def test_replacing_an_option_is_checked_by_the_config_as_at_load() -> None:
    from pointrix_lite.components import import_all

    import_all()
    renderer = load_experiment(None, data={"dataset": {"type": "ColmapDataset", "data_path": "x"}}).renderer
    assert renderer.replace(backend="torch")["backend"] == "torch" and renderer["backend"] == "auto"
    with pytest.raises(OptionError, match="tile_size"):
        renderer.replace(tile_size=0)
    with pytest.raises(Exception, match="no option"):
        renderer.replace(tile=16)
    # A plain mapping still builds (a component written in Python), checked on the way.
    assert MODELS.build({"type": "GaussianModel", "sh_degree": 0}, "model").config.sh_degree == 0


class _Probe(Hook):
    def __init__(self, tag: str, priority: int, log: list[str]) -> None:
        self.tag, self.priority, self.log = tag, priority, log

    @property
    def name(self) -> str:
        return f"Probe{self.tag}"

    def before_train(self) -> None:
        self.log.append(self.tag)


def test_hooks_run_in_stable_priority_order_and_one_added_mid_site_waits(tmp_path: Path) -> None:
    log: list[str] = []

    class Owner:
        pass

    owner = Owner()
    hooks = HookList(owner)
    added_late = _Probe("late", 0, log)

    class Adder(_Probe):
        def before_train(self) -> None:
            super().before_train()
            hooks.add(added_late)

    specs = [("a", 50), ("b", 10), ("c", 50), ("d", 90), ("e", 10)]
    for tag, priority in specs:
        hooks.add(_Probe(tag, priority, log))
    hooks.add(Adder("adder", 50, log))
    hooks.call("before_train")
    # sorted() by priority is stable: what adding one by one must give.
    assert log == [t for t, _ in sorted([*specs, ("adder", 50)], key=lambda s: s[1])]
    assert added_late.trainer is owner
    log.clear()
    hooks.call("before_train")
    assert log[0] == "late"  # the hook added during the site runs from the next call on


def test_each_hook_class_is_checked_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[type] = []
    real = hook_resolve.check_hook_class
    monkeypatch.setattr(hook_resolve, "check_hook_class", lambda cls, where: (seen.append(cls), real(cls, where)))
    monkeypatch.setattr(hook_resolve, "_CHECKED", type(hook_resolve._CHECKED)())
    cfg = load_experiment(None, data=toy_raw_config(tmp_path))
    make_trainer(cfg)
    assert len(seen) == len(set(seen)) == len(cfg.hooks)


def test_an_evaluator_scores_a_checkpoint_without_optimizer_or_strategy(tmp_path: Path) -> None:
    raw = toy_raw_config(tmp_path)
    raw["strategy"] = {"type": "ToyStrategy"}
    cfg = load_experiment(None, data=raw)
    save_config(cfg, cfg.exp_dir)  # what train.py writes beside the checkpoints
    make_trainer(cfg).run()
    trained = json.loads((Path(cfg.exp_dir) / "metrics.json").read_text())
    evaluator = open_experiment(Path(cfg.exp_dir), out=tmp_path / "again")
    assert type(evaluator) is Evaluator
    assert not hasattr(evaluator, "optimizer") and not hasattr(evaluator, "strategy")
    assert [h.name for h in evaluator.hooks] == ["LogHook"]
    report = evaluator.test()
    assert report["steps"] == trained["steps"] == 12
    assert report["mean"] == trained["mean"] and report["per_view"] == trained["per_view"]
    assert report["train_seconds"] == trained["train_seconds"]
