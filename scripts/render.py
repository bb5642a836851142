"""Re-render a trained model (test split + metrics, or a camera-path video); see --help and docs/usage.md."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # works without `pip install`
from pointrix_lite.cli.render import main  # noqa: E402

sys.exit(main())
