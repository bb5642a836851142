"""Command line: ``scripts/train_blocks.py --manifest M --config X.yaml [key=value ...]`` trains the blocks
of a partition, each as an ordinary ``train.py`` run (hooks, checkpoints, logs), with no gradient
exchange between them.

First a coarse model of the whole scene (``--context coarse``, the default; ``cli/blocks_coarse.py``), whose
Gaussians outside each block's region the block renders, frozen, while it trains. Alone it then trains every
block in turn; under ``torchrun --nproc_per_node N`` (or as task r of a job array, ``--rank r --world-size N``
or SLURM_ARRAY_TASK_ID) rank r trains blocks r, r + N, ...
A failed block does not stop the others; the exit code is 0 when every block finished, 1 when one
failed, 2 for bad input. ``--only B --resume`` reruns block B alone from its latest checkpoint.
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import signal
import sys
from pathlib import Path

from .blocks_coarse import check_coarse, coarse_job, train_coarse, write_block_contexts
from .common import EXIT_CRASH, EXIT_OK, OneLineErrorParser, add_plugin_option, run_command

EXAMPLES = (
    "example: torchrun --nproc_per_node 2 scripts/train_blocks.py --manifest data/city_blocks/manifest.json "
    "--config configs/colmap_cpu.yaml trainer.max_steps=7000"
)


def build_parser() -> argparse.ArgumentParser:
    p = OneLineErrorParser(
        prog="train_blocks.py",
        epilog=EXAMPLES,
        description="Train the blocks of a partition (scripts/partition.py), one train.py run each.",
    )
    p.add_argument("--manifest", type=Path, required=True, help="manifest.json written by partition.py (or its folder)")
    p.add_argument(
        "--config", type=Path, required=True, help="experiment YAML for every block (e.g. configs/colmap_cpu.yaml)"
    )
    p.add_argument("overrides", nargs="*", metavar="key=value", help="config overrides for every block")
    p.add_argument(
        "--runs", type=Path, help="experiment folders, logs and status files (default: runs/ beside the manifest)"
    )
    p.add_argument(
        "--only", action="append", metavar="BLOCK", help="train only this block (repeatable, or comma-separated)"
    )
    p.add_argument(
        "--resume", action="store_true", help="skip finished blocks, continue the others from their latest checkpoint"
    )
    p.add_argument("--overwrite", action="store_true", help="delete the blocks' earlier runs and start them again")
    p.add_argument("--rank", type=int, help="this task's rank in a job array (with --world-size)")
    p.add_argument("--world-size", type=int, help="number of tasks sharing the blocks")
    p.add_argument(
        "--threads", type=int, help="OpenMP threads per training (default: cores / processes on this machine)"
    )
    p.add_argument(
        "--context",
        choices=("coarse", "none"),
        default="coarse",
        help="coarse: train a coarse model of the whole scene first and render its Gaussians outside each block's "
        "region, frozen, while the block trains (docs/distributed.md); none: each block sees only its own",
    )
    p.add_argument("--coarse-steps", type=int, help="steps of the coarse model (default: the blocks' max_steps)")
    p.add_argument(
        "--coarse-only", action="store_true", help="train the coarse model and stop (before a job array's tasks)"
    )
    p.add_argument(
        "--block-init",
        choices=("points", "coarse"),
        help="what a block starts from: the coarse model's Gaussians in its region (the default with --context "
        "coarse), or its SfM points, seeded (points; the only choice with --context none)",
    )
    add_plugin_option(p)
    return p


def _selected(manifest, only: list[str] | None) -> list:
    if not only:
        return list(manifest.blocks)
    names = [n for item in only for n in item.split(",") if n]
    return [manifest.block(n) for n in dict.fromkeys(names)]


def run(args: argparse.Namespace) -> int:
    from ..engine.run_folder import clear_run
    from ..errors import ConfigError
    from ..partition.manifest import block_digest, load_manifest
    from ..partition.ranks import all_succeeded, find_placement, open_meeting, threads_per_process
    from ..partition.runner import BlockJob, child_env, has_checkpoint, run_block, train_command
    from ..partition.status import read_status, stale_reason

    manifest = load_manifest(args.manifest)
    if not args.config.is_file():
        raise ConfigError(f"--config: file not found: {args.config}")
    if args.resume and args.overwrite:
        raise ConfigError("--resume continues the blocks' runs, --overwrite deletes them: pass one")
    if args.block_init == "coarse" and args.context != "coarse":
        raise ConfigError("--block-init coarse starts the blocks from the coarse model: it needs --context coarse")
    args.block_init = args.block_init or ("coarse" if args.context == "coarse" else "points")
    where = find_placement(args.rank, args.world_size)
    runs = (args.runs or manifest.root / "runs").resolve()
    blocks = _selected(manifest, args.only)
    mine = blocks[where.rank :: where.world]
    jobs = [
        BlockJob(b.name, manifest.block_dir(b).resolve(), runs / b.name, runs, block_digest(manifest, b)) for b in mine
    ]
    for job in jobs:
        if not (job.data / "sparse").is_dir():
            raise ConfigError(f"{job.data}: block folder missing or without sparse/ (rerun partition.py)")
        # a finished run may hold its PLY without checkpoints (deleted to save space): still a run to keep
        held = has_checkpoint(job.exp_dir) or job.ply.is_file()
        if held and not (args.resume or args.overwrite):
            raise ConfigError(
                f"{job.exp_dir}: holds a run of {job.name} already; pass --resume to continue it "
                "or --overwrite to start again"
            )
        stale = stale_reason(read_status(runs, job.name), job.partition, job.exp_dir, job.name, manifest.path)
        if args.resume and stale is not None and held:
            raise ConfigError(stale)
    threads = threads_per_process(where.local_world, args.threads)
    coarse = coarse_job(manifest, runs) if args.context == "coarse" else None
    if coarse is not None:
        check_coarse(coarse, args, manifest, where)
    # torchrun (when another node fails) and schedulers stop a job with SIGTERM: treat it as Ctrl-C, so
    # the running training is told to save a checkpoint instead of being orphaned.
    signal.signal(signal.SIGTERM, _interrupt)
    met = open_meeting(where)
    say = lambda line: print(f"{where.tag}{line}", flush=True)  # noqa: E731
    contexts: dict[str, list[str]] = {}
    if coarse is not None:
        if not train_coarse(coarse, args, manifest, where, met, say):
            if where.rank == 0:
                print(f"rerun: {shlex.join([*again_command(manifest, runs, args), '--resume'])}", flush=True)
            return EXIT_CRASH
        if args.coarse_only:
            return EXIT_OK
        contexts = write_block_contexts(manifest, mine, coarse, runs, say, args.block_init == "coarse")
    say(
        f"train_blocks: {len(jobs)} of {len(blocks)} blocks here ({', '.join(j.name for j in jobs) or 'none'}), "
        f"{threads} thread{'s' * (threads > 1)} each; runs in {runs}"
    )
    ok = True
    for job, block in zip(jobs, mine, strict=True):
        previous = read_status(runs, job.name)  # a stale run holding a PLY was refused above, before any training
        if args.resume and previous is not None and previous.state == "done" and job.ply.is_file():
            say(f"{job.name}: done already ({previous.seconds:.1f} s), skipped")
            continue
        if args.overwrite:
            shutil.rmtree(job.exp_dir, ignore_errors=True)
        resume = args.resume and has_checkpoint(job.exp_dir)
        if not resume and job.exp_dir.exists():  # nothing to continue (no checkpoint): train.py starts it anew
            clear_run(job.exp_dir)
        command = train_command(
            job, args.config.resolve(), args.overrides, args.plugin, resume, contexts.get(job.name, [])
        )
        say(
            f"{job.name}: {'resuming' if resume else 'training'} {len(block.views)} views, {block.n_points:,} points "
            f"-> {job.exp_dir} (log {job.log})"
        )
        status = run_block(job, command, child_env(threads, where.local_rank), where.rank)
        peak = f"peak RSS {status.peak_rss_bytes / 1e9:.2f} GB"
        if status.state == "done":
            say(f"{job.name}: done in {status.seconds:.1f} s, {peak}")
        else:
            ok = False
            say(f"{job.name}: FAILED after {status.seconds:.1f} s ({status.message}), {peak}; log {job.log}")
    everyone_ok = all_succeeded(ok, met)
    whole_job = met or where.world == 1  # else a task of an array: it knows its own blocks only
    if where.rank == 0 or not whole_job:
        print(summary(manifest, blocks if whole_job else mine, runs, args, whole_job), flush=True)
    return EXIT_OK if everyone_ok else EXIT_CRASH


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def summary(manifest, blocks: list, runs: Path, args: argparse.Namespace, whole_job: bool = True) -> str:
    """The blocks' outcome from their status files, and the command to run next."""
    from ..partition.status import read_status

    states = {b.name: read_status(runs, b.name) for b in blocks}
    done = [n for n, s in states.items() if s is not None and s.state == "done"]
    lines = [f"summary: {len(done)}/{len(blocks)} blocks done"]
    coarse = read_status(runs, "coarse") if args.context == "coarse" else None
    if coarse is not None and coarse.state == "done":
        lines.append(f"  coarse: {coarse.seconds:.1f} s, peak RSS {coarse.peak_rss_bytes / 1e9:.2f} GB")
    for name, s in states.items():
        if s is not None and s.state == "done":
            lines.append(f"  {name}: {s.seconds:.1f} s, peak RSS {s.peak_rss_bytes / 1e9:.2f} GB")
        else:
            why = "never started" if s is None else (s.message or s.state)
            lines.append(f"  {name}: {'FAILED' if s and s.state == 'failed' else 'not done'} ({why})")
    missing = [n for n in states if n not in done]
    if missing:
        again = again_command(manifest, runs, args)
        lines.append(f"rerun: {shlex.join([*again, '--only', ','.join(missing), '--resume'])}")
    else:
        when = "" if whole_job else " (once every task has finished)"
        # outside the partition: merge_blocks.py refuses an output inside it, and says why
        merged = manifest.root.parent / f"{manifest.root.name}_merged"
        merge = [sys.executable, "scripts/merge_blocks.py", "--manifest", str(manifest.path), "--runs", str(runs)]
        lines.append(f"next{when}: {shlex.join([*merge, '--out', str(merged)])}")
    return "\n".join(lines)


def again_command(manifest, runs: Path, args: argparse.Namespace) -> list[str]:
    """This call's command line without the flags that choose blocks or what to do with earlier runs."""
    context = ["--context", args.context, "--block-init", args.block_init]
    context += ["--coarse-steps", str(args.coarse_steps)] if args.coarse_steps else []
    return [
        sys.executable,
        "scripts/train_blocks.py",
        "--manifest",
        str(manifest.path),
        "--runs",
        str(runs),
        "--config",
        str(args.config),
        *context,
        *args.overrides,
        *(a for p in args.plugin for a in ("--plugin", p)),
    ]


def main(argv: list[str] | None = None) -> int:
    return run_command(run, build_parser().parse_intermixed_args(argv))
