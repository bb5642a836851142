"""Hostile configs end fast in one short line: a YAML alias bomb, a 20 MB value, an oversized file; libyaml's safe
loader is the one used where it is installed. Real files through scripts/train.py."""

from __future__ import annotations

import time

import yaml

from pointrix_lite.engine import experiment
from pointrix_lite.errors import ConfigError, brief

from .cli_helpers import run_train, write_config
from .scene import real_raw_config

BOMB = "\n".join(
    ['a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    + [f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]" for i in range(8)]
)  # 9 levels of 9: 387 million strings from ~400 bytes


def _short_exit(proc) -> str:
    assert proc.returncode == 2, proc.stderr[-500:]
    (line,) = proc.stderr.strip().splitlines()
    assert len(line) < 300, len(line)
    return line


def test_an_alias_bomb_is_refused_in_one_short_line(tmp_path, tiny_scene):
    raw = real_raw_config(tmp_path / "out", tiny_scene, "torch", max_steps=1)
    config = tmp_path / "bomb.yaml"
    raw.pop("name")
    config.write_text(yaml.safe_dump(raw) + BOMB + "\nname: *i\n")
    assert len(BOMB) < 500
    start = time.perf_counter()
    line = _short_exit(run_train("--config", str(config)))
    assert time.perf_counter() - start < 60
    assert line == f"error: {config}: expands to more than 100,000 values (YAML aliases repeating aliases?)"


def test_a_100_kb_value_and_a_20_mb_file(tmp_path, tiny_scene):
    raw = real_raw_config(tmp_path / "out", tiny_scene, "torch", max_steps=1)
    config = write_config(tmp_path / "run.yaml", raw)
    line = _short_exit(run_train("--config", str(config), "trainer.max_steps=" + "9x" * 50_000))
    assert line.startswith("error: trainer.max_steps: expected an integer, got '9x9x") and "..." in line
    big = tmp_path / "big.yaml"
    big.write_text(yaml.safe_dump({**raw, "name": "n" * (20 << 20)}))
    line = _short_exit(run_train("--config", str(big)))
    assert line == f"error: {big}: {big.stat().st_size:,} bytes; a config is at most 1,048,576 (is it the right file?)"


def test_brief_quotes_small_values_whole_and_cuts_big_ones():
    assert brief("many") == "'many'" and brief([1, 2]) == "[1, 2]"
    nested: list = ["x" * 10]
    for _ in range(30):
        nested = [nested] * 9  # shared: expanding it whole would never end
    assert len(brief(nested)) < 200 and len(brief("y" * 10**7)) < 200
    assert len(str(ConfigError("z" * 10**6))) < 1100


def test_libyaml_is_the_loader_where_installed():
    if hasattr(yaml, "CSafeLoader"):
        assert issubclass(experiment._StrictLoader, yaml.CSafeLoader)
    assert issubclass(experiment._StrictLoader, yaml.constructor.SafeConstructor)
