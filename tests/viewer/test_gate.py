"""Training steps and renders never overlap; renders take at most their share; pause stops training."""

from __future__ import annotations

import threading
import time

import pytest

from pointrix_lite.viewer.gate import RenderGate


class FakeTrainer:
    """Steps of ``step_s`` seconds through the gate, recording any overlap with a render."""

    def __init__(self, gate: RenderGate, step_s: float) -> None:
        self.gate, self.step_s = gate, step_s
        self.steps = 0
        self.busy = False
        self.overlaps = 0
        self.stop = threading.Event()

    def run(self, inside: dict) -> None:
        while not self.stop.is_set():
            with self.gate.training_step():
                inside["train"] = True
                self.overlaps += inside.get("render", False)
                time.sleep(self.step_s)
                inside["train"] = False
            self.steps += 1
            self.gate.wait_while_paused(self.stop.is_set, poll_s=0.01)


def run_for(gate: RenderGate, seconds: float, step_s: float, render_s: float) -> tuple[FakeTrainer, int, int]:
    inside: dict = {}
    trainer = FakeTrainer(gate, step_s)
    renders, overlaps = 0, 0
    gate.training = True
    thread = threading.Thread(target=trainer.run, args=(inside,))
    thread.start()
    deadline = time.perf_counter() + seconds
    try:
        while time.perf_counter() < deadline:
            with gate.render():
                inside["render"] = True
                overlaps += inside.get("train", False)
                time.sleep(render_s)
                inside["render"] = False
            renders += 1
    finally:
        trainer.stop.set()
        thread.join(5)
    return trainer, renders, overlaps + trainer.overlaps


@pytest.mark.parametrize("share", [0.1, 0.3])
def test_renders_never_overlap_steps_and_keep_to_their_share(share):
    gate = RenderGate(share)
    start = time.perf_counter()
    trainer, renders, overlaps = run_for(gate, 1.5, step_s=0.005, render_s=0.02)
    wall = time.perf_counter() - start
    assert overlaps == 0
    assert renders >= 3 and trainer.steps >= 20  # neither side starves
    assert gate.render_seconds / wall <= share + 0.05
    # the cap is what limits the viewer: it gets most of its share, not much less
    assert gate.render_seconds / wall >= share * 0.5


def test_viewer_renders_freely_when_training_is_not_running():
    gate = RenderGate(0.1)
    start = time.perf_counter()
    for _ in range(10):
        with gate.render():
            time.sleep(0.01)
    assert time.perf_counter() - start < 0.5  # no time-share waits (0.9 s at a 10 % share)


def test_pause_stops_steps_and_lifts_the_render_cap():
    gate = RenderGate(0.1)
    inside: dict = {}
    trainer = FakeTrainer(gate, 0.002)
    gate.training = True
    thread = threading.Thread(target=trainer.run, args=(inside,))
    thread.start()
    try:
        time.sleep(0.1)
        gate.set_paused(True)
        time.sleep(0.1)
        paused_at = trainer.steps
        start = time.perf_counter()
        for _ in range(10):  # paused: renders are not throttled to 10 %
            with gate.render():
                time.sleep(0.01)
        assert time.perf_counter() - start < 0.5
        assert trainer.steps == paused_at  # no step while paused
        gate.set_paused(False)
        time.sleep(0.1)
        assert trainer.steps > paused_at
    finally:
        trainer.stop.set()
        thread.join(5)


def test_share_must_be_a_fraction():
    with pytest.raises(ValueError, match="share"):
        RenderGate(0.0)
