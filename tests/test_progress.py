"""Phases outside the training steps: progress lines when piped, a bar on a terminal, seconds summed."""

from __future__ import annotations

import io

from rich.console import Console

from pointrix_lite import progress


def test_piped_output_gets_progress_lines_and_a_closing_line(monkeypatch, capsys) -> None:
    monkeypatch.setattr(progress, "_console", Console(file=io.StringIO(), force_terminal=False))
    monkeypatch.setattr(progress, "PLAIN_EVERY", 0.0)
    monkeypatch.setattr(progress, "QUIET_SECONDS", 0.0)
    progress.PHASES.reset()
    with progress.phase("test", total=3, unit="views") as advance:
        for _ in range(3):
            advance()
    lines = capsys.readouterr().out.splitlines()
    assert lines == ["test: 1/3 views (0 s)", "test: 2/3 views (0 s)", "test: 3/3 views (0 s)"]
    closing = progress.console().file.getvalue()
    assert closing.startswith("test: 3 views in ") and closing.rstrip().endswith(" s")
    assert list(progress.PHASES.seconds) == ["test"] and progress.PHASES.seconds["test"] >= 0.0


def test_short_phases_are_quiet_and_repeats_add_up(monkeypatch, capsys) -> None:
    out = io.StringIO()
    monkeypatch.setattr(progress, "_console", Console(file=out, force_terminal=False))
    progress.PHASES.reset()
    clock = iter([0.0, 0.1, 0.5, 10.0, 10.1, 13.0])  # validation twice (start, advance, end): 0.5 s quiet, 3 s a line
    monkeypatch.setattr(progress.time, "perf_counter", lambda: next(clock))
    for _ in range(2):
        with progress.phase("validation", total=1, unit="views") as advance:
            advance()
    assert out.getvalue() == "validation: 1 views in 3.0 s\n"
    assert progress.PHASES.as_dict() == {"validation": 3.5}
    assert progress.format_phase_seconds({"setup": 2.04, "test": 12.0}) == "setup 2.0 s, test 12.0 s"
    assert capsys.readouterr().out == ""


def test_terminal_gets_a_bar_and_an_exception_still_records_the_time(monkeypatch) -> None:
    out = io.StringIO()
    monkeypatch.setattr(progress, "_console", Console(file=out, force_terminal=True, width=80))
    progress.PHASES.reset()
    try:
        with progress.phase("export", total=2, unit="files") as advance:
            advance()
            raise KeyError("boom")
    except KeyError:
        pass
    assert "export" in progress.PHASES.seconds
    assert "\x1b[" in out.getvalue()  # rich drew (and cleared) a live bar


def test_a_phase_inside_another_counts_only_under_its_own_name(monkeypatch) -> None:
    monkeypatch.setattr(progress, "_console", Console(file=io.StringIO(), force_terminal=False))
    clock = iter([0.0, 1.0, 4.0, 6.0])  # test opens at 0, alignment runs 1..4, test closes at 6
    monkeypatch.setattr(progress.time, "perf_counter", lambda: next(clock))
    progress.PHASES.reset()
    with progress.phase("test", show=False):
        with progress.phase("test alignment", show=False):
            pass
    assert progress.PHASES.seconds == {"test alignment": 3.0, "test": 3.0}  # adds up to the 6 s spent
    assert progress._nested == []
