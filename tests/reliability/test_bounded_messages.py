"""Hostile configs end fast in one short line: a YAML alias bomb, a 20 MB value, an oversized file; libyaml's safe
loader is the one used where it is installed. Real files through scripts/train.py."""

from __future__ import annotations

import time

import pytest
import yaml

from pointrix_lite.cli.common import OneLineErrorParser
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
    raw.pop("name")
    big.write_text(yaml.safe_dump(raw) + "name: " + "n" * (20 << 20) + "\n")  # written whole: safe_dump takes 20 s
    line = _short_exit(run_train("--config", str(big)))
    assert line == f"error: {big}: {big.stat().st_size:,} bytes; a config is at most 1,048,576 (is it the right file?)"


def test_brief_quotes_small_values_whole_and_cuts_big_ones():
    assert brief("many") == "'many'" and brief([1, 2]) == "[1, 2]"
    nested: list = ["x" * 10]
    for _ in range(30):
        nested = [nested] * 9  # shared: expanding it whole would never end
    assert len(brief(nested)) < 200 and len(brief("y" * 10**7)) < 200
    # a cut value says how long it was: a typo and a value of megabytes read differently
    assert brief("y" * 10**7).endswith("yyy' (10,000,000 characters)") and brief(list(range(50))).endswith(
        ", ...] (50 items)"
    )
    assert len(str(ConfigError("z" * 10**6))) < 1100


def test_libyaml_is_the_loader_where_installed():
    if hasattr(yaml, "CSafeLoader"):
        assert issubclass(experiment._StrictLoader, yaml.CSafeLoader)
    assert issubclass(experiment._StrictLoader, yaml.constructor.SafeConstructor)


def test_merge_keys_merging_merges_stop_early(tmp_path, tiny_scene):
    """`<<:` copies the merged mapping's pairs: a chain of 8000 merges (300 KB) copies 32 million pairs, minutes
    and gigabytes; the loader counts the pairs before it copies them and stops at the same limit as aliases."""
    raw = real_raw_config(tmp_path / "out", tiny_scene, "torch", max_steps=1)
    chain = ["l0: &l0 {k0: 1}"] + [f"l{i}: &l{i} {{<<: *l{i - 1}, k{i}: 1}}" for i in range(1, 8000)]
    config = tmp_path / "merges.yaml"
    config.write_text(yaml.safe_dump(raw) + "x:\n" + "".join(f"  {line}\n" for line in chain))
    start = time.perf_counter()
    line = _short_exit(run_train("--config", str(config), timeout=60))
    assert time.perf_counter() - start < 30
    assert line == f"error: {config}: expands to more than 100,000 values (YAML aliases repeating aliases?)"
    # a few merges, as configs use them, load as before (later keys override the merged ones)
    config.write_text("base: &base {a: 1, b: 2}\nrun: {<<: *base, b: 3}\nself: &s {c: 1, <<: *s}\n")
    assert experiment.read_yaml(config) == {"base": {"a": 1, "b": 2}, "run": {"a": 1, "b": 3}, "self": {"c": 1}}


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("9" * 5000, "Exceeds the limit (4300 digits) for integer string conversion: value has 5000 digits"),
        ("2001-13-01", "month must be in 1..12"),
    ],
)
def test_a_value_yaml_cannot_convert_is_one_line_with_its_line(tmp_path, value, why):
    """YAML reads these as an integer and a date; Python refuses them with a ValueError (was a traceback)."""
    config = tmp_path / "c.yaml"
    config.write_text(f"name: x\nseed: {value}\n")
    with pytest.raises(ConfigError) as info:
        experiment.read_yaml(config)
    message = str(info.value)
    assert message.startswith(f"{config}:2: invalid YAML (cannot read '") and message.endswith(f"' ({why}))")
    assert len(message) < 250 + len(str(config))


def test_argument_errors_and_unknown_keys_quote_a_cut_value(tmp_path, capsys):
    parser = OneLineErrorParser(prog="train.py")
    parser.add_argument("--steps", type=int)
    with pytest.raises(SystemExit) as info:
        parser.parse_args(["--steps", "x" * 100_000])
    (line,) = capsys.readouterr().err.splitlines()
    assert info.value.code == 2 and len(line) < 400 and "(100,0" in line and line.endswith("(see --help)")
    config = tmp_path / "c.yaml"
    config.write_text(f"name: x\ntrainer: {{{'k' * 1000}: 1}}\n")
    with pytest.raises(
        ConfigError, match=r"^trainer\.kkkk.* \(1,000 characters\) .*k: unknown key; valid keys: "
    ) as err:
        experiment.load_experiment(config)
    assert len(str(err.value)) < 1000
