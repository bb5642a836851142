"""From photos or a video to a COLMAP scene ``ColmapDataset`` trains on (``scripts/process.py``).

One module per concern: ``options`` (what the user asked for), ``inputs`` (image folder checks),
``video`` (frame selection), ``sfm`` (pycolmap stages), ``downscale`` (``images_K`` folders),
``report`` (summary and the command to run next), ``cli`` (argument parsing and the worker process
that keeps a C++ abort inside pycolmap from killing the command without a message).
"""
