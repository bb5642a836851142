"""The mapping stage: matches -> camera poses and points, with one of COLMAP's three mappers.

* ``incremental``: grows one model image by image, with bundle adjustment of the whole model as it
  grows; its time per image grows with the model (measured in docs/data.md, "Large photo sets").
* ``global`` (GLOMAP in pycolmap 4.2): all rotations, then all positions, then one adjustment.
* ``hierarchical``: the image graph is cut into overlapping clusters of at most ``cluster_images``
  (+ ``CLUSTER_OVERLAP``) images, each mapped incrementally, then merged where they overlap: linear in
  the number of clusters, so it is the one for thousands of photos. pycolmap gives it no callback;
  its progress is read from COLMAP's log (:mod:`.colmap_log`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from .options import CLUSTER_OVERLAP, ProcessOptions

# COLMAP's defaults expect megapixel photos; small captures (a few hundred features per image)
# register far more images with these (measured on the 160 px demo: 25/48 -> 39/48).
MIN_NUM_MATCHES = 10
INIT_MIN_NUM_INLIERS = 50
ABS_POSE_MIN_NUM_INLIERS = 15


def incremental_options(pycolmap: ModuleType, opts: ProcessOptions) -> Any:
    """COLMAP's incremental mapper with the thresholds above and a fixed seed; the hierarchical mapper's clusters use it too."""
    options = pycolmap.IncrementalPipelineOptions()
    options.num_threads = opts.threads
    options.min_num_matches = MIN_NUM_MATCHES
    options.mapper.init_min_num_inliers = INIT_MIN_NUM_INLIERS
    options.mapper.abs_pose_min_num_inliers = ABS_POSE_MIN_NUM_INLIERS
    options.random_seed = 0  # the same photos give the same model
    return options


def hierarchical_options(pycolmap: ModuleType, opts: ProcessOptions) -> Any:
    """Clusters of ``opts.cluster_images``, each mapped with :func:`incremental_options`."""
    options = pycolmap.HierarchicalPipelineOptions()
    options.num_threads = opts.threads
    options.clustering_options.leaf_max_num_images = opts.cluster_images
    options.clustering_options.image_overlap = CLUSTER_OVERLAP
    options.incremental_options = incremental_options(pycolmap, opts)
    return options


def map_scene(
    pycolmap: ModuleType,
    database: Path,
    image_dir: Path,
    sparse_dir: Path,
    opts: ProcessOptions,
    on_image: Callable[[], None],
    mapper: str | None = None,
) -> dict[int, Any]:
    """Map with ``mapper`` (default ``opts.mapper``, which must not be ``auto`` then) into ``sparse_dir/<k>``;
    returns ``{k: Reconstruction}``. ``on_image`` hears each image the incremental mapper registers."""
    mapper = mapper or opts.mapper
    sparse_dir.mkdir(parents=True, exist_ok=True)
    if mapper == "global":
        options = pycolmap.GlobalPipelineOptions()
        options.num_threads = opts.threads
        options.min_num_matches = MIN_NUM_MATCHES
        return dict(pycolmap.global_mapping(database, image_dir, sparse_dir, options))
    if mapper == "hierarchical":
        options = hierarchical_options(pycolmap, opts)
        return dict(pycolmap.hierarchical_mapping(database, image_dir, sparse_dir, options))
    if mapper != "incremental":
        raise ValueError(f"map_scene: mapper {mapper!r} (resolve 'auto' with ProcessOptions.resolved_mapper)")
    options = incremental_options(pycolmap, opts)
    return dict(pycolmap.incremental_mapping(database, image_dir, sparse_dir, options, next_image_callback=on_image))
