"""``scripts/report.py EXP_DIR``: writes the page, or one line and exit code 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from pointrix_lite.cli.report import main

from .helpers import SMALL, make_run, read_page

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "report.py"


def test_the_command_writes_the_report(tmp_path, capsys):
    exp, _ = make_run(tmp_path, views={"a": SMALL})
    assert main([str(exp), "--max-side", "20"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"report: {exp / 'report.html'} (") and "file://" in out
    assert "at most 20 px" in read_page(exp / "report.html").text


def test_missing_and_non_run_folders_are_one_line_errors(tmp_path, capsys):
    assert main([str(tmp_path / "nowhere")]) == 2
    assert capsys.readouterr().err == f"error: {tmp_path / 'nowhere'}: no such folder\n"
    (tmp_path / "photos").mkdir()
    assert main([str(tmp_path / "photos")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {tmp_path / 'photos'}: not a run folder (") and err.count("\n") == 1
    assert not (tmp_path / "photos" / "report.html").exists()


def test_the_script_runs_without_install(tmp_path):
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(tmp_path), "--max-views", "0"], capture_output=True, text=True
    )
    assert done.returncode == 2
    assert done.stderr == "error: argument --max-views: must be >= 1, got 0 (see --help)\n"
