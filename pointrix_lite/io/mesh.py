"""Triangle meshes and coloured point clouds: PLY (MeshLab, CloudCompare, Open3D, Blender) and GLB (glTF viewers).

PLY is binary little-endian: ``vertex`` with ``x y z`` (float32), ``nx ny nz`` (float32, when given) and
``red green blue`` (uchar), and for a mesh ``face`` with ``vertex_indices`` (uchar count, int32 indices),
the layout Open3D and MeshLab write themselves. Coordinates are the model's (the data set's frame).

GLB holds one mesh with one TRIANGLES primitive (``POSITION``, ``NORMAL``, ``COLOR_0`` as float32, indices
as uint32). glTF is +y up, +z forward, +x left; the model's frame is COLMAP's (+x right, +y down, +z
forward), so positions and normals are turned 180 degrees about z, as the Gaussians' GLB is
(``export/glb.py``): both open upright side by side.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from plyfile import PlyData, PlyElement

from .atomic import atomic_write
from .gltf import ARRAY_BUFFER, ELEMENT_ARRAY_BUFFER, FLOAT, UNSIGNED_INT, one_mesh_glb

_TURN = np.array([-1.0, -1.0, 1.0], np.float32)  # 180 degrees about z: COLMAP's axes -> glTF's


def _vertex_element(xyz: np.ndarray, rgb: np.ndarray, normals: np.ndarray | None) -> PlyElement:
    fields = [("x", "f4"), ("y", "f4"), ("z", "f4")]
    if normals is not None:
        fields += [("nx", "f4"), ("ny", "f4"), ("nz", "f4")]
    fields += [("red", "u1"), ("green", "u1"), ("blue", "u1")]
    v = np.empty(len(xyz), dtype=fields)
    v["x"], v["y"], v["z"] = xyz.astype(np.float32).T
    if normals is not None:
        v["nx"], v["ny"], v["nz"] = normals.astype(np.float32).T
    v["red"], v["green"], v["blue"] = rgb.astype(np.uint8).T
    return PlyElement.describe(v, "vertex")


def _write_ply(path: Path, elements: list[PlyElement]) -> None:
    # through a temp file and a rename: never half a file where a finished one was
    atomic_write(path, PlyData(elements, text=False, byte_order="<").write)


def write_points_ply(path: Path, xyz: np.ndarray, rgb: np.ndarray, normals: np.ndarray | None = None) -> None:
    """A coloured point cloud: ``xyz [N, 3]``, ``rgb [N, 3]`` uint8, ``normals [N, 3]`` (optional)."""
    _write_ply(Path(path), [_vertex_element(xyz, rgb, normals)])


def write_mesh_ply(
    path: Path, verts: np.ndarray, faces: np.ndarray, rgb: np.ndarray, normals: np.ndarray | None = None
) -> None:
    """A triangle mesh: ``verts [V, 3]``, ``faces [F, 3]`` (vertex indices), ``rgb [V, 3]`` uint8, ``normals [V, 3]``."""
    f = np.empty(len(faces), dtype=[("vertex_indices", "i4", (3,))])
    f["vertex_indices"] = faces.astype(np.int32)
    _write_ply(Path(path), [_vertex_element(verts, rgb, normals), PlyElement.describe(f, "face")])


def mesh_glb_bytes(verts: np.ndarray, faces: np.ndarray, rgb: np.ndarray, normals: np.ndarray) -> bytes:
    """The ``.glb`` of a triangle mesh (arguments as :func:`write_mesh_ply`; ``normals`` unit length)."""
    position = np.ascontiguousarray(verts * _TURN, dtype="<f4")
    arrays = [
        position,
        np.ascontiguousarray(normals * _TURN, dtype="<f4"),
        np.ascontiguousarray(rgb[:, :3] / 255.0, dtype="<f4"),  # glTF colours are linear; these are shown as stored
        np.ascontiguousarray(faces.reshape(-1), dtype="<u4"),
    ]
    views, blobs, offset = [], [], 0
    for i, a in enumerate(arrays):
        blob = a.tobytes()
        target = ELEMENT_ARRAY_BUFFER if i == 3 else ARRAY_BUFFER
        views.append({"buffer": 0, "byteOffset": offset, "byteLength": len(blob), "target": target})
        blobs.append(blob)
        offset += len(blob)
    accessors = [
        {"bufferView": 0, "componentType": FLOAT, "count": len(verts), "type": "VEC3"},
        {"bufferView": 1, "componentType": FLOAT, "count": len(verts), "type": "VEC3"},
        {"bufferView": 2, "componentType": FLOAT, "count": len(verts), "type": "VEC3"},
        {"bufferView": 3, "componentType": UNSIGNED_INT, "count": int(faces.size), "type": "SCALAR"},
    ]
    if len(verts):  # glTF requires POSITION's bounds
        accessors[0]["min"] = position.min(axis=0).tolist()
        accessors[0]["max"] = position.max(axis=0).tolist()
    primitive = {"attributes": {"POSITION": 0, "NORMAL": 1, "COLOR_0": 2}, "indices": 3, "mode": 4}
    return one_mesh_glb(primitive, views, accessors, b"".join(blobs))


def write_mesh_glb(path: Path, verts: np.ndarray, faces: np.ndarray, rgb: np.ndarray, normals: np.ndarray) -> None:
    data = mesh_glb_bytes(verts, faces, rgb, normals)
    atomic_write(Path(path), lambda f: f.write(data))
