"""Data-parallel training over processes started by ``torchrun`` (``torch.distributed``).

Every rank holds the *same* Gaussians and renders *different* views of the same shuffled order
(``DataPipeline`` slices each global batch by rank). Three things keep the ranks identical:

- gradients are averaged over ranks after ``backward`` (:func:`all_reduce_gradients`), so every
  rank takes the same optimizer step, exactly as one process rendering all the views would;
- densification statistics are summed over ranks (:func:`all_reduce_sum_` from the strategies),
  so every rank grows and prunes the same Gaussians;
- the strategy's random numbers (split offsets, MCMC noise and sampling) come from RNGs seeded
  from ``(seed, step)`` (:func:`step_rng`), not from a global stream that rank-0-only work
  (validation, hooks) could advance on one rank and not on the others.

Without ``torchrun`` (``WORLD_SIZE`` unset or 1) nothing is initialised and every helper here is
a no-op, so single-process code paths pay nothing. Backend: gloo for CPU tensors, nccl for CUDA.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import sys
import threading
import traceback
from collections.abc import Iterable, Iterator
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist

from .errors import ConfigError

# A rank that saves a large checkpoint or runs validation keeps the others waiting at the next
# collective; the default 10-30 min timeout would turn a slow test() into a crash.
DEFAULT_TIMEOUT = timedelta(hours=2)


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError:
        raise ConfigError(f"environment variable {name}={value!r}: expected an integer (set by torchrun)") from None


def launched_world_size() -> int:
    """``WORLD_SIZE`` set by torchrun (1 when run directly)."""
    return _env_int("WORLD_SIZE", 1)


def init_from_env(device: str) -> str:
    """Join the process group torchrun describes in the environment; return this rank's device.

    Reads ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR`` and ``MASTER_PORT``. With
    ``WORLD_SIZE`` <= 1 (a plain ``python scripts/train.py``) it does nothing and returns ``device``.
    A CUDA device becomes ``cuda:<LOCAL_RANK>`` (one GPU per process) with the nccl backend; any
    other device uses gloo.

    Args:
        device: Resolved device string of the config (``"cpu"``, ``"cuda"``, ``"cuda:0"``).

    Raises:
        ConfigError: CUDA requested but this node has fewer GPUs than processes.
    """
    world_size = launched_world_size()
    if world_size <= 1 or is_initialized():
        return device
    local_rank = _env_int("LOCAL_RANK", 0)
    dev = torch.device(device)
    if dev.type == "cuda":
        if local_rank >= torch.cuda.device_count():
            raise ConfigError(
                f"device: {device!r} with {world_size} processes, but LOCAL_RANK {local_rank} has no GPU "
                f"({torch.cuda.device_count()} visible); use --nproc_per_node <= number of GPUs or device=cpu"
            )
        dev = torch.device("cuda", local_rank)
        torch.cuda.set_device(dev)
        backend = "nccl"
    else:
        backend = "gloo"
    dist.init_process_group(backend=backend, timeout=DEFAULT_TIMEOUT)
    _explain_sigterm()
    return str(dev)


def _explain_sigterm() -> None:
    """Make a rank that torchrun terminates say so before it goes.

    When one rank fails, torchrun sends SIGTERM to the others. Whether a waiting rank first sees the
    broken connection (and prints its own error) or the signal is a race; without this, the signal
    usually wins and the rank vanishes without a word in the log.
    """
    if threading.current_thread() is not threading.main_thread():
        return  # handlers can only be installed from the main thread

    def handler(signum: int, frame: object) -> None:
        print(
            f"error{rank_tag()}: stopped because another rank failed or the job was stopped "
            "(torchrun sent SIGTERM; see the other ranks' errors)",
            file=sys.stderr,
        )
        abort(128 + signum)

    signal.signal(signal.SIGTERM, handler)


def finish() -> None:
    """End a successful run: in a distributed one, leave the process group and exit this rank at
    once with status 0; otherwise do nothing.

    A normal interpreter teardown after a gloo run can abort in torch's communication threads
    ("terminate called without an active exception", pytorch/pytorch#179291; seen in CI on rank 1 of
    a resumed 2-rank run, and in tests/distributed/test_collectives.py before its ranks exited this
    way). By now every file of the run is written and closed (the trainer closed its writers; no
    background thread writes), so nothing is lost by skipping it.
    """
    if is_initialized():
        dist.destroy_process_group()
        abort(0)


def is_initialized() -> bool:
    return dist.is_available() and dist.is_initialized()


def get_rank() -> int:
    return dist.get_rank() if is_initialized() else 0


def get_world_size() -> int:
    return dist.get_world_size() if is_initialized() else 1


def is_distributed() -> bool:
    """True when more than one process trains together."""
    return get_world_size() > 1


def is_main_process() -> bool:
    """Rank 0: the only rank that writes logs, checkpoints, metrics, renders and exports."""
    return get_rank() == 0


def rank_tag() -> str:
    """`` (rank k)`` in a distributed run, else empty: appended to error prefixes.

    Read from torchrun's ``RANK`` before the process group exists (an error while loading the config).
    """
    if is_initialized():
        return f" (rank {get_rank()})" if is_distributed() else ""
    return f" (rank {_env_int('RANK', 0)})" if launched_world_size() > 1 else ""


# --- collectives -------------------------------------------------------------------------------
def all_reduce_sum_(*tensors: torch.Tensor) -> None:
    """Sum each tensor over ranks, in place, with one collective.

    Args:
        tensors: Same shapes, dtype and device on every rank (e.g. per-Gaussian statistics ``[N]``).
    """
    if not is_distributed() or not tensors:
        return
    if len(tensors) == 1:
        dist.all_reduce(tensors[0], op=dist.ReduceOp.SUM)
        return
    flat = torch.cat([t.reshape(-1).to(tensors[0].dtype) for t in tensors])
    dist.all_reduce(flat, op=dist.ReduceOp.SUM)
    offset = 0
    for t in tensors:
        t.copy_(flat[offset : offset + t.numel()].view_as(t))
        offset += t.numel()


def all_reduce_max_(tensor: torch.Tensor) -> None:
    """Element-wise maximum over ranks, in place (e.g. the largest screen radius per Gaussian)."""
    if is_distributed():
        dist.all_reduce(tensor, op=dist.ReduceOp.MAX)


def all_reduce_gradients(params: Iterable[torch.nn.Parameter]) -> None:
    """Replace every ``param.grad`` by its mean over ranks (one flat all-reduce).

    Each rank's loss is the mean over its own views, so the mean of the per-rank gradients is the
    gradient of the mean loss over all ranks' views: the same step one process would take with
    ``batch_size * world_size`` views. A gradient that is ``None`` on every rank stays ``None``
    (Adam then skips that parameter, as it would on one process); ``None`` on some ranks counts
    as zeros there.
    """
    if not is_distributed():
        return
    params = [p for p in params if p.requires_grad]
    if not params:
        return
    device, dtype = params[0].device, params[0].dtype
    # One extra element per parameter carries "had a gradient here", so None-ness is agreed on too.
    pieces = [torch.zeros(p.numel() + 1, device=device, dtype=dtype) for p in params]
    for p, piece in zip(params, pieces):
        if p.grad is not None:
            piece[:-1].copy_(p.grad.reshape(-1))
            piece[-1] = 1.0
    flat = torch.cat(pieces)
    dist.all_reduce(flat, op=dist.ReduceOp.SUM)
    world = float(get_world_size())
    offset = 0
    for p in params:
        n = p.numel()
        had_grad = flat[offset + n].item() > 0
        if had_grad:
            p.grad = (flat[offset : offset + n] / world).view_as(p).to(p.dtype)
        offset += n + 1


def mean_over_ranks(values: dict[str, object]) -> dict[str, object]:
    """Average the one-element tensors of ``values`` over ranks (for logging the global loss).

    Other entries are passed through. Every rank must hold the same keys in the same order.
    """
    if not is_distributed():
        return values
    keys = [k for k, v in values.items() if isinstance(v, torch.Tensor) and v.numel() == 1]
    if not keys:
        return values
    stacked = torch.stack([values[k].detach().reshape(()).float() for k in keys])
    dist.all_reduce(stacked, op=dist.ReduceOp.SUM)
    stacked /= get_world_size()
    out = dict(values)
    for k, v in zip(keys, stacked):
        out[k] = v.to(values[k].dtype)
    return out


def any_rank(flag: bool, device: torch.device | str = "cpu") -> bool:
    """True if ``flag`` is true on any rank (every rank gets the same answer)."""
    if not is_distributed():
        return flag
    t = torch.tensor([1.0 if flag else 0.0], device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return bool(t.item() > 0)


def broadcast_params(params: dict[str, torch.nn.Parameter], src: int = 0) -> None:
    """Copy rank ``src``'s parameter values to every rank (start every rank from one model).

    Raises:
        RuntimeError: the ranks built parameters of different shapes (a collective on mismatched
            shapes would hang or corrupt memory, so shapes are compared first).
    """
    if not is_distributed():
        return
    shapes = {name: tuple(p.shape) for name, p in params.items()}
    gathered: list[dict | None] = [None] * get_world_size()
    dist.all_gather_object(gathered, shapes)
    for rank, other in enumerate(gathered):
        if other != shapes:
            raise RuntimeError(f"ranks built different models: rank {get_rank()} has {shapes}, rank {rank} has {other}")
    with torch.no_grad():
        for p in params.values():
            dist.broadcast(p.data, src=src)


def params_checksum(params: dict[str, torch.Tensor]) -> str:
    """Hex SHA-256 of every parameter's bytes, in name order: equal exactly when ranks agree bitwise."""
    import hashlib

    h = hashlib.sha256()
    for name in sorted(params):
        t = params[name].detach().contiguous().cpu()
        h.update(name.encode())
        h.update(str(tuple(t.shape)).encode())
        h.update(t.numpy().tobytes())
    return h.hexdigest()


