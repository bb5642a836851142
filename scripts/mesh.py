"""Extract a trained scene's surface (TSDF mesh, point cloud); see --help and docs/geometry.md."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # works without `pip install`
from pointrix_lite.cli.mesh import main  # noqa: E402

sys.exit(main())
