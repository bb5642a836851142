"""Photos as textures for the ray caster: scikit-image's bundled sample photos, mip-mapped.

A photo has detail at every scale, so a texture lookup must be filtered to what one ray sample covers
or far and grazing surfaces alias into noise that no two views agree on (a real camera's optics blur it
away). Each lookup therefore picks the mip level whose texels match the sample's footprint on the
surface (distance x angle per sample / sqrt(cos incidence), a compromise between the two axes of the
footprint ellipse) and blends the two nearest levels, each sampled bilinearly (trilinear filtering,
what a GPU does without anisotropic filtering). Addressing repeats the photo mirrored, so surfaces larger
than a photo show no seams.

The footprint depends on where the camera is, so a texture is made for one view at a time:
:meth:`Decal.texture` closes over the eye and the angle per sample.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...errors import DataError
from ...io.images import read_image
from .raycast import Primitive, Texture

# The PNG sample photos that scikit-image ships inside its wheel. skimage.data's loaders fetch the other
# ones with pooch on first use; the scene must never download, and PNG decodes to the same bytes
# everywhere (JPEG decoders differ in the last bit).
BUNDLED = {
    "astronaut": "astronaut.png",
    "brick": "brick.png",
    "camera": "camera.png",
    "chelsea": "chelsea.png",
    "coffee": "coffee.png",
    "coins": "coins.png",
    "grass": "grass.png",
    "gravel": "gravel.png",
    "immunohistochemistry": "ihc.png",
    "moon": "moon.png",
    "motorcycle_left": "motorcycle_left.png",
}


def photo_path(name: str) -> Path:
    """The bundled file of sample photo ``name`` (a key of :data:`BUNDLED`)."""
    try:
        import skimage.data
    except ImportError:
        raise DataError(
            "the photo benchmark scene textures its objects with scikit-image's sample photos: "
            "pip install scikit-image (or the dev extra: pip install -e .[dev])"
        ) from None
    path = Path(skimage.data.__file__).parent / BUNDLED[name]
    if not path.is_file():
        raise DataError(f"{path}: scikit-image sample photo {name!r} is missing from this install")
    return path


def load_photo(name: str) -> np.ndarray:
    """Sample photo ``name`` as [H, W, 3] float64 in [0, 1] (grey photos repeated to RGB)."""
    return read_image(photo_path(name))[..., :3].astype(np.float64) / 255.0


def _mirror(i: np.ndarray, n: int) -> np.ndarray:
    """Mirrored-repeat addressing: ... 1 0 | 0 1 .. n-1 | n-1 n-2 ..."""
    m = np.mod(i, 2 * n)
    return np.where(m < n, m, 2 * n - 1 - m)


def bilinear(img: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Bilinear lookup of [H, W, C] ``img`` at continuous pixel coordinates [N] (centres at +0.5)."""
    h, w = img.shape[:2]
    x, y = x - 0.5, y - 0.5
    x0, y0 = np.floor(x), np.floor(y)
    fx, fy = (x - x0)[:, None], (y - y0)[:, None]
    x0, y0 = x0.astype(np.int64), y0.astype(np.int64)
    ix0, ix1, iy0, iy1 = _mirror(x0, w), _mirror(x0 + 1, w), _mirror(y0, h), _mirror(y0 + 1, h)
    top = img[iy0, ix0] * (1 - fx) + img[iy0, ix1] * fx
    bottom = img[iy1, ix0] * (1 - fx) + img[iy1, ix1] * fx
    return top * (1 - fy) + bottom * fy


class Mip:
    """A photo and its box-filtered halvings down to one pixel, sampled trilinearly."""

    def __init__(self, rgb: np.ndarray) -> None:
        self.levels = [rgb]
        while max(self.levels[-1].shape[:2]) > 1:
            a = self.levels[-1]
            h, w = (a.shape[0] + 1) // 2, (a.shape[1] + 1) // 2
            # Odd sizes: repeat the last row/column (what mirrored addressing would read there).
            a = np.pad(a, ((0, 2 * h - a.shape[0]), (0, 2 * w - a.shape[1]), (0, 0)), mode="edge")
            self.levels.append(a.reshape(h, 2, w, 2, -1).mean(axis=(1, 3)))

    @property
    def shape(self) -> tuple[int, int]:
        """``(height, width)`` of the full-resolution photo."""
        return self.levels[0].shape[:2]

    def sample(self, x: np.ndarray, y: np.ndarray, lod: np.ndarray) -> np.ndarray:
        """Colours [N, 3] at level-0 pixel coordinates ``x, y`` [N] and level of detail ``lod`` [N].

        ``lod`` is log2(texels per sample): <= 0 reads the full photo, 1 its first halving, ...
        """
        lod = np.clip(lod, 0.0, len(self.levels) - 1)
        lo = np.minimum(np.floor(lod).astype(np.int64), max(len(self.levels) - 2, 0))
        out = np.empty((len(x), self.levels[0].shape[2]))
        for k in np.unique(lo):
            sel = lo == k
            c = bilinear(self.levels[k], x[sel] / 2**k, y[sel] / 2**k)
            if k + 1 < len(self.levels):
                frac = (lod[sel] - k)[:, None]
                c = c * (1 - frac) + bilinear(self.levels[k + 1], x[sel] / 2 ** (k + 1), y[sel] / 2 ** (k + 1)) * frac
            out[sel] = c
        return out


@dataclass(frozen=True)
class Face:
    """One photo placed on (part of) a surface.

    Attributes:
        photo: The photo.
        texel: World size of one photo pixel.
        tint: Multiplies the photo's colour (grey photos become coloured materials).
        offset: Photo pixel ``(x, y)`` at surface coordinates ``u = v = 0``.
    """

    photo: Mip
    texel: float
    tint: tuple[float, float, float] = (1.0, 1.0, 1.0)
    offset: tuple[float, float] = (0.0, 0.0)

    def sample(self, u: np.ndarray, v: np.ndarray, footprint: np.ndarray) -> np.ndarray:
        """Albedo [N, 3] at surface coordinates ``u, v`` [N] for samples covering ``footprint`` [N] world units."""
        lod = np.log2(np.maximum(footprint, 1e-12) / self.texel)
        x, y = u / self.texel + self.offset[0], v / self.texel + self.offset[1]
        return self.photo.sample(x, y, lod) * np.asarray(self.tint)


UV = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray]]
"""Surface parametrisation: world points [N, 3] -> (face index [N] int, u [N], v [N] in world units)."""


@dataclass
class Decal:
    """A primitive with photos on it: ``uv`` says which face a point is on and where."""

    prim: Primitive
    uv: UV
    faces: list[Face]

    def texture(self, eye: np.ndarray, angle: float) -> Texture:
        """The primitive's albedo as seen from ``eye`` [3] by samples ``angle`` radians apart."""

        def tex(p: np.ndarray) -> np.ndarray:
            face, u, v = self.uv(p)
            ray = p - eye
            dist = np.linalg.norm(ray, axis=1)
            cos = np.abs(np.einsum("ij,ij->i", self.prim.normal(p), ray)) / dist
            footprint = dist * angle / np.sqrt(np.maximum(cos, 0.05))
            out = np.empty((len(p), 3))
            for i, f in enumerate(self.faces):
                sel = face == i
                if sel.any():
                    out[sel] = f.sample(u[sel], v[sel], footprint[sel])
            return np.clip(out, 0.0, 1.0)

        return tex
