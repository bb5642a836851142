"""The built-in procedural demo scene (rendered by our own ray caster, not the splatting rasterizer)."""

from .make import LAYOUTS, ensure_demo, generate_demo

__all__ = ["LAYOUTS", "ensure_demo", "generate_demo"]
