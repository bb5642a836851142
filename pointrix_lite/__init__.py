"""pointrix_lite: Gaussian-splatting training that runs on the CPU."""

import os as _os
import sys as _sys

# torch's OpenMP workers spin for a while after every parallel torch op (libgomp's default wait
# policy). On the 2-core machines this project targets they then hold a core the native
# rasterizer's own threads need: a demo training step at ~57k Gaussians took 29.1 ms with spinning
# workers and 21.7 ms with sleeping ones (docs/native.md, "Threads"). libgomp reads the policy once,
# when torch loads it, so this only applies when pointrix_lite is imported before torch (as the
# scripts do); an OMP_WAIT_POLICY the user set is kept.
if "torch" not in _sys.modules:
    _os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
