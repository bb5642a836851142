"""The glTF 2.0 binary container (``.glb``): a JSON chunk and a BIN chunk behind a 12-byte header.

What goes into the JSON (meshes, accessors) is the writer's (``export/glb.py``: Gaussians, ``io/mesh.py``:
triangle meshes); this module only packs, the same way for both.
"""

from __future__ import annotations

import json
import struct
from typing import Any

GLB_MAGIC, JSON_CHUNK, BIN_CHUNK = 0x46546C67, 0x4E4F534A, 0x004E4942
FLOAT, UNSIGNED_INT = 5126, 5125
ARRAY_BUFFER, ELEMENT_ARRAY_BUFFER = 34962, 34963


def _chunk(kind: int, data: bytes, pad: bytes) -> bytes:
    data += pad * (-len(data) % 4)  # chunks are 4-byte aligned
    return struct.pack("<II", len(data), kind) + data


def glb_container(gltf: dict[str, Any], binary: bytes) -> bytes:
    """The ``.glb`` bytes of the glTF JSON ``gltf`` and its one buffer ``binary``."""
    body = _chunk(JSON_CHUNK, json.dumps(gltf, separators=(",", ":")).encode(), b" ")
    body += _chunk(BIN_CHUNK, binary, b"\0")
    return struct.pack("<III", GLB_MAGIC, 2, 12 + len(body)) + body


def one_mesh_glb(
    primitive: dict[str, Any],
    views: list[dict[str, Any]],
    accessors: list[dict[str, Any]],
    binary: bytes,
    extensions_used: list[str] | None = None,
) -> bytes:
    """The ``.glb`` of one mesh with one ``primitive`` in one node of the default scene, its ``accessors`` over
    ``views`` of the one buffer ``binary``: the document both writers make."""
    gltf: dict[str, Any] = {"asset": {"version": "2.0", "generator": "pointrix_lite"}}
    if extensions_used:
        gltf["extensionsUsed"] = extensions_used
    gltf.update(
        scene=0,
        scenes=[{"nodes": [0]}],
        nodes=[{"mesh": 0}],
        meshes=[{"primitives": [primitive]}],
        buffers=[{"byteLength": len(binary)}],
        bufferViews=views,
        accessors=accessors,
    )
    return glb_container(gltf, binary)
