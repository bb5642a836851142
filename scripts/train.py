"""Train from a YAML config; see `python scripts/train.py --help` and README.md."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # works without `pip install`
from pointrix_lite.cli.train import main  # noqa: E402

sys.exit(main())
