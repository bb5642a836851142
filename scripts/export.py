"""Export trained Gaussians for web splat viewers (.splat, compressed PLY) or as a full PLY; see --help and docs/export.md."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # works without `pip install`
from pointrix_lite.cli.export import main  # noqa: E402

sys.exit(main())
