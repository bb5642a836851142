"""Browser viewer (viser): ``scripts/view.py`` for a trained model, :class:`ViewerHook` during training.

viser is imported only when a server starts, so registering the hook costs nothing.
"""

from .hook import ViewerHook

__all__ = ["ViewerHook"]
