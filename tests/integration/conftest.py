"""One short training run on the demo scene, shared by every integration test (session-scoped)."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from pointrix_lite.cli.train import main as train_main

REPO = Path(__file__).resolve().parents[2]
DEMO_DATA = REPO / "data" / "demo" / "nerf_synthetic"  # generated on first use by the data loader
SCALE = 2  # 80x80 images: the short run stays a few seconds
MAX_STEPS = 300

# configs/demo.yaml with a schedule that fits 300 steps: densify from step 50 to 250 every 25
# steps, no opacity reset (it would land mid-run and cost PSNR that a 300-step run can't regain).
SHORT_RUN = [
    f"trainer.max_steps={MAX_STEPS}",
    "trainer.val_interval=150",
    f"dataset.scale={SCALE}",
    "strategy.steps_scaler=1.0",
    "strategy.refine_start_iter=50",
    "strategy.refine_every=25",
    "strategy.refine_stop_iter=250",
    "strategy.reset_every=100000",
    "strategy.grow_grad2d=0.0002",
    "save_ckpt_after_iter=150",
    "log_show_after_iter=50",
]


def demo_overrides(exp_dir: Path, *extra: str) -> list[str]:
    return [f"exp_dir={exp_dir}", f"dataset.data_path={DEMO_DATA}", *SHORT_RUN, *extra]


class TrainedRun:
    """A finished demo run: its folder, metrics.json and what train.py printed."""

    def __init__(self, exp_dir: Path, stdout: str) -> None:
        self.exp_dir = exp_dir
        self.stdout = stdout
        self.metrics = json.loads((exp_dir / "metrics.json").read_text())


@pytest.fixture(scope="session")  # one training run for every test module here
def trained_run(tmp_path_factory: pytest.TempPathFactory) -> TrainedRun:
    exp_dir = tmp_path_factory.mktemp("demo_run") / "exp"
    out = io.StringIO()
    with redirect_stdout(out):
        code = train_main(["--config", str(REPO / "configs" / "demo.yaml"), *demo_overrides(exp_dir)])
    assert code == 0, out.getvalue()[-2000:]
    return TrainedRun(exp_dir, out.getvalue())
