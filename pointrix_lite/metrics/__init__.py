"""Image quality metrics: PSNR, SSIM (scikit-image compatible), LPIPS (backbone weights fetched once into the torch hub cache)."""

from .backbone_download import backbone_url, backbone_weights_path, ensure_backbone
from .lpips import LPIPS
from .psnr import psnr
from .ssim import ssim, ssim_map

__all__ = ["LPIPS", "backbone_url", "backbone_weights_path", "ensure_backbone", "psnr", "ssim", "ssim_map"]
