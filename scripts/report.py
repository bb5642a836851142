"""Write report.html (curves, test views, scores, phase times, config) into a run folder; see --help and docs/usage.md."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # works without `pip install`
from pointrix_lite.cli.report import main  # noqa: E402

sys.exit(main())
