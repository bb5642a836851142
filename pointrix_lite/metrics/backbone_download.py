"""The LPIPS backbone's ImageNet weights: fetched once per machine into torch's hub cache.

lpips and torchvision download this file on first use as well (``torch.hub.load_state_dict_from_url``,
same URL, same cache file). This is our own small version of that so that a run on a machine without
internet waits seconds, not minutes (a short socket timeout), the cache never holds a partial or corrupt
file (temp file + rename, only after the sha256 check against the prefix in torchvision's file name),
the user reads one line when it starts and one when it ends, and an offline cluster can switch it off
once for every run (``POINTRIX_LPIPS_DOWNLOAD=0``). When the weights stay missing, LPIPS is ``None``
with a one-line reason that names the URL and the cache path to copy the file to.
"""

from __future__ import annotations

import functools
import hashlib
import http.client
import os
import re
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import torch

from ..errors import ConfigError, PointrixError
from ..io.atomic import atomic_write

SWITCH = "POINTRIX_LPIPS_DOWNLOAD"
_ON, _OFF = ("1", "true", "yes", "on"), ("0", "false", "no", "off")
TIMEOUT_S = 5.0  # per connect and per read: a dead network fails fast, a slow download is not cut off
CHUNK = 1 << 20
# torch.hub's convention: the file name carries the first hex digits of the file's sha256.
_HASH_IN_NAME = re.compile(r"-([a-f0-9]{8,})\.")
# What a failed connection or transfer raises (URLError, timeouts and resets are OSErrors).
_NETWORK_ERRORS = (OSError, http.client.HTTPException, ValueError)

LpipsNet = Literal["vgg", "alex"]


class DownloadError(PointrixError):
    """The weights could not be fetched or did not verify; the cache is left as it was."""


def backbone_url(net: LpipsNet) -> str:
    """torchvision's URL of the ImageNet weights of the LPIPS backbone ``net``."""
    from torchvision.models import AlexNet_Weights, VGG16_Weights

    return {"vgg": VGG16_Weights.IMAGENET1K_V1.url, "alex": AlexNet_Weights.IMAGENET1K_V1.url}[net]


def backbone_weights_path(net: LpipsNet) -> Path:
    """Where torchvision caches those weights (``torch.hub.get_dir()``: ``$TORCH_HOME/hub``)."""
    return Path(torch.hub.get_dir()) / "checkpoints" / os.path.basename(backbone_url(net))


def download_enabled() -> bool:
    """Whether ``POINTRIX_LPIPS_DOWNLOAD`` allows fetching (unset: yes).

    Raises:
        ConfigError: a value that is neither on (1/true/yes/on) nor off (0/false/no/off).
    """
    value = os.environ.get(SWITCH, "").strip().lower()
    if value in ("", *_ON):
        return True
    if value in _OFF:
        return False
    raise ConfigError(
        f"{SWITCH}={os.environ[SWITCH]}: expected 0 or 1 (0 never downloads the LPIPS backbone weights; "
        "LPIPS is then null unless the file is in the torch hub cache)"
    )


def _download(url: str, path: Path) -> int:
    """Stream ``url`` into ``path`` through a temp file; returns the bytes written.

    Raises:
        DownloadError: network failure, a short transfer or a sha256 that does not match the name.
        CheckpointWriteError: the cache folder cannot be written (disk full, permissions).
    """
    match = _HASH_IN_NAME.search(path.name)
    size = 0

    def write(f) -> None:
        nonlocal size
        digest = hashlib.sha256()
        try:
            response = urllib.request.urlopen(url, timeout=TIMEOUT_S)
        except _NETWORK_ERRORS as exc:
            raise DownloadError(_why(exc)) from None
        with response:
            expected = response.headers.get("Content-Length")
            while True:
                try:
                    chunk = response.read(CHUNK)
                except _NETWORK_ERRORS as exc:
                    raise DownloadError(f"{_why(exc)} after {size} bytes") from None
                if not chunk:
                    break
                f.write(chunk)  # a full disk here is an OSError, reported as a write error, not a network one
                digest.update(chunk)
                size += len(chunk)
        if expected is not None and expected.isdigit() and size != int(expected):
            raise DownloadError(f"transfer ended after {size} of {expected} bytes")
        if match and not digest.hexdigest().startswith(match.group(1)):
            raise DownloadError(
                f"sha256 {digest.hexdigest()[:8]} does not match {match.group(1)} in the file name (corrupt transfer)"
            )

    atomic_write(path, write)  # raising inside write() removes the temp file: nothing half-written stays
    return size


