"""Train the blocks of a partition (alone, under torchrun or as a job array); see --help and docs/distributed.md."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # works without `pip install`
from pointrix_lite.cli.train_blocks import main  # noqa: E402

sys.exit(main())
