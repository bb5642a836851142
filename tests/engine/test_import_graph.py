"""The package's imports: no circle among module-level imports, and no import from a package to one
in a higher layer (issue 22; the layers are the table in docs/architecture.md, "Layers").

Read with ``ast``, not by importing. An import under ``if TYPE_CHECKING:`` counts for both checks,
since a circle or upward edge there is one a type checker (and the next refactor that makes it
real) walks into. Imports inside functions are deliberate lazy edges: they break no circle at
import time, so the circle check skips them, but they still tie a lower layer to a higher one, so
the layer check counts them, and modules named in strings (``import_module("pointrix_lite.viewer")``,
a ``python -m`` argument, a list of modules to import) as well.
"""

from __future__ import annotations

import ast
import re
import textwrap
from pathlib import Path
from typing import NamedTuple

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "pointrix_lite"
ARCHITECTURE = PACKAGE.parent / "docs" / "architecture.md"


class Edge(NamedTuple):
    module: str  # the importing module
    target: str  # the imported module of the same package
    line: int
    top_level: bool  # runs when the module is imported (not inside a function or class body)


def _module_name(path: Path, package: Path = PACKAGE) -> str:
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules(package: Path) -> dict[str, Path]:
    return {_module_name(p, package): p for p in sorted(package.rglob("*.py"))}


def _top_level_imports(body: list[ast.stmt]) -> list[ast.Import | ast.ImportFrom]:
    found: list[ast.Import | ast.ImportFrom] = []
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        elif isinstance(node, ast.If):
            found += _top_level_imports(node.body) + _top_level_imports(node.orelse)
        elif isinstance(node, ast.Try):
            found += _top_level_imports(node.body) + _top_level_imports(node.orelse)
            for handler in node.handlers:
                found += _top_level_imports(handler.body)
    return found