def _why(exc: BaseException) -> str:
    # A URLError wraps the socket error, which says more; an HTTPError's own text has the status code.
    wrapped = (
        exc.reason if isinstance(exc, urllib.error.URLError) and not isinstance(exc, urllib.error.HTTPError) else exc
    )
    return " ".join(str(wrapped).split()) or type(exc).__name__


@functools.lru_cache(maxsize=8)
def _cached_file_ok(path: Path, size: int, mtime_ns: int) -> str | None:
    """None when ``path``'s sha256 starts with the prefix in its name (torch.hub's convention), else the
    digest's first digits. Once per process per file version: hashing 0.5 GB takes about a second."""
    match = _HASH_IN_NAME.search(path.name)
    if not match:
        return None
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(CHUNK), b""):
            digest.update(chunk)
    return None if digest.hexdigest().startswith(match.group(1)) else digest.hexdigest()[:8]


def check_cached(net: LpipsNet, path: Path, url: str) -> str | None:
    """The reason a cached weights file cannot be used (a copy cut short, a disk error, another file under
    that name), or None: checked when loading, not only after a download, since the cache outlives both."""
    # What to do about a bad file: with downloads on, deleting it is enough; with them off, a good copy is needed.
    off = os.environ.get(SWITCH, "").strip().lower() in _OFF
    fix = (
        f"delete it and copy {url} there (downloads are off: {SWITCH}=0)"
        if off
        else f"delete it to download it again, or copy {url} there"
    )
    try:
        st = path.stat()
        wrong = _cached_file_ok(path, st.st_size, st.st_mtime_ns)
    except OSError as exc:  # no permission, an I/O error: the run goes on without LPIPS
        return f"unavailable: {path} cannot be read ({exc.strerror or exc}); {fix}"
    if wrong is None:
        return None
    expected = _HASH_IN_NAME.search(path.name).group(1)
    return f"unavailable: {path} is corrupt (sha256 {wrong} does not match {expected} in its name); {fix}"


def ensure_backbone(net: LpipsNet, announce: Callable[[str], object] = print) -> str | None:
    """Make sure ``net``'s weights are in the hub cache, downloading them when allowed.

    Args:
        net: ``"vgg"`` or ``"alex"``.
        announce: Gets one line when a download starts and one when it ends (or fails).

    Returns:
        ``None`` when the file is there (already, or now), else one line saying why not and how to fix it.

    Raises:
        ConfigError: ``POINTRIX_LPIPS_DOWNLOAD`` has a value that is neither on nor off.
    """
    path, url = backbone_weights_path(net), backbone_url(net)
    if path.is_file():
        reason = check_cached(net, path, url)
        if reason is not None:
            announce(f"LPIPS: {reason}")
        return reason
    if not download_enabled():
        return f"unavailable: {net} weights not in torch hub cache ({path}); downloads are off ({SWITCH}=0): copy {url} there"
    announce(
        f"LPIPS: downloading the {net} backbone weights (once per machine) from {url} to {path}; {SWITCH}=0 turns this off"
    )
    start = time.perf_counter()
    try:
        size = _download(url, path)
    except PointrixError as exc:  # DownloadError, or the cache folder not writable
        if path.is_file():  # another process (a second rank) finished the same file meanwhile
            return None
        reason = (
            f"unavailable: {net} weights could not be downloaded ({exc}); copy {url} to {path}, "
            f"or set {SWITCH}=0 on machines without internet"
        )
        announce(f"LPIPS: {reason}")
        return reason
    announce(f"LPIPS: {path.name} downloaded ({size / 1e6:.0f} MB in {time.perf_counter() - start:.0f} s)")
    return None
