"""Import every package that registers components, tolerating packages not written yet.

The command line calls :func:`import_all` before reading a config so that every registered
name (``GaussianModel``, ``LogHook``, ...) is available to the YAML.
"""

from __future__ import annotations

import importlib

# Registration happens at import time (class decorators), so this list is what YAML can name. Each hook is
# registered by the package of the feature it serves: the trainer's own by engine.hooks, PoseOptHook and
# AppearanceOptHook by model, ResolutionScheduleHook by data, PlyExportHook by export, ViewerHook by viewer.
COMPONENT_MODULES: tuple[str, ...] = (
    "pointrix_lite.engine.hooks",
    "pointrix_lite.writers",
    "pointrix_lite.data",
    "pointrix_lite.model",
    "pointrix_lite.renderer",
    "pointrix_lite.strategy",
    "pointrix_lite.export",
    "pointrix_lite.viewer",
)


def import_all() -> list[str]:
    """Import :data:`COMPONENT_MODULES`; returns the ones that do not exist (yet).

    Only a missing component package itself is tolerated: an ImportError raised *inside* an
    existing package (a missing dependency, a typo) propagates, it is a real bug.
    """
    missing = []
    for name in COMPONENT_MODULES:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            missing.append(name)
    return missing
