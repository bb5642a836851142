"""Load user plugin files (``--plugin my_hooks.py``): the only way user code enters a run.

A plugin is a plain Python file that registers components at import time
(``@HOOKS.register() class MyHook(Hook): ...``). It is imported from its path, not by module
name, so it needs no package or ``sys.path`` set-up.
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from ..errors import ConfigError, PointrixError


def plugin_module_name(path: Path) -> str:
    # Derived from the resolved path: loading the same file twice returns the first module instead
    # of registering its classes again (which the registry rejects as duplicates).
    digest = hashlib.sha1(str(path).encode()).hexdigest()[:10]
    return f"pointrix_plugin_{path.stem}_{digest}"


def load_plugin(path: str | Path) -> ModuleType:
    """Import the Python file at ``path`` and return its module.

    Raises:
        ConfigError: the file does not exist or is not a ``.py`` file. Errors inside the plugin's
            own code propagate unchanged (with their traceback: that is the plugin author's bug).
    """
    path = Path(path).expanduser().resolve()
    if not path.is_file():
        raise ConfigError(f"--plugin {path}: file not found")
    if path.suffix != ".py":
        raise ConfigError(f"--plugin {path}: expected a .py file")
    name = plugin_module_name(path)
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # In sys.modules before executing: dataclasses (the components' Config) resolve string
    # annotations through sys.modules[cls.__module__].
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except PointrixError as exc:  # e.g. a name already registered: the user's to fix, in one line
        del sys.modules[name]
        raise ConfigError(f"--plugin {path}: {exc}") from None
    except BaseException:
        del sys.modules[name]
        raise
    return module
