"""Merge the blocks trained by train_blocks.py into one PLY; see --help and docs/distributed.md."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # works without `pip install`
from pointrix_lite.cli.merge_blocks import main  # noqa: E402

sys.exit(main())
