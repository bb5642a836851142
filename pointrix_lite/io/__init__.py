"""File formats: every file the package reads or writes in a format of its own or another tool's.

``atomic.py`` (crash-safe writes, which the others write through), ``ply.py`` (3DGS PLY),
``images.py`` (PNG/JPEG), ``colmap.py`` (COLMAP sparse models, text and binary), ``ffmpeg.py``
(the optional video codec). They import only ``errors`` and third-party packages, so the package
sits below every layer that reads or writes files (data, model, engine, export, report, process).
"""
