"""Gaussian model, its optimizer and learning-rate schedule."""

from .gaussian_model import PARAM_NAMES, GaussianModel, num_sh_bases
from .optimizer import LearningRates, build_adam, exponential_lr, group_by_name

__all__ = ["PARAM_NAMES", "GaussianModel", "LearningRates", "build_adam", "exponential_lr", "group_by_name", "num_sh_bases"]
