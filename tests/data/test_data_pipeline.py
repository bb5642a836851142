"""DataPipeline: seeded order, epoch coverage, wrap-around, rank slicing and exact resume."""

from __future__ import annotations

import itertools

import pytest
from data_helpers import FakeDataset

from pointrix_lite.data.pipeline import DataPipeline
from pointrix_lite.errors import CheckpointError


def names(batches) -> list[list[str]]:
    return [[v.name for v in b] for b in batches]


def take(pipe: DataPipeline, n: int) -> list[list[str]]:
    return names(itertools.islice(iter(pipe), n))


def test_seeded_and_epochs_differ():
    ds = FakeDataset(10)
    a, b, c = DataPipeline(ds, 2, seed=5), DataPipeline(ds, 2, seed=5), DataPipeline(ds, 2, seed=6)
    assert take(a, 15) == take(b, 15) != take(c, 15)
    p = DataPipeline(ds, 1, seed=5)
    assert names(p.batches_for_epoch(0)) != names(p.batches_for_epoch(1))


def test_each_epoch_covers_every_view_once():
    ds = FakeDataset(10)
    p = DataPipeline(ds, 1, seed=0)
    for epoch in range(3):
        got = [b[0] for b in names(p.batches_for_epoch(epoch))]
        assert sorted(got) == sorted(f"v{i}" for i in range(10))
        assert p.epoch == epoch + 1 and p.position == 0


def test_last_partial_batch_wraps_to_epoch_start():
    p = DataPipeline(FakeDataset(10), 4, seed=1)
    assert p.num_batches_per_epoch == len(p) == 3
    batches = names(p.batches_for_epoch(0))
    flat = sum(batches, [])
    assert [len(b) for b in batches] == [4, 4, 4]
    assert sorted(set(flat)) == sorted(f"v{i}" for i in range(10))
    assert flat[10:] == flat[:2]  # filled from the start of the same order


def test_ranks_take_disjoint_slices_of_the_global_batch():
    ds = FakeDataset(16)
    whole = names(DataPipeline(ds, 4, seed=3).batches_for_epoch(0))
    r0 = names(DataPipeline(ds, 2, seed=3, rank=0, world_size=2).batches_for_epoch(0))
    r1 = names(DataPipeline(ds, 2, seed=3, rank=1, world_size=2).batches_for_epoch(0))
    assert len(r0) == len(r1) == 4
    for g, a, b in zip(whole, r0, r1, strict=True):
        assert a + b == g and not set(a) & set(b)
    with pytest.raises(ValueError):
        DataPipeline(ds, 1, rank=2, world_size=2)


@pytest.mark.parametrize("consumed", [1, 4, 5, 7])  # mid-epoch, end of an epoch, next epoch
def test_resume_from_state_dict_gives_the_same_remaining_order(consumed):
    ds = FakeDataset(10)
    reference = take(DataPipeline(ds, 2, seed=9), 12)
    first = DataPipeline(ds, 2, seed=9)
    assert take(first, consumed) == reference[:consumed]
    state = first.state_dict()
    resumed = DataPipeline(ds, 2, seed=0)
    resumed.load_state_dict(dict(state))
    assert take(resumed, 12 - consumed) == reference[consumed:]


def test_state_dict_checks_dataset_size():
    p = DataPipeline(FakeDataset(10), 2)
    with pytest.raises(CheckpointError, match="data_pipeline: checkpoint was taken with 10 training views"):
        DataPipeline(FakeDataset(11), 2).load_state_dict(p.state_dict())