def edges(package: Path = PACKAGE) -> list[Edge]:
    """Every import of a module of ``package`` by another one, wherever it stands in the file."""
    files = _modules(package)
    found: list[Edge] = []
    for module, path in files.items():
        own_package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
        tree = ast.parse(path.read_text(), str(path))
        top = {id(node) for node in _top_level_imports(tree.body)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = own_package[: len(own_package) - node.level + 1] if node.level else []
                stem = ".".join(base + ([node.module] if node.module else []))
                # ``from . import x`` names a submodule when one exists, else an attribute of the package
                targets = [f"{stem}.{a.name}" if f"{stem}.{a.name}" in files else stem for a in node.names]
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                targets = [node.value]  # import_module("pointrix_lite.x"), "-m pointrix_lite.x", module lists
            else:
                continue
            found += [Edge(module, t, node.lineno, id(node) in top) for t in targets if t in files and t != module]
    return found


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """``{module: modules of this package it imports at module level}``."""
    graph: dict[str, set[str]] = {module: set() for module in _modules(package)}
    for edge in edges(package):
        if edge.top_level:
            graph[edge.module].add(edge.target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def unit(module: str) -> str:
    """The layered package a module belongs to: ``pointrix_lite.engine.hooks.log_hook`` -> ``engine``
    (``""`` for the root ``__init__``, which imports nothing of the package and sits below all)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def documented_layers(doc: Path = ARCHITECTURE) -> dict[str, int]:
    """``{package: layer}`` from the "Layers" table of docs/architecture.md (rows ``| N | `a`, `b` | ... |``)."""
    text = doc.read_text()
    section = text.split("\n## Layers\n", 1)[1].split("\n## ", 1)[0]
    layers: dict[str, int] = {}
    for number, packages in re.findall(r"^\| (\d+) \| ([^|]+) \|", section, flags=re.M):
        for name in re.findall(r"`(\w+)`", packages):
            assert name not in layers, f"{doc.name}: {name} is in two layers"
            layers[name] = int(number)
    return layers


def layer_violations(package: Path, layers: dict[str, int]) -> list[str]:
    """One line per import that does not go to a lower layer (same package excepted), and per
    package that is in no layer."""
    layers = {"": 0, **layers}
    problems = [
        f"{package.name}/{name}: package in no layer of docs/architecture.md (add it to the Layers table)"
        for name in sorted({unit(m) for m in _modules(package)} - layers.keys())
    ]
    files = _modules(package)
    for edge in edges(package):
        src, dst = unit(edge.module), unit(edge.target)
        if src == dst or src not in layers or dst not in layers or layers[dst] < layers[src]:
            continue
        where = files[edge.module].relative_to(package.parent)
        problems.append(
            f"{where}:{edge.line} imports {edge.target}: layer {layers[dst]} ({dst}) is not below "
            f"layer {layers[src]} ({src})"
        )
    return problems


# ------------------------------------------------------------------ the checkers on small made-up cases


def test_cycle_finder_sees_a_circle_through_type_checking_imports():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    source = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .trainer import T\n"
    assert [n.module for n in _top_level_imports(ast.parse(source).body)] == ["typing", "trainer"]


def _write_package(root: Path, files: dict[str, str]) -> Path:
    for name, source in files.items():
        path = root / "pkg" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source))
    return root / "pkg"


# Layers of the made-up package: base < (low, peer) < mid < top.
SYNTHETIC_LAYERS = {"base": 1, "low": 2, "peer": 2, "mid": 3, "top": 4}
SYNTHETIC = {
    "__init__.py": "",
    "base.py": "import os\nVALUE = 1\n",
    "low/__init__.py": "from .. import base\nfrom . import core\n",
    "low/core.py": "from ..base import VALUE\n",
    "peer.py": "import pkg.base\n",
    "mid/__init__.py": "from ..low.core import VALUE\n\n\ndef lazy():\n    from ..peer import base\n",
    "top.py": "import importlib\nfrom pkg import mid\n\nimportlib.import_module('pkg.low.core')\n",
}


def test_layer_checker_accepts_imports_that_go_down(tmp_path):
    package = _write_package(tmp_path, SYNTHETIC)
    assert layer_violations(package, SYNTHETIC_LAYERS) == []
    read = {(e.module, e.target, e.top_level) for e in edges(package)}
    assert ("pkg.mid", "pkg.peer", False) in read  # a function-level import is read
    assert ("pkg.top", "pkg.low.core", False) in read  # and a module named in a string (not in the circle check)


@pytest.mark.parametrize(
    "name, source, offending",
    [
        (
            "low/core.py",
            "from ..mid import VALUE\n",
            "pkg/low/core.py:1 imports pkg.mid: layer 3 (mid) is not below layer 2 (low)",
        ),
        (
            "base.py",
            "def f():\n    import pkg.top\n",
            "pkg/base.py:2 imports pkg.top: layer 4 (top) is not below layer 1 (base)",
        ),
        (
            "mid/__init__.py",
            "import importlib\nM = importlib.import_module('pkg.top')\n",
            "pkg/mid/__init__.py:2 imports pkg.top: layer 4 (top) is not below layer 3 (mid)",
        ),
        (
            "base.py",
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .low import core\n",
            "pkg/base.py:3 imports pkg.low.core: layer 2 (low) is not below layer 1 (base)",
        ),
        (
            "peer.py",
            "from .low import core\n",
            "pkg/peer.py:1 imports pkg.low.core: layer 2 (low) is not below layer 2 (peer)",
        ),
        ("extra.py", "X = 1\n", "pkg/extra: package in no layer of docs/architecture.md"),
    ],
    ids=[
        "module-level",
        "in-a-function",
        "import_module-string",
        "type-checking",
        "same-layer-peer",
        "unlisted-package",
    ],
)
def test_layer_checker_names_an_upward_import(tmp_path, name, source, offending):
    package = _write_package(tmp_path, {**SYNTHETIC, name: source})
    problems = layer_violations(package, SYNTHETIC_LAYERS)
    assert len(problems) == 1 and problems[0].startswith(offending), problems


def test_layers_table_is_read_from_the_architecture_doc(tmp_path):
    doc = tmp_path / "architecture.md"
    doc.write_text(
        "# A\n\n## Layers\n\n| layer | packages |\n| --- | --- |\n| 2 | `top` |\n| 1 | `low`, `peer` |\n\n## Next\n| 9 | `x` |\n"
    )
    assert documented_layers(doc) == {"top": 2, "low": 1, "peer": 1}


# ------------------------------------------------------------------ the package itself


def test_the_package_imports_form_no_circle():
    graph = import_graph()
    assert "pointrix_lite.hook" in graph["pointrix_lite.engine.hooks.log_hook"]  # edges are read
    assert cycles(graph) == []


def test_every_import_goes_to_a_lower_layer():
    layers = documented_layers()
    assert {"cli", "engine", "model", "errors"} <= layers.keys() and layers["cli"] > layers["engine"] > layers["errors"]
    stale = layers.keys() - {unit(m) for m in _modules(PACKAGE)}
    assert not stale, f"docs/architecture.md lists packages that do not exist: {sorted(stale)}"
    # The three kinds of edge are read from the real files (else an empty list proves nothing).
    read = {(e.module, e.target) for e in edges()}
    assert ("pointrix_lite.cli.summary", "pointrix_lite.viewer") in read  # import_module("...")
    assert ("pointrix_lite.model.gaussian_model", "pointrix_lite.io.ply") in read  # inside a method
    assert ("pointrix_lite.components", "pointrix_lite.export") in read  # a list of modules to import
    problems = layer_violations(PACKAGE, layers)
    assert not problems, "imports that go up a layer (docs/architecture.md, Layers):\n" + "\n".join(problems)
