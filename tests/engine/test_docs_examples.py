"""The plugin examples in docs/extending.md work as written."""

from __future__ import annotations

import csv
import re
from pathlib import Path

from pointrix_lite.cli.plugins import load_plugin
from tests.engine.engine_helpers import make_trainer

DOC = Path(__file__).resolve().parents[2] / "docs" / "extending.md"


def test_extending_md_hook_and_writer_examples(toy_config, tmp_path):
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)
    assert len(blocks) == 2
    for i, code in enumerate(blocks):
        path = tmp_path / f"doc_example_{i}.py"
        path.write_text(code)
        load_plugin(path)
    cfg = toy_config(
        {
            "hooks": [{"type": "GaussianCountHook", "interval": 4, "priority": "LOW"}],
            "writers": [{"type": "CsvWriter", "filename": "losses.csv"}],
            "trainer": {"max_steps": 8, "val_interval": 0},
        }
    )
    trainer = make_trainer(cfg)
    trainer.run()
    rows = list(csv.reader((trainer.exp_dir / "losses.csv").open()))
    assert [r for r in rows if r[1] == "train/gaussians"] == [
        ["4", "train/gaussians", "64.0"],
        ["8", "train/gaussians", "64.0"],
    ]
    hook = next(h for h in trainer.hooks if h.name == "GaussianCountHook")
    assert hook.peak == 64 and hook.priority == 70
