"""The engine's seam: loop.py and run.py drive any object with the LoopTrainer protocol (here a double
with a one-parameter model, not a DefaultTrainer), the protocols declare what their users really use,
and nothing outside the trainer's own classes touches its private attributes."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from pointrix_lite.engine import checkpoint as ckpt_io
from pointrix_lite.engine import loop
from pointrix_lite.engine.end_phases import EndPhases
from pointrix_lite.engine.run import TrainingInterrupted, run
from pointrix_lite.engine.state import LoopTrainer, RunState, StateAttributes
from pointrix_lite.hook.base import TrainerLike

PACKAGE = Path(__file__).resolve().parents[2] / "pointrix_lite"
# The trainer's own classes: the only modules that may use its private names.
TRAINER_MODULES = {"engine/trainer.py", "engine/evaluator.py", "engine/state.py"}


def protocol_members(proto: type) -> set[str]:
    """The attributes and methods a Protocol declares."""
    methods = {n for n, v in vars(proto).items() if not n.startswith("_") and callable(v)}
    return set(proto.__annotations__) | methods


class TinyModel(torch.nn.Module):
    """One parameter pulled towards 1 by its loss; no depth in its loss (as GaussianModel)."""

    train_depth = False

    def __init__(self) -> None:
        super().__init__()
        self.x = torch.nn.Parameter(torch.zeros(3))

    def get_loss_dict(self, render_out: dict, batch: list) -> dict[str, Any]:
        return {"loss": ((render_out["rgb"] - 1.0) ** 2).mean(), "n_views": len(batch)}


class DoubleTrainer(StateAttributes):
    """Every LoopTrainer member, and nothing of DefaultTrainer's: records what the loop and run do.

    ``stop_at``: the step after which a first Ctrl-C is simulated; ``interrupt``: an end phase
    (``test`` or ``report``) a Ctrl-C cuts short.
    """

    def __init__(
        self,
        exp_dir: Path,
        max_steps: int = 3,
        views: tuple[str, ...] = ("a", "b"),
        stop_at: int | None = None,
        interrupt: str | None = None,
        resume: str | None = None,
    ) -> None:
        self.cfg = SimpleNamespace(
            trainer=SimpleNamespace(max_steps=max_steps, val_interval=2, test_at_end=True, random_background=False),
            seed=0,
            load_ckpt_before_run=resume,
        )
        self.state = RunState()
        self.model = TinyModel()
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.25)
        self.strategy = None
        self.render_kwargs: list[dict] = []
        self.dataset = SimpleNamespace(background=(0.0, 0.0, 0.0))
        batches = [[SimpleNamespace(camera=f"cam_{v}", name=v)] for v in views]
        self.datapipeline = SimpleNamespace(batches_for_epoch=lambda epoch: list(batches))
        self.device = torch.device("cpu")
        self.exp_dir = exp_dir
        self.is_main_process = True
        self.lines: list[str] = []
        self.console = SimpleNamespace(print=lambda line, **kw: self.lines.append(line))
        self.writer = SimpleNamespace(closed=False)
        self.writer.close = lambda: setattr(self.writer, "closed", True)
        self.end_phases = EndPhases(exp_dir, write=False)
        self.step_render_kw = loop.step_render_kw(self.model, self.renderer)
        self.loss_dict: dict[str, Any] = {}
        self.render_out: dict[str, Any] = {}
        self.calls: list[str] = []
        self.stop_at, self.interrupt = stop_at, interrupt

    def renderer(self, model: TinyModel, cameras: list, background: Any, depth: bool = True) -> dict:
        self.render_kwargs.append({"depth": depth})
        return {"rgb": model.x.expand(len(cameras), 3)}

    def call_hook(self, site: str, **kwargs: Any) -> None:
        self.calls.append(site if "batch" not in kwargs else f"{site}:{kwargs['batch'][0].name}")

    def hook_table(self) -> str:
        return "hooks: (a double)"

    def announce(self, line: str) -> None:
        self.lines.append(line)

    def train_loop(self) -> None:
        loop.train_loop(self)  # type: ignore[arg-type]  (a structural match, checked by protocol_members)

    def train_step(self, batch: list) -> dict[str, Any]:
        self.calls.append(f"step:{batch[0].name}")
        losses = loop.train_step(self, batch)  # type: ignore[arg-type]
        if self.stop_at is not None and self.state.step + 1 == self.stop_at:
            self.state.stop_requested = True  # what the first Ctrl-C sets
        return losses

    def validation(self) -> None:
        self.calls.append(f"val@{self.state.step}")

    def _phase_output(self, name: str, file: str) -> None:
        self.calls.append(name)
        if self.interrupt == name:
            raise KeyboardInterrupt
        (self.exp_dir / file).write_text(name)

    def test(self) -> None:
        self._phase_output("test", "metrics.json")

    def write_report(self) -> None:
        self._phase_output("report", "report.html")

    def save_checkpoint(self, filename: str | None = None, update_latest: bool = True) -> Path:
        filename = filename or ckpt_io.checkpoint_name(self.global_step)
        path = self.exp_dir / ckpt_io.CHECKPOINT_DIR / filename
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"step": self.global_step, "epoch": self.epoch}))
        if update_latest:
            ckpt_io.write_latest_pointer(path.parent, filename)
        return path

    def load_checkpoint(self, path: str | Path) -> dict[str, Any]:
        ckpt = json.loads(Path(path).read_text())
        self.global_step, self.epoch = ckpt["step"], ckpt["epoch"]
        self.calls.append("load")
        return ckpt


def test_the_double_has_every_member_of_the_protocol_and_no_trainer_base(tmp_path):
    t = DoubleTrainer(tmp_path)
    assert [n for n in protocol_members(LoopTrainer) if not hasattr(t, n)] == []
    assert not any(c.__name__ in ("DefaultTrainer", "Evaluator") for c in type(t).__mro__)


def test_the_loop_drives_a_double_through_the_protocol(tmp_path):
    t = DoubleTrainer(tmp_path, max_steps=3)
    losses = [t.train_step([SimpleNamespace(camera="probe", name="probe")])["loss"].item()]
    t.calls.clear()
    t.train_loop()
    assert t.calls == [
        "before_train",
        "before_train_epoch",
        "before_train_iter:a",
        "step:a",
        "after_train_iter:a",
        "before_train_iter:b",
        "step:b",
        "after_train_iter:b",
        "val@2",
        "after_train_epoch",
        "before_train_epoch",
        "before_train_iter:a",
        "step:a",
        "after_train_iter:a",
        "after_train_epoch",
        "after_train",
    ]
    assert (t.state.step, t.state.epoch, t.state.phase) == (3, 1, "export") and t.state.train_seconds > 0
    assert (t.global_step, t.epoch, t.train_seconds) == (3, 1, t.state.train_seconds)  # one state behind both
    # Real steps on the double's model: the optimizer moved it, the loss fell, loss_dict holds no graph.
    assert t.loss_dict["loss"].item() < losses[0] and not t.loss_dict["loss"].requires_grad
    assert t.loss_dict["n_views"] == 1 and t.render_out["views"][0].name == "a"
    assert t.render_kwargs[1:] == [{"depth": False}] * 3  # the model's loss reads no depth


def test_a_stop_request_in_the_state_ends_the_loop_after_that_step(tmp_path):
    t = DoubleTrainer(tmp_path, max_steps=10, stop_at=2)
    with pytest.raises(KeyboardInterrupt):
        t.train_loop()
    assert t.state.step == 2 and "after_train" not in t.calls and t.state.phase == "training"


def test_run_trains_then_records_each_end_phase(tmp_path):
    t = DoubleTrainer(tmp_path)
    run(t)  # type: ignore[arg-type]
    assert t.lines[0] == "hooks: (a double)" and t.writer.closed
    assert t.calls[0] == "before_run" and t.calls[-4:] == ["after_train", "test", "report", "after_run"]
    record = json.loads((tmp_path / "end_phases.json").read_text())
    assert record["step"] == 3 and list(record["phases"]) == ["export", "test", "report"]
    assert record["phases"]["test"]["files"] == ["metrics.json"]
    assert t.state.phase == "report"


def test_a_ctrl_c_in_training_saves_the_step_and_names_training(tmp_path):
    t = DoubleTrainer(tmp_path, max_steps=10, stop_at=2)
    with pytest.raises(TrainingInterrupted) as info:
        run(t)  # type: ignore[arg-type]
    assert (info.value.step, info.value.phase) == (2, "training") and t.writer.closed
    assert info.value.checkpoint == tmp_path / "checkpoints" / "step_000002.pth"
    assert json.loads(info.value.checkpoint.read_text())["step"] == 2


def test_a_ctrl_c_in_an_end_phase_names_it_and_a_resume_redoes_only_what_is_left(tmp_path):
    t = DoubleTrainer(tmp_path, interrupt="test")
    with pytest.raises(TrainingInterrupted, match=r"during test \(training finished at step 3\)") as info:
        run(t)  # type: ignore[arg-type]
    assert (info.value.step, info.value.phase) == (3, "test")
    assert not (tmp_path / "metrics.json").exists()

    again = DoubleTrainer(tmp_path, resume=str(info.value.checkpoint))
    run(again)  # type: ignore[arg-type]
    # Training and the export are done at step 3: only the test and the report run.
    assert again.calls == ["before_run", "load", "test", "report", "after_run"]
    assert any(line.startswith("export: done at step 3 before this resume") for line in again.lines)
    assert (tmp_path / "metrics.json").read_text() == "test" and again.state.phase == "report"


def _loop_and_run_reads() -> set[str]:
    """Every attribute loop.py and run.py take from a ``trainer``."""
    found = set()
    for name in ("loop.py", "run.py"):
        for node in ast.walk(ast.parse((PACKAGE / "engine" / name).read_text())):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "trainer":
                found.add(node.attr)
    return found


def test_loop_trainer_declares_exactly_what_loop_and_run_use():
    assert _loop_and_run_reads() == protocol_members(LoopTrainer)


def _hook_reads() -> tuple[set[str], set[str], int]:
    """Attributes the package's hooks read from their trainer: ``(required, optional, hook classes)``.

    The trainer is ``self.trainer``, a name bound to it (``t = self.trainer``) or a parameter named
    ``trainer``; ``getattr(trainer, "x", default)`` is an optional read.
    """
    required, optional, n_classes = set(), set(), 0
    for path in PACKAGE.rglob("*.py"):
        for cls in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(cls, ast.ClassDef) and any(ast.unparse(b) == "Hook" for b in cls.bases)):
                continue
            n_classes += 1
            names = {"trainer"}
            for node in ast.walk(cls):
                if isinstance(node, (ast.Assign, ast.NamedExpr)) and ast.unparse(node.value) == "self.trainer":
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    names |= {t.id for t in targets if isinstance(t, ast.Name)}

            def is_trainer(node: ast.AST, names: set[str] = names) -> bool:
                return ast.unparse(node) == "self.trainer" or (isinstance(node, ast.Name) and node.id in names)

            for node in ast.walk(cls):
                if isinstance(node, ast.Attribute) and is_trainer(node.value):
                    required.add(node.attr)
                elif isinstance(node, ast.Call) and ast.unparse(node.func) == "getattr" and is_trainer(node.args[0]):
                    name = node.args[1]
                    assert isinstance(name, ast.Constant), f"{path}: getattr of the trainer by a computed name"
                    (optional if len(node.args) > 2 else required).add(name.value)
    return required, optional, n_classes


def test_trainer_like_declares_what_the_hooks_read_and_the_trainer_has_it(toy_config):
    from pointrix_lite.engine.trainer import DefaultTrainer

    required, optional, n_classes = _hook_reads()
    assert n_classes >= 10  # the walk found the hooks (CheckPointHook ... ViewerHook)
    assert required - protocol_members(TrainerLike) == set()
    assert {"optimizer", "state"} <= optional  # LogHook and ViewerHook read these only if present

    trainer = DefaultTrainer(toy_config(), toy_config().exp_dir, "cpu")
    for proto in (TrainerLike, LoopTrainer):
        assert [n for n in protocol_members(proto) if not hasattr(trainer, n)] == [], proto.__name__
    trainer.global_step = 5
    assert trainer.state.step == 5  # one state: the property and the RunState agree


def _private_uses(path: Path) -> list[str]:
    """``x._name`` (and getattr/setattr/hasattr of ``"_name"``) where ``x`` is a trainer: a name
    ``trainer``, ``<anything>.trainer``, or a name bound to one of those."""
    tree = ast.parse(path.read_text())

    def is_trainer(node: ast.AST, aliases: set[str]) -> bool:
        if isinstance(node, ast.Name):
            return node.id == "trainer" or node.id in aliases
        return isinstance(node, ast.Attribute) and node.attr == "trainer"

    aliases = {
        t.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and is_trainer(node.value, set())
        for t in node.targets
        if isinstance(t, ast.Name)
    }
    found = []
    for node in ast.walk(tree):
        name = None
        if isinstance(node, ast.Attribute) and is_trainer(node.value, aliases):
            name = node.attr
        elif (
            isinstance(node, ast.Call)
            and ast.unparse(node.func) in ("getattr", "setattr", "hasattr")
            and len(node.args) > 1
            and is_trainer(node.args[0], aliases)
            and isinstance(node.args[1], ast.Constant)
        ):
            name = str(node.args[1].value)
        if name and name.startswith("_") and not name.startswith("__"):
            found.append(f"{path.name}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_module_outside_the_trainer_touches_its_private_names(tmp_path):
    planted = tmp_path / "pointrix_lite" / "planted.py"
    planted.parent.mkdir()
    planted.write_text("t = self.trainer\nt._phase = 1\ngetattr(trainer, '_announce')\nhook.trainer._x\n")
    assert len(_private_uses(planted)) == 3  # the check sees an alias, getattr and hook.trainer

    offenders = [
        line
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.relative_to(PACKAGE).as_posix() not in TRAINER_MODULES
        for line in _private_uses(path)
    ]
    assert offenders == []
