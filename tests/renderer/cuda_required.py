"""The marks of a test that needs a CUDA device: ``cuda`` (``pytest -m cuda`` selects them on a GPU
machine) and skipped where there is none (CI). One place, so every such test is selected and skipped alike."""

from __future__ import annotations

import pytest
import torch

CUDA_ONLY = [pytest.mark.cuda, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]
ON_CUDA = pytest.param("cuda", marks=CUDA_ONLY, id="cuda")  # the "cuda" case of a device parametrisation


def needs_cuda(test):
    """Decorator form of :data:`CUDA_ONLY`."""
    for mark in CUDA_ONLY:
        test = mark(test)
    return test
