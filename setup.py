"""What pyproject.toml cannot say: a wheel that carries the native rasterizer prebuilt.

Without ``POINTRIX_WHEEL_TARGETS`` (``pip install -e .``, a plain ``python -m build``) the package is pure
Python and compiles the native rasterizer on first use. With it (``all``, or ``x86-64-v3,x86-64-v2``) each
target's module is built into the wheel, which needs torch in the build environment:

    POINTRIX_WHEEL_TARGETS=all .venv/bin/pip wheel --no-deps --no-build-isolation -w dist .

(docs/native.md, "Wheels": the manylinux tag, installing it).
"""

import os
import sys

from setuptools import setup

targets_value = os.environ.get("POINTRIX_WHEEL_TARGETS", "").strip()
if not targets_value:
    setup()
else:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    try:
        from pointrix_lite.renderer.native.wheel import build_ext_class, extensions, manifest, requested_targets
    except ImportError as exc:
        sys.exit(
            f"POINTRIX_WHEEL_TARGETS: building the prebuilt modules needs this project's dependencies (torch) in "
            f"the build environment: pip wheel --no-build-isolation ... ({exc})"
        )
    try:
        wheel = manifest(requested_targets(targets_value))
    except ValueError as exc:
        sys.exit(str(exc))
    setup(ext_modules=extensions(wheel), cmdclass={"build_ext": build_ext_class(wheel)})
