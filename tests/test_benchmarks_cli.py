"""``python -m benchmarks``: the list names every benchmark module, each one's ``--help`` parses without
importing torch, and a worker imports ``pointrix_lite`` from the tree it is given, from any folder."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # benchmarks/ is run from the checkout, not installed

import benchmarks  # noqa: E402
from benchmarks import workers  # noqa: E402


def run(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True, timeout=60)


def test_the_list_names_every_benchmark_module_with_its_docstring_line() -> None:
    modules = {p.stem for p in (REPO / "benchmarks").glob("*.py") if not p.stem.startswith("_")}
    assert set(benchmarks.names()) == modules - benchmarks.HELPERS
    assert {"train", "rasterizer"} <= set(benchmarks.names())
    for args in ((), ("list",), ("--help",)):
        proc = run("-m", "benchmarks", *args)
        assert proc.returncode == 0, proc.stderr
        rows = {line.split()[0]: line.split(None, 1)[1] for line in proc.stdout.splitlines() if line.startswith("  ")}
        assert rows == {name: benchmarks.summary(name) for name in benchmarks.names()}
        assert all(rows.values())  # every benchmark has a one-line description


def test_every_help_parses_without_importing_torch() -> None:
    code = (
        "import sys\n"
        "from benchmarks import names\n"
        "from benchmarks.__main__ import main\n"
        "for name in names():\n"
        "    try:\n"
        "        main([name, '--help'])\n"
        "    except SystemExit as e:\n"
        "        assert e.code == 0, (name, e.code)\n"
        "    else:\n"
        "        raise AssertionError(name + ' --help did not exit')\n"
        "print('heavy:', sorted(m for m in ('torch', 'pointrix_lite.renderer') if m in sys.modules))\n"
    )
    proc = run("-c", code)
    assert proc.returncode == 0, proc.stderr
    for name in benchmarks.names():
        assert f"usage: python -m benchmarks {name} " in proc.stdout
    assert "heavy: []" in proc.stdout


def test_an_unknown_name_is_an_error_with_the_list() -> None:
    proc = run("-m", "benchmarks", "nope")
    assert proc.returncode == 2
    assert "unknown benchmark 'nope'" in proc.stderr and "train" in proc.stderr


def test_a_worker_imports_pointrix_lite_from_its_tree_from_any_folder(tmp_path: Path) -> None:
    # A stand-in for an old revision's tree: a pointrix_lite package and no benchmarks/ of its own.
    tree = tmp_path / "old_tree"
    (tree / "pointrix_lite").mkdir(parents=True)
    (tree / "pointrix_lite" / "__init__.py").write_text(
        "def where(spec):\n"
        "    import benchmarks\n"
        "    return {'pointrix_lite': __file__, 'benchmarks': benchmarks.__file__, 'spec': spec}\n"
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {"PYTHONPATH": str(REPO)}  # a PYTHONPATH naming this checkout must not shadow the tree
    proc = subprocess.run(
        workers.command("pointrix_lite:where", {"x": 1}),
        cwd=elsewhere,
        capture_output=True,
        text=True,
        timeout=60,
        env=workers.environment(tree, env),
    )
    assert proc.returncode == 0, proc.stderr
    (result,) = workers.results(proc.stdout)
    assert result == {
        "pointrix_lite": str(tree / "pointrix_lite" / "__init__.py"),
        "benchmarks": str(REPO / "benchmarks" / "__init__.py"),
        "spec": {"x": 1},
    }
    assert "PYTHONPATH" not in workers.environment(tree, env)
    assert workers.environment(tree, {"PYTHONPATH": f"/opt/site{os.pathsep}{REPO}"})["PYTHONPATH"] == "/opt/site"
