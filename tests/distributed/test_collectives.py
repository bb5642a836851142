"""pointrix_lite/distributed.py helpers and the DefaultStrategy statistics on a real 2-process gloo group.

One ``torch.multiprocessing.spawn`` runs every check on both ranks (process start-up dominates the
cost); each check's outcome is saved per rank and asserted by its own test below.
"""

from __future__ import annotations

import os
import sys
import traceback
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from pointrix_lite import distributed

WORLD = 2


def check_gradients_averaged(rank: int) -> None:
    a = torch.nn.Parameter(torch.zeros(3))
    b = torch.nn.Parameter(torch.zeros(2))  # no gradient on any rank
    c = torch.nn.Parameter(torch.zeros(2))  # gradient on rank 0 only
    a.grad = torch.tensor([1.0, 2.0, 3.0]) * (rank + 1)
    if rank == 0:
        c.grad = torch.tensor([4.0, -4.0])
    distributed.all_reduce_gradients([a, b, c])
    torch.testing.assert_close(a.grad, torch.tensor([1.5, 3.0, 4.5]))  # mean of x1 and x2
    assert b.grad is None  # Adam must keep skipping it, as on one process
    torch.testing.assert_close(c.grad, torch.tensor([2.0, -2.0]))


def check_sum_and_max(rank: int) -> None:
    x, y = torch.full((2,), float(rank + 1)), torch.tensor([[rank * 10.0]])
    distributed.all_reduce_sum_(x, y)
    torch.testing.assert_close(x, torch.full((2,), 3.0))
    torch.testing.assert_close(y, torch.tensor([[10.0]]))
    m = torch.tensor([rank, 1 - rank], dtype=torch.float32)
    distributed.all_reduce_max_(m)
    torch.testing.assert_close(m, torch.tensor([1.0, 1.0]))
    logged = distributed.mean_over_ranks({"loss": torch.tensor(float(rank)), "note": "x"})
    assert logged["note"] == "x" and float(logged["loss"]) == 0.5
    assert distributed.any_rank(rank == 1) and not distributed.any_rank(False)


def check_broadcast_and_shape_guard(rank: int) -> None:
    params = {"means": torch.nn.Parameter(torch.full((4, 3), float(rank)))}
    distributed.broadcast_params(params)
    assert torch.equal(params["means"], torch.zeros(4, 3))
    bad = {"means": torch.nn.Parameter(torch.zeros(4 + rank, 3))}
    with pytest.raises(RuntimeError, match="ranks built different models"):
        distributed.broadcast_params(bad)


def check_step_rng_identical_across_ranks(rank: int) -> list:
    torch.manual_seed(100 + rank)  # different global streams, as after rank-0-only validation
    torch.rand(rank * 7 + 1)
    with distributed.step_rng(seed=3, step=11):
        drawn = torch.randn(5)
    gathered = [torch.empty(5) for _ in range(WORLD)]
    dist.all_gather(gathered, drawn)
    assert torch.equal(gathered[0], gathered[1])
    return drawn.tolist()


def check_strategy_stats_match_one_process(rank: int) -> None:
    """Rank r renders camera r; the summed statistics must equal one process rendering both.

    Reference: one process with C=2 cameras. Its loss averages the two cameras, so its means2d
    gradient per camera is half the gradient a rank with a single camera gets.
    """
    from pointrix_lite.strategy.default import DefaultStrategy

    n = 6
    g = torch.Generator().manual_seed(0)
    grads = torch.randn(WORLD, n, 2, generator=g)  # per camera, each from a 1-camera loss
    radii = torch.randint(0, 3, (WORLD, n, 2), generator=g)
    cfg = DefaultStrategy.Config(refine_scale2d_stop_iter=100)

    def render_out(grad: torch.Tensor, rad: torch.Tensor) -> dict:
        means2d = torch.zeros_like(grad, requires_grad=True)
        means2d.grad = grad
        return {"means2d": means2d, "radii": rad, "width": 40, "height": 30, "n_cameras": grad.shape[0]}

    mine = DefaultStrategy(cfg)
    mine._update_state(n, render_out(grads[rank : rank + 1], radii[rank : rank + 1]))
    if rank == 0:  # the reference runs on this rank alone: hide the group from the strategy
        ref = DefaultStrategy(cfg)
        real = distributed.is_distributed
        try:
            distributed.is_distributed = lambda: False  # type: ignore[assignment]
            ref._update_state(n, render_out(grads / WORLD, radii))
        finally:
            distributed.is_distributed = real  # type: ignore[assignment]
        for key in ("grad2d", "count", "radii"):
            torch.testing.assert_close(mine.state[key], ref.state[key], msg=key)
    gathered = [torch.empty(n) for _ in range(WORLD)]
    dist.all_gather(gathered, mine.state["grad2d"])
    assert torch.equal(gathered[0], gathered[1])


