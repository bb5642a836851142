"""``train_blocks.py``'s coarse stage (``partition/context.py``): one ``train.py`` run of the whole scene before
the blocks, and each block's context cut from it.

Rank 0 trains the coarse model while the other ranks wait for it (they need it before their first step),
with all of its machine's cores. A job array's tasks cannot wait for each other, so there the coarse model
is trained first by ``--coarse-only`` (one task), and the array's tasks find it done. A finished coarse model
is reused by every later call (``--only``, ``--resume``); ``--overwrite`` without ``--only`` trains it again.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
from collections.abc import Callable
from pathlib import Path

from ..errors import ConfigError, DataError
from ..partition.context import COARSE, block_context, block_start, coarse_overrides, context_path
from ..partition.manifest import Block, Manifest
from ..partition.ranks import Placement, agree, threads_per_process
from ..partition.runner import BlockJob, child_env, has_checkpoint, run_block, train_command
from ..partition.status import BlockStatus, read_status


def coarse_job(manifest: Manifest, runs: Path) -> BlockJob:
    """The coarse run: the whole scene's folder, ``<runs>/coarse``; its digest is the scene and test split."""
    key = json.dumps([manifest.scene, sorted(manifest.test_views)])
    return BlockJob(COARSE, Path(manifest.scene), runs / COARSE, runs, hashlib.sha1(key.encode()).hexdigest()[:16])


def coarse_done(job: BlockJob) -> bool:
    return _finished(job, read_status(job.runs, job.name))


def _finished(job: BlockJob, status: BlockStatus | None) -> bool:
    return status is not None and status.state == "done" and status.partition == job.partition and job.ply.is_file()


def _retrain(args: argparse.Namespace) -> bool:
    return bool(args.overwrite and not args.only)  # --only names blocks: their coarse model stays


def check_coarse(job: BlockJob, args: argparse.Namespace, manifest: Manifest, where: Placement) -> None:
    """Refuse, before anything runs, a coarse stage that cannot start or would replace a run unasked."""
    if args.coarse_steps is not None and args.coarse_steps < 1:
        raise ConfigError(f"--coarse-steps: must be >= 1, got {args.coarse_steps}")
    status = read_status(job.runs, job.name)
    if _finished(job, status) and not _retrain(args):
        return
    redo = f"scripts/train_blocks.py --manifest {manifest.path} --config {args.config}"
    if where.world > 1 and where.source != "torchrun" and not args.coarse_only:
        raise ConfigError(
            f"{job.exp_dir}: no finished coarse model, and a job array's tasks cannot wait for one another; "
            f"train it first as one job: {redo} --coarse-only"
        )
    held = has_checkpoint(job.exp_dir) or job.ply.is_file()
    if held and status is not None and status.partition != job.partition and not args.overwrite:
        raise ConfigError(f"{job.exp_dir}: a coarse model of another partition; train it again: {redo} --overwrite")
    if held and not (args.resume or args.overwrite):
        raise ConfigError(
            f"{job.exp_dir}: holds an unfinished coarse run; pass --resume to continue it or --overwrite to start again"
        )


def default_coarse_steps(config: Path, overrides: list[str]) -> int:
    """The blocks' ``trainer.max_steps`` (the config's, after the command line's overrides). The coarse model is
    every block's context and start: trained for a quarter of a block's steps it left the merge well below
    one process on every scene measured (docs/results.md), trained for a block's steps it did not."""
    from ..engine.experiment import TrainerConfig, apply_overrides, read_yaml

    trainer = apply_overrides(read_yaml(config), overrides).get("trainer") or {}
    return max(1, int(trainer.get("max_steps", TrainerConfig.max_steps)))


def train_coarse(
    job: BlockJob, args: argparse.Namespace, manifest: Manifest, where: Placement, met: bool, say: Callable
) -> bool:
    """Train the coarse model on rank 0 unless a finished one is reused; whether every rank may go on."""
    from ..engine.run_folder import clear_run

    ok = True
    if coarse_done(job) and not _retrain(args):
        say(f"coarse: done already, reused ({job.ply})")
    elif where.rank == 0:
        if args.overwrite:
            shutil.rmtree(job.exp_dir, ignore_errors=True)
        resume = args.resume and has_checkpoint(job.exp_dir)
        if not resume and job.exp_dir.exists():
            clear_run(job.exp_dir)
        steps = args.coarse_steps or default_coarse_steps(args.config, args.overrides)
        fixed = coarse_overrides(manifest, steps)
        command = train_command(job, args.config.resolve(), args.overrides, args.plugin, resume, fixed)
        say(
            f"coarse: {'resuming' if resume else 'training'} the whole scene, {manifest.n_train_views} views, "
            f"{steps} steps -> {job.exp_dir} (log {job.log})"
        )
        # the other ranks of this machine wait for it: it gets their cores too
        status = run_block(job, command, child_env(threads_per_process(1, args.threads), where.local_rank), 0)
        ok = status.state == "done"
        peak = f"peak RSS {status.peak_rss_bytes / 1e9:.2f} GB"
        if ok:
            say(f"coarse: done in {status.seconds:.1f} s, {peak}")
        else:
            say(f"coarse: FAILED after {status.seconds:.1f} s ({status.message}), {peak}; log {job.log}")
    return agree(ok, met)


def write_block_contexts(
    manifest: Manifest, blocks: list[Block], coarse: BlockJob, runs: Path, say: Callable, start: bool = False
) -> dict[str, list[str]]:
    """Write each block's context PLY (``<runs>/context/<block>.ply``); per block the override that loads it."""
    from ..io import colmap as colmap_io
    from ..io.ply import load_ply, save_ply
    from ..partition.split import pinhole_view

    params = load_ply(coarse.ply)
    model = colmap_io.read_model(colmap_io.find_sparse_dir(Path(manifest.scene)))
    by_name = {im.name: im for im in model.images.values()}
    rotation = manifest.ground_rotation()
    overrides = {}
    for block in blocks:
        missing = [n for n in block.views if n not in by_name]
        if missing:
            raise DataError(f"{manifest.scene}: image {missing[0]} of {block.name} is not in the scene's COLMAP model")
        views = [pinhole_view(by_name[n], model.cameras[by_name[n].camera_id]) for n in block.views]
        context = block_context(params, block, rotation, views)
        path = save_ply(context, context_path(runs, block))
        say(
            f"{block.name}: context of {len(context['means']):,} of the coarse model's {len(params['means']):,} Gaussians"
        )
        overrides[block.name] = [f"model.context={path}"]
        if start:
            begin = save_ply(block_start(params, block, rotation), path.with_name(f"{block.name}_start.ply"))
            overrides[block.name].append(f"model.init_ply={begin}")
    return overrides
