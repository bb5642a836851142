"""Check, before anything runs, that a hook's site methods can be called the way the trainer calls them.

The trainer calls sites with keywords only (``after_train_iter(batch_idx=..., batch=...)``) and a
hook reaches the trainer as ``self.trainer``. Hooks ported from Pointrix (``def
after_train_iter(self, trainner)``) or MMEngine (``def after_train_iter(self, runner, batch_idx,
data_batch=None, outputs=None)``) take the trainer as an argument instead; without this check they
fail with a ``TypeError`` only when their site first fires, possibly hours into a run.

They are rejected, not adapted: an adapted hook would still fail at run time on the first
attribute its body reads from the other project's runner (``runner.iter``,
``runner.message_hub``, ``trainner.cfg.bar_upd_interval``), so a silent adapter only moves the
failure back into training. docs/porting.md lists what to rename.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

from ...errors import ConfigError
from ...hook import SITES, Hook

PORTING_DOC = "docs/porting.md#hook-sites-and-their-arguments"


class HookSignatureError(ConfigError, TypeError):
    """A hook site that cannot be called as the trainer calls it (a TypeError too, as it would be at run time)."""


def _plain(sig: inspect.Signature) -> str:
    """``(self, batch_idx: int, batch: list) -> None`` -> ``(self, batch_idx, batch)``."""
    params = [p.replace(annotation=inspect.Parameter.empty) for p in sig.parameters.values()]
    return str(sig.replace(parameters=params, return_annotation=inspect.Signature.empty))


def site_keywords(site: str) -> tuple[str, ...]:
    """The keyword arguments the trainer passes at ``site`` (from :class:`Hook`'s own method)."""
    return tuple(inspect.signature(getattr(Hook, site)).parameters)[1:]


def _where_defined(fn: Any) -> str:
    code = getattr(inspect.unwrap(fn), "__code__", None)
    return f" ({Path(code.co_filename).name}:{code.co_firstlineno})" if code is not None else ""


def check_hook_class(cls: type, key_path: str) -> None:
    """Raise :class:`HookSignatureError` for the first site of ``cls`` the trainer could not call.

    Only sites ``cls`` overrides are checked (the base's no-ops always fit). A site may add
    optional parameters or ``**kwargs``; it may not require others or take only positionals.

    Args:
        cls: A hook class.
        key_path: Where the hook comes from (``hooks.MyHook``), for the message.
    """
    for site in SITES:
        raw = inspect.getattr_static(cls, site, None)
        if raw is None or raw is inspect.getattr_static(Hook, site):
            continue
        # Bind the way the bound method is called: `self` (or the class) first, then keywords.
        if isinstance(raw, staticmethod):
            fn, first = raw.__func__, ()
        elif isinstance(raw, classmethod):
            fn, first = raw.__func__, (cls,)
        elif inspect.isfunction(raw):
            fn, first = raw, (object(),)
        elif callable(raw):  # a callable object stored on the class: called without self
            fn, first = raw, ()
        else:
            raise HookSignatureError(
                f"{key_path}: {cls.__name__}.{site} is {type(raw).__name__} {raw!r}, not a method; "
                f"rename it or make it a method (see {PORTING_DOC})"
            )
        try:
            sig = inspect.signature(fn)
        except (TypeError, ValueError):  # a builtin without a signature: nothing to check against
            continue
        keywords = site_keywords(site)
        try:
            sig.bind(*first, **{k: None for k in keywords})
        except TypeError:
            needs = _plain(inspect.signature(getattr(Hook, site)))
            raise HookSignatureError(
                f"{key_path}: {cls.__name__}.{site}{_plain(sig)}{_where_defined(fn)} cannot be called as the "
                f"trainer calls it, {site}{needs}; a hook reaches the trainer as self.trainer, not as an "
                f"argument (see {PORTING_DOC})"
            ) from None
