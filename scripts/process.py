"""Photos or a video -> a COLMAP scene to train on; see `python scripts/process.py --help` and docs/data.md."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # works without `pip install`
from pointrix_lite.cli.process import main  # noqa: E402

sys.exit(main())
