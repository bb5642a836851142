"""Adapters that let other tools drive pointrix_lite through their own documented APIs.

Each lives in its own subpackage and imports its tool only where that tool calls in, so the project
installs and tests without them (``nerfbaselines/``: a method for ``nerfbaselines train``).
"""
