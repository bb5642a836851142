"""Loading never executes data: pickle payloads refused, YAML tags refused, no unsafe loader in the code."""

from __future__ import annotations

import ast
import os
import pickle
from pathlib import Path

import pytest
import torch

from pointrix_lite.engine.checkpoint import load_checkpoint_file
from pointrix_lite.engine.experiment import apply_overrides
from pointrix_lite.errors import CheckpointError, ConfigError

PACKAGE = Path(__file__).resolve().parents[2] / "pointrix_lite"


class Payload:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


@pytest.mark.parametrize(
    ("writer", "message"),
    [
        # torch's zip format, as a checkpoint would be: torch refuses the os.system global.
        (
            lambda obj, f: torch.save({"format": 1, "step": 0, "x": obj}, f),
            r"refused to load: the file contains Python objects",
        ),
        # A bare pickle stream (torch's legacy format): not a zip archive, never handed to an unpickler.
        (
            lambda obj, f: pickle.dump({"format": 1, "step": 0, "x": obj}, f),
            r"unreadable checkpoint .*not a complete torch zip",
        ),
    ],
)
def test_pickle_payload_is_refused_and_never_runs(tmp_path, writer, message):
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.pth"
    with open(path, "wb") as f:
        writer(Payload(marker), f)
    with pytest.raises(CheckpointError, match=message) as exc:
        load_checkpoint_file(path)
    assert "\n" not in str(exc.value) and str(exc.value).startswith(f"{path}: ")
    assert not marker.exists()
    # Sanity check of the payload itself: a plain unpickler would have run it.
    if path.read_bytes()[:2] != b"PK":
        pickle.loads(path.read_bytes())
        assert marker.exists()


def test_yaml_tag_in_an_override_is_refused(tmp_path):
    marker = tmp_path / "pwned"
    with pytest.raises(ConfigError, match=r"^seed: cannot parse override value .* as YAML$"):
        apply_overrides({}, [f'seed=!!python/object/apply:os.system ["touch {marker}"]'])
    assert not marker.exists()


def _unsafe_calls(tree: ast.AST) -> list[str]:
    """Calls that can execute data: pickle loads, yaml's non-safe loaders, torch.load without
    weights_only=True, numpy loads with allow_pickle=True, eval/exec."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        fn = ast.unparse(node.func)
        kwargs = {k.arg: ast.unparse(k.value) for k in node.keywords}
        if fn in ("eval", "exec", "pickle.load", "pickle.loads", "yaml.load", "yaml.unsafe_load", "yaml.full_load"):
            found.append(fn)
        elif fn == "torch.load" and kwargs.get("weights_only") != "True":
            found.append("torch.load without weights_only=True")
        elif fn in ("np.load", "numpy.load") and kwargs.get("allow_pickle") == "True":
            found.append("np.load(allow_pickle=True)")
    return found


def test_no_loader_in_the_package_can_execute_data():
    offenders = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        bad = _unsafe_calls(ast.parse(path.read_text(), filename=str(path)))
        if bad:
            offenders[str(path.relative_to(PACKAGE))] = bad
    assert offenders == {}
    # The scan itself finds each pattern (so an empty result means something).
    sample = "torch.load(p)\ntorch.load(p, weights_only=False)\nyaml.load(s)\npickle.loads(b)\neval(s)\nnp.load(p, allow_pickle=True)"
    assert len(_unsafe_calls(ast.parse(sample))) == 6
