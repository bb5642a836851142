"""Image quality metrics: PSNR, SSIM (scikit-image compatible), LPIPS (cached weights only)."""

from .lpips import LPIPS, backbone_weights_path
from .psnr import psnr
from .ssim import ssim, ssim_map

__all__ = ["LPIPS", "backbone_weights_path", "psnr", "ssim", "ssim_map"]
