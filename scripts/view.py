"""Fly around a trained model in the browser (viser); see --help and docs/viewer.md."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # works without `pip install`
from pointrix_lite.cli.view import main  # noqa: E402

sys.exit(main())
