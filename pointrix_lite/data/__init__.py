"""Cameras, data sets, the training data pipeline and the procedural demo scene.

Importing this package registers the data sets in :data:`pointrix_lite.registry.DATASETS`.
"""

from .cameras import Camera, View, scene_extent
from .colmap import ColmapDataset
from .nerf_synthetic import NerfSyntheticDataset
from .pipeline import DataPipeline
from .pointcloud import PointCloud, init_gaussians

__all__ = [
    "Camera",
    "ColmapDataset",
    "DataPipeline",
    "NerfSyntheticDataset",
    "PointCloud",
    "View",
    "init_gaussians",
    "scene_extent",
]
