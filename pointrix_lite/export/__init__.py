"""Export / import of trained Gaussians: INRIA 3DGS PLY (full precision), .splat, PlayCanvas compressed PLY,
SPZ v3, PlayCanvas SOG, glTF binary with KHR_gaussian_splatting, and :class:`PlyExportHook`, which writes them
when training ends.

The PLY reader and writer themselves live in ``pointrix_lite/io/ply.py``, below the model (which
loads PLY files too) and this package.
"""

from ..io.ply import load_ply, ply_property_names, save_ply
from .exporter import ExportReport, export_gaussians
from .filters import Selection
from .formats import FORMATS, get_format
from .hook import PlyExportHook

__all__ = [
    "ExportReport",
    "FORMATS",
    "PlyExportHook",
    "Selection",
    "export_gaussians",
    "get_format",
    "load_ply",
    "ply_property_names",
    "save_ply",
]
