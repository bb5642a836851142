"""Geometry out of a trained model: depth and normal maps (``maps.py``), TSDF fusion and marching cubes
(``tsdf.py``), and the stages of ``scripts/mesh.py`` (``extract.py``). docs/geometry.md says how to use them."""

# which depth a mesh fuses (mesh.py --depth); kept here, without torch, so parsers can offer it
DEPTH_KINDS = ("expected", "median")
