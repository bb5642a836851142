"""Cameras, data sets, the training data pipeline and the procedural demo scene.

Importing this package registers the data sets in :data:`pointrix_lite.registry.DATASETS` and
``ResolutionScheduleHook`` (coarse-to-fine training views) in :data:`pointrix_lite.registry.HOOKS`.
"""

from .cameras import Camera, View, scene_extent
from .colmap import ColmapDataset
from .nerf_synthetic import NerfSyntheticDataset
from .nerfstudio import NerfstudioDataset
from .pipeline import DataPipeline
from .pointcloud import PointCloud, init_gaussians
from .resolution_hook import ResolutionScheduleHook

__all__ = [
    "Camera",
    "ColmapDataset",
    "DataPipeline",
    "NerfSyntheticDataset",
    "NerfstudioDataset",
    "PointCloud",
    "ResolutionScheduleHook",
    "View",
    "init_gaussians",
    "scene_extent",
]
