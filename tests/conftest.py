"""Settings for the whole test session.

No test downloads: LPIPS fetches its ~0.5 GB backbone on first use, so the switch is off for this
process and every command line a test starts (they inherit the environment). The download itself
is tested against a local server (tests/model/test_lpips_download.py), which sets the switch back on.
"""

import os

os.environ["POINTRIX_LPIPS_DOWNLOAD"] = "0"
