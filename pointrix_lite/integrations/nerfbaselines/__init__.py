"""pointrix_lite as a nerfbaselines method (``nerfbaselines train --method pointrix-lite --data DIR``).

``spec.py`` registers the method through nerfbaselines' ``nerfbaselines.specs`` entry point (declared in
pyproject.toml); ``method.py`` is the method, ``scene.py`` turns nerfbaselines' data set into the COLMAP
scene folder the project's own loader reads. docs/nerfbaselines.md says how to use it.
"""
