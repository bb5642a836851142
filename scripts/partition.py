"""Split a COLMAP scene into spatial blocks; see `python scripts/partition.py --help` and docs/distributed.md."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # works without `pip install`
from pointrix_lite.cli.partition import main  # noqa: E402

sys.exit(main())
