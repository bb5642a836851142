"""Export / import of trained Gaussians (INRIA 3DGS PLY layout)."""

from .ply import load_ply, ply_property_names, save_ply

__all__ = ["load_ply", "ply_property_names", "save_ply"]
