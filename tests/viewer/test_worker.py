"""The per-client render worker renders only the newest camera, previews then settles, survives errors."""

from __future__ import annotations

import threading
import time

import pytest

from pointrix_lite.viewer.worker import RenderWorker


def wait_for(predicate, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.005)


class FakeImage:
    shape = (2, 3, 3)


def test_only_the_newest_request_is_rendered():
    release = threading.Event()
    rendered, delivered = [], []

    def render(request, full):
        rendered.append((request, full))
        if request == 0:
            release.wait(5)  # a slow first frame; requests pile up meanwhile
        return FakeImage()

    worker = RenderWorker(render, lambda img, req, full: delivered.append((req, full)), pytest.fail, settle_s=0.05)
    try:
        worker.submit(0)
        wait_for(lambda: rendered)
        for k in range(1, 20):
            worker.submit(k)
        release.set()
        wait_for(lambda: len(delivered) >= 3)
        time.sleep(0.2)  # nothing else may follow
        assert rendered == [(0, False), (19, False), (19, True)]  # 1..18 coalesced into 19
        assert delivered == rendered
        assert (worker.stats.previews, worker.stats.full) == (2, 1)
    finally:
        worker.stop()
    assert not worker.alive


def test_full_request_skips_preview_and_moving_camera_never_settles():
    rendered = []
    worker = RenderWorker(
        lambda r, f: rendered.append((r, f)) or FakeImage(), lambda *a: None, pytest.fail, settle_s=0.3
    )
    try:
        worker.submit("gui", full=True)
        wait_for(lambda: rendered)
        for k in range(5):  # moves 0.05 s apart: shorter than settle_s, so previews only
            worker.submit(k)
            time.sleep(0.05)
        assert all(not full for _, full in rendered[1:])
        wait_for(lambda: rendered[-1] == (4, True))
    finally:
        worker.stop()
    assert rendered[0] == ("gui", True)


def test_render_error_is_reported_and_the_worker_keeps_going():
    errors = []

    def render(request, full):
        if request == "bad":
            raise RuntimeError("boom")
        return FakeImage()

    delivered = []
    worker = RenderWorker(render, lambda img, req, full: delivered.append(req), errors.append, settle_s=0.01)
    try:
        worker.submit("bad", full=True)
        wait_for(lambda: errors)
        worker.submit("good", full=True)
        wait_for(lambda: delivered)
    finally:
        worker.stop()
    assert [str(e) for e in errors] == ["boom"] and delivered == ["good"] and worker.stats.errors == 1


def test_none_image_is_not_delivered():
    delivered = []
    worker = RenderWorker(lambda r, f: None, lambda *a: delivered.append(a), pytest.fail, settle_s=0.01)
    try:
        worker.submit("empty canvas", full=True)
        time.sleep(0.1)
    finally:
        worker.stop()
    assert delivered == [] and worker.stats.full == 0
