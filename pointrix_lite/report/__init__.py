"""``report.html``: a run at a glance, built only from the files in its folder.

:func:`write_report` reads ``metrics.json``, ``config.yaml``, the JSON-lines log and
``renders/test/`` and writes one self-contained page (no network): PSNR and loss curves, each test
view's render, ground truth and error map, the per-view scores, phase times and the config. The
trainer writes it as its last end phase; ``scripts/report.py EXP_DIR`` writes it again.
"""

from .page import MAX_SIDE, MAX_VIEWS, REPORT_NAME, write_report

__all__ = ["MAX_SIDE", "MAX_VIEWS", "REPORT_NAME", "write_report"]
