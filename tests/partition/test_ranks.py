"""Which blocks a process trains, and the environment its train.py child gets."""

from __future__ import annotations

from pathlib import Path

import pytest

from pointrix_lite.cli import merge_blocks, partition, train_blocks
from pointrix_lite.errors import ConfigError
from pointrix_lite.partition.ranks import find_placement, threads_per_process
from pointrix_lite.partition.runner import RANK_VARIABLES, BlockJob, child_env, failure_reason, train_command

TORCHRUN = {
    "RANK": "3",
    "WORLD_SIZE": "4",
    "LOCAL_RANK": "1",
    "LOCAL_WORLD_SIZE": "2",
    "MASTER_ADDR": "h",
    "MASTER_PORT": "29500",
    "GROUP_RANK": "1",
    "TORCHELASTIC_RUN_ID": "x",
}


@pytest.fixture
def clean_env(monkeypatch):
    for name in [
        *TORCHRUN,
        "SLURM_ARRAY_TASK_ID",
        "SLURM_ARRAY_TASK_COUNT",
        "SLURM_ARRAY_TASK_MIN",
        "CUDA_VISIBLE_DEVICES",
    ]:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_rank_comes_from_flags_then_torchrun_then_a_slurm_array(clean_env):
    assert (find_placement(None, None).rank, find_placement(None, None).world) == (0, 1)
    for k, v in TORCHRUN.items():
        clean_env.setenv(k, v)
    p = find_placement(None, None)
    assert (p.rank, p.world, p.local_rank, p.local_world, p.source) == (3, 4, 1, 2, "torchrun")
    assert find_placement(1, 5).source == "flags"
    for k in TORCHRUN:
        clean_env.delenv(k)
    clean_env.setenv("SLURM_ARRAY_TASK_ID", "7")
    clean_env.setenv("SLURM_ARRAY_TASK_MIN", "5")
    clean_env.setenv("SLURM_ARRAY_TASK_COUNT", "4")
    assert (find_placement(None, None).rank, find_placement(None, None).world) == (2, 4)
    with pytest.raises(ConfigError, match="rank 2 is not in 0..1"):
        find_placement(None, 2)
    with pytest.raises(ConfigError, match="--rank and --world-size go together"):
        find_placement(1, None)


def test_child_leaves_the_torchrun_job_and_shares_the_cores(clean_env):
    for k, v in TORCHRUN.items():
        clean_env.setenv(k, v)
    clean_env.setenv("CUDA_VISIBLE_DEVICES", "4,5")
    env = child_env(threads=3, local_rank=1)
    assert not set(RANK_VARIABLES) & env.keys() and "TORCHELASTIC_RUN_ID" not in env
    assert env["OMP_NUM_THREADS"] == "3" and env["CUDA_VISIBLE_DEVICES"] == "5"
    assert threads_per_process(2, None) >= 1 and threads_per_process(2, 5) == 5


def test_block_settings_come_after_the_users_overrides(tmp_path):
    job = BlockJob("block_001", tmp_path / "b1", tmp_path / "runs" / "block_001", tmp_path / "runs")
    cmd = train_command(job, Path("x.yaml"), ["trainer.max_steps=5", "name=mine"], ["p.py"], resume=True)
    assert cmd.index("dataset.eval=false") < cmd.index("trainer.max_steps=5") < cmd.index("name=block_001")
    assert cmd[-3:] == ["--plugin", "p.py", "--resume"]


def test_failure_reason_names_the_signal_or_the_error_line(tmp_path):
    log = tmp_path / "b.log"
    log.write_text("step 1\nerror: dataset.data_path: folder not found: /x\n")
    assert failure_reason(-9, log) == "killed by SIGKILL"
    assert failure_reason(2, log) == "error: dataset.data_path: folder not found: /x"


@pytest.mark.parametrize(
    "main, argv, message",
    [
        (train_blocks.main, ["--manifest", "nowhere.json", "--config", "x.yaml"], "nowhere.json: manifest not found"),
        (merge_blocks.main, ["--manifest", "nowhere.json", "--out", "m"], "nowhere.json: manifest not found"),
        (partition.main, ["--scene", "no_scene", "--out", "p"], "--scene: folder not found: no_scene"),
        (partition.main, ["--scene", "s", "--out", "p", "--grid", "2by2"], "expected NxM"),
    ],
)
def test_commands_fail_in_one_line(tmp_path, monkeypatch, capsys, main, argv, message):
    monkeypatch.chdir(tmp_path)
    try:
        code = main(argv)
    except SystemExit as exit_:  # argparse's own errors
        code = exit_.code
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and message in err and "\n" not in err
