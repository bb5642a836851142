"""Rasterization entry point and the GaussianRenderer component (see docs/rasterizer.md)."""

from .rasterization import rasterization
from .renderer import GaussianRenderer

__all__ = ["rasterization", "GaussianRenderer"]