def check_mcmc_refinement_identical_across_ranks(rank: int) -> None:
    """MCMC relocation/growth samples with numpy and torch; under step_rng both ranks agree."""
    import numpy as np

    from pointrix_lite.model.gaussian_model import GaussianModel
    from pointrix_lite.strategy.mcmc import MCMCStrategy

    model = GaussianModel(GaussianModel.Config(sh_degree=0, init_num_points=64, seed=0))
    with torch.no_grad():
        model.params["opacities"][:16] = -10.0  # dead: relocated onto live ones
    opt = model.create_optimizer(100)
    strategy = MCMCStrategy(MCMCStrategy.Config(refine_start_iter=0, refine_every=1))
    np.random.seed(rank)  # the global streams differ between ranks
    torch.manual_seed(rank)
    with distributed.step_rng(seed=0, step=5):
        strategy.step_post_backward(model, opt, 5, {})
    assert strategy.last_stats["relocated"] == 16 and model.num_gaussians > 64
    sums = [None] * WORLD
    dist.all_gather_object(sums, distributed.params_checksum(dict(model.params)))
    assert sums[0] == sums[1]


CHECKS = {
    "gradients": check_gradients_averaged,
    "sum_max": check_sum_and_max,
    "broadcast": check_broadcast_and_shape_guard,
    "step_rng": check_step_rng_identical_across_ranks,
    "strategy_stats": check_strategy_stats_match_one_process,
    "mcmc_random": check_mcmc_refinement_identical_across_ranks,
}


def _worker(rank: int, out_dir: str) -> None:
    os.environ.update(OMP_NUM_THREADS="1")
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{out_dir}/store", rank=rank, world_size=WORLD)
    results = {}
    for name, check in CHECKS.items():
        try:
            results[name] = ("ok", check(rank))
        except Exception:  # recorded, so one failing check doesn't hide the others
            results[name] = ("failed", traceback.format_exc())
        dist.barrier()  # a check failing on one rank must not leave the other mid-collective
    torch.save(results, Path(out_dir) / f"rank{rank}.pt")
    dist.destroy_process_group()
    # Leave without interpreter teardown: now and then (2 fresh-clone CI runs in ~8; 1 in 16 runs of this
    # module beside a CPU hog) a rank died with SIGABRT ("terminate called without an active exception"),
    # most likely gloo's threads torn down with the interpreter, as pytorch/pytorch#179291 describes;
    # with this exit, 0 in 30 such runs. The results are on disk; teardown is not what this module tests.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    out = tmp_path_factory.mktemp("collectives")
    mp.spawn(_worker, args=(str(out),), nprocs=WORLD, join=True)
    return [torch.load(out / f"rank{r}.pt") for r in range(WORLD)]


@pytest.mark.parametrize("name", list(CHECKS))
def test_check_passes_on_every_rank(outcomes, name):
    for rank, results in enumerate(outcomes):
        status, detail = results[name]
        assert status == "ok", f"rank {rank}:\n{detail}"


def test_step_rng_differs_between_steps_and_restores_global_stream():
    torch.manual_seed(0)
    expected_next = torch.rand(3)
    torch.manual_seed(0)
    with distributed.step_rng(seed=3, step=11):
        a = torch.randn(5)
    with distributed.step_rng(seed=3, step=12):
        b = torch.randn(5)
    assert not torch.equal(a, b)
    assert torch.equal(torch.rand(3), expected_next)  # the global stream is untouched


def test_single_process_helpers_are_no_ops():
    p = torch.nn.Parameter(torch.zeros(2))
    p.grad = torch.ones(2)
    distributed.all_reduce_gradients([p])
    assert torch.equal(p.grad, torch.ones(2))
    assert distributed.get_world_size() == 1 and distributed.is_main_process()
    assert distributed.init_from_env("cpu") == "cpu"  # WORLD_SIZE unset: nothing to join
