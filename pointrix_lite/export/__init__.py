"""Export / import of trained Gaussians: INRIA 3DGS PLY (full precision), .splat, PlayCanvas compressed PLY,
SPZ v3, glTF binary with KHR_gaussian_splatting."""

from .exporter import ExportReport, export_gaussians
from .filters import Selection
from .formats import FORMATS, get_format
from .ply import load_ply, ply_property_names, save_ply

__all__ = [
    "ExportReport", "FORMATS", "Selection", "export_gaussians", "get_format", "load_ply", "ply_property_names", "save_ply",
]