# --- random numbers ----------------------------------------------------------------------------
@contextlib.contextmanager
def step_rng(seed: int, step: int, device: torch.device | str = "cpu") -> Iterator[None]:
    """Seed torch (CPU and ``device``'s CUDA), numpy and ``random`` from ``(seed, step)`` inside
    the block, and restore the global streams afterwards.

    Every rank then draws the same numbers at the same step whatever else consumed random numbers
    on it (rank 0 alone runs validation and writes), and a resumed run draws the same numbers as
    an uninterrupted one.
    """
    device = torch.device(device)
    cuda_devices = [device] if device.type == "cuda" else []
    step_seed = (int(seed) * 1_000_003 + int(step)) % (2**31 - 1)
    np_state, py_state = np.random.get_state(), random.getstate()
    with torch.random.fork_rng(devices=cuda_devices):
        torch.manual_seed(step_seed)
        np.random.seed(step_seed)
        random.seed(step_seed)
        try:
            yield
        finally:
            np.random.set_state(np_state)
            random.setstate(py_state)


def step_generator(seed: int, step: int, stream: int) -> np.random.Generator:
    """A numpy generator of its own for ``(seed, step)`` and ``stream`` (a number per use).

    Seeded like :func:`step_rng` by the run's seed and the step alone (the same draws on every rank and in
    a resumed run), but from a seed sequence of its own: what it draws is independent of the global
    streams :func:`step_rng` seeds at that step (the strategy's) and of every other ``stream``'s.
    """
    return np.random.default_rng(np.random.SeedSequence([int(seed), int(step)], spawn_key=(int(stream),)))


# --- failures ----------------------------------------------------------------------------------
def is_peer_failure(exc: BaseException) -> bool:
    """True for errors raised because *another* rank died mid-collective (gloo/nccl)."""
    backend_error = getattr(dist, "DistBackendError", None)
    if backend_error is not None and isinstance(exc, backend_error):
        return True
    text = str(exc).lower()
    return isinstance(exc, RuntimeError) and any(
        s in text for s in ("connection closed by peer", "connection reset by peer", "broken pipe")
    )


def abort(exit_code: int) -> None:
    """Exit this rank at once, without interpreter teardown.

    Used after an error in a distributed run: the other ranks are blocked in a collective this rank
    will never join; exiting non-zero lets torchrun see the failure and stop them, whereas a normal
    shutdown could wait on communication threads or atexit handlers that wait on the peers.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(exit_code)


def report_unexpected(exc: BaseException) -> None:
    """Print the traceback and a last line naming the rank (what torchrun's summary shows least)."""
    traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)
    first = " ".join(str(exc).split())[:300]
    print(f"error{rank_tag()}: {type(exc).__name__}: {first}", file=sys.stderr, flush=True)
