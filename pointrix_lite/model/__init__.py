"""Gaussian model, its optimizer and learning-rate schedule, and the hooks that learn per-view corrections.

Importing this package registers ``PoseOptHook`` and ``AppearanceOptHook`` in :data:`pointrix_lite.registry.HOOKS`.
"""

from .appearance_hook import AppearanceOptHook
from .gaussian_model import PARAM_NAMES, GaussianModel, num_sh_bases
from .optimizer import LearningRates, build_adam, exponential_lr, group_by_name
from .pose_hook import PoseOptHook

__all__ = [
    "PARAM_NAMES",
    "AppearanceOptHook",
    "GaussianModel",
    "LearningRates",
    "PoseOptHook",
    "build_adam",
    "exponential_lr",
    "group_by_name",
    "num_sh_bases",
]
