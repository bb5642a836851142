"""``build_pending()`` tells a cold extensions cache from a warm one without building anything.

That a first run builds while the trainer is set up, announced by one line only when it compiles, its
build time out of ``train_seconds`` (issue 11 item 6), is checked by test_wheel.py's source-build run
(the cold build it needs anyway).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.reliability.cli_helpers import REPO

from .native_required import require_native

require_native(allow_module_level=True)

PROBE = "from pointrix_lite.renderer.native._build import build_pending; print(build_pending())"


def _env(ext_dir: Path | None) -> dict[str, str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(REPO)}
    if ext_dir is not None:
        env["TORCH_EXTENSIONS_DIR"] = str(ext_dir)
    return env


def test_build_pending_tells_a_cold_cache_from_a_warm_one(tmp_path):
    # this process already loaded the extension from the usual cache, so that cache is warm
    warm = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=_env(None), timeout=120)
    cold = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, env=_env(tmp_path), timeout=120
    )
    assert (warm.returncode, cold.returncode) == (0, 0), warm.stderr + cold.stderr
    assert warm.stdout.strip() == "False"
    assert cold.stdout.strip() == "True"
    assert not list(tmp_path.rglob("*.so"))  # the probe itself built nothing
