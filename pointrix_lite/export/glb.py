"""glTF 2.0 binary (``.glb``) with ``KHR_gaussian_splatting``: the Khronos release candidate in
KhronosGroup/glTF ``extensions/2.0/Khronos/KHR_gaussian_splatting/README.md`` (revision 63770cc7,
2026-04-15).

One mesh with one primitive, ``mode`` 0 (POINTS), in one node of the default scene, and one
float32 accessor (own buffer view, tightly packed) per attribute:

    POSITION                                  VEC3    centre (min / max given, as glTF requires)
    COLOR_0                                   VEC4    point-cloud fallback: linear RGB of
                                                      clamp(0.5 + SH_C0 f_dc, 0, 1) (sRGB decoded,
                                                      the spec's rule for srgb_rec709_display), alpha
    KHR_gaussian_splatting:SCALE              VEC3    linear scale, exp(log scale)
    KHR_gaussian_splatting:ROTATION           VEC4    unit quaternion, glTF order x, y, z, w
    KHR_gaussian_splatting:OPACITY            SCALAR  sigmoid(opacity logit)
    KHR_gaussian_splatting:SH_DEGREE_0_COEF_0 VEC3    f_dc (r, g, b)
    KHR_gaussian_splatting:SH_DEGREE_l_COEF_n VEC3    degree l >= 1, n = 0..2l (m = -l..l), the
                                                      INRIA / gsplat coefficient order

The extension object is ``{"kernel": "ellipse", "colorSpace": "srgb_rec709_display"}``: the
model is trained on the images' sRGB values. glTF is LUF (+y up, +z forward, +x left), so the RDF
Gaussians are turned 180 degrees about z (:mod:`.axes`), the conversion the spec asks of
exporters of pre-trained data; the node carries no transform.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import IO

import numpy as np
from torch import Tensor

from ..io.gltf import ARRAY_BUFFER, FLOAT, one_mesh_glb
from .axes import RDF_TO_LUF, flip_axes

EXTENSION = "KHR_gaussian_splatting"
SH_C0 = 0.28209479177387814
_TYPES = {1: "SCALAR", 3: "VEC3", 4: "VEC4"}


def _srgb_to_linear(c: np.ndarray) -> np.ndarray:
    return np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)


def splat_attributes(params: Mapping[str, Tensor]) -> dict[str, np.ndarray]:
    """Attribute semantic -> float32 ``[N, components]`` in glTF's frame, in file order."""
    p = {k: v.double().numpy() for k, v in flip_axes(params, RDF_TO_LUF).items()}
    alpha = 1 / (1 + np.exp(-p["opacities"]))
    quats = p["quats"] / np.linalg.norm(p["quats"], axis=1, keepdims=True)
    colour = _srgb_to_linear(np.clip(0.5 + SH_C0 * p["sh0"][:, 0], 0, 1))
    attrs = {
        "POSITION": p["means"],
        "COLOR_0": np.concatenate([colour, alpha[:, None]], axis=1),
        f"{EXTENSION}:SCALE": np.exp(p["scales"]),
        f"{EXTENSION}:ROTATION": quats[:, [1, 2, 3, 0]],
        f"{EXTENSION}:OPACITY": alpha[:, None],
        f"{EXTENSION}:SH_DEGREE_0_COEF_0": p["sh0"][:, 0],
    }
    k = 0
    for degree in range(1, 4):
        for n in range(2 * degree + 1):
            if k < p["shN"].shape[1]:
                attrs[f"{EXTENSION}:SH_DEGREE_{degree}_COEF_{n}"] = p["shN"][:, k]
            k += 1
    return {name: np.ascontiguousarray(a, dtype="<f4") for name, a in attrs.items()}


def glb_bytes(params: Mapping[str, Tensor]) -> bytes:
    """The ``.glb`` file of RDF ``params``."""
    attrs = splat_attributes(params)
    views, accessors, blobs, offset = [], [], [], 0
    for i, a in enumerate(attrs.values()):
        blob = a.tobytes()  # float32: every view stays 4-byte aligned
        views.append({"buffer": 0, "byteOffset": offset, "byteLength": len(blob), "target": ARRAY_BUFFER})
        accessors.append({"bufferView": i, "componentType": FLOAT, "count": len(a), "type": _TYPES[a.shape[1]]})
        blobs.append(blob)
        offset += len(blob)
    accessors[0]["min"] = attrs["POSITION"].min(axis=0).tolist()
    accessors[0]["max"] = attrs["POSITION"].max(axis=0).tolist()
    primitive = {
        "attributes": {name: i for i, name in enumerate(attrs)},
        "mode": 0,
        "extensions": {EXTENSION: {"kernel": "ellipse", "colorSpace": "srgb_rec709_display"}},
    }
    return one_mesh_glb(primitive, views, accessors, b"".join(blobs), [EXTENSION])


def write_glb(params: Mapping[str, Tensor], f: IO[bytes]) -> None:
    f.write(glb_bytes(params))
