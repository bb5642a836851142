"""Image loading: the integer block mean of `downscale`, and `load_all`'s order, progress and errors."""

from __future__ import annotations

import os
import threading
import time

import numpy as np
import pytest

from pointrix_lite.errors import DataError
from pointrix_lite.io.images import LOAD_THREADS, downscale, load_all


@pytest.mark.parametrize("s", [2, 3, 4, 5])
def test_integer_downscale_is_the_rounded_block_mean(s):
    rng = np.random.default_rng(s)
    image = rng.integers(0, 256, (12 * s, 7 * s, 3), dtype=np.uint8)
    if s % 2 == 0:  # ties: blocks whose mean is 0.5 and 2.5 round half to even (0 and 2), as np.rint
        checker = np.indices((s, s)).sum(0) % 2
        image[:s, :s, 0], image[:s, :s, 1] = checker, checker + 2
    # Independent: float64 mean of each s x s block, rounded half to even.
    ref = np.rint(image.astype(np.float64).reshape(12, s, 7, s, 3).mean(axis=(1, 3))).astype(np.uint8)
    assert np.array_equal(downscale(image, 7, 12), ref)


def test_a_fractional_downscale_is_a_writable_box_filtered_array():
    """Other ratios go through PIL's BOX filter; the result is a copy torch can take without a warning
    (PIL's own buffer is read-only)."""
    from PIL import Image

    image = np.random.default_rng(0).integers(0, 256, (40, 50, 3), dtype=np.uint8)
    out = downscale(image, 40, 32)  # 1.25x
    ref = np.asarray(Image.fromarray(image, "RGB").resize((40, 32), Image.Resampling.BOX))
    assert out.shape == (32, 40, 3) and np.array_equal(out, ref) and out.flags.writeable


def test_load_all_keeps_the_order_and_advances_once_per_item():
    ticks, threads = [], set()

    def load(i: int) -> int:
        threads.add(threading.get_ident())
        time.sleep(0.002 * (5 - i % 5))  # later items finish first
        return i * i

    assert load_all(list(range(20)), load, lambda: ticks.append(1)) == [i * i for i in range(20)]
    assert len(ticks) == 20
    workers = min(LOAD_THREADS, os.cpu_count() or 1, 20)
    if workers > 1:  # loaded on the pool's threads, all of them, and not on the caller's
        assert threading.get_ident() not in threads and len(threads) == workers, (threads, workers)
    else:
        assert threads == {threading.get_ident()}


def test_load_all_raises_the_first_failure_by_position():
    def load(i: int) -> int:
        if i in (3, 7):
            if i == 7:
                raise DataError("images/im_07.png: cannot decode image")
            time.sleep(0.05)  # the earlier failure comes later in time, and still wins
            raise DataError("images/im_03.png: cannot decode image")
        return i

    with pytest.raises(DataError, match="^images/im_03.png: cannot decode image$"):
        load_all(list(range(10)), load, lambda: None)
