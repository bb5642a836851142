"""File names made from view names: safe on every file system, unique within a split, stable across runs.

A view's name is its image's stem, which may hold characters a file name should not (``?``, ``*``,
spaces, path separators). Replacing them alone makes distinct views share a file ("a b" and "a?b"
both ``a_b``), so one view's render overwrites another's and ``metrics.json`` names a view whose
file is gone. Here a name the replacement changed keeps its readable part and gains a short hash of
the original (``a_b-3f1c29e0``): the same view always gets the same file, whatever else the split
holds. Names left as they were keep their file name (``r_0`` -> ``r_0.png``) unless two of them
still meet, as ``x.png`` and ``x`` do after the image extension is cut, or ``A`` and ``a`` on a file
system that ignores case; those take the hash too.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Iterable

IMAGE_SUFFIX = re.compile(r"\.(png|jpe?g|exr|tiff?)$", re.IGNORECASE)
UNSAFE = re.compile(r"[^\w.-]+")
MAX_STEM = 120  # characters of the readable part: with the hash and a suffix well under 255 bytes


def name_hash(name: str) -> str:
    """8 hex digits of SHA-1 of ``name``: stable across runs and machines, unlike ``hash()``."""
    return hashlib.sha1(name.encode("utf-8", "surrogatepass")).hexdigest()[:8]


def safe_stem(name: str, pattern: re.Pattern[str] = UNSAFE) -> str:
    """``name`` without an image extension, runs of ``pattern`` replaced by ``_``; when that changed
    it (or left nothing readable, or too much), the readable part plus ``-`` and :func:`name_hash`."""
    stem = IMAGE_SUFFIX.sub("", name)
    safe = pattern.sub("_", stem)
    if safe == stem and stem.strip(".") and len(stem) <= MAX_STEM:
        return safe
    return f"{safe[:MAX_STEM]}-{name_hash(name)}"


def unique_stems(names: Iterable[str]) -> dict[str, str]:
    """``{name: file stem}`` for the views of one split: :func:`safe_stem`, with the hash appended to
    any stems that still meet (compared case-folded: macOS and Windows file systems ignore case)."""
    names = list(dict.fromkeys(names))
    stems = {name: safe_stem(name) for name in names}
    for _ in range(3):  # a hashed stem could meet a view literally named like it: hash once more
        taken = Counter(stem.casefold() for stem in stems.values())
        clashing = [name for name, stem in stems.items() if taken[stem.casefold()] > 1]
        if not clashing:
            break
        for name in clashing:
            stems[name] = f"{stems[name]}-{name_hash(name)}"
    return stems
