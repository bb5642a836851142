"""Hooks: the :class:`Hook` base, the site list and the built-in hooks (registered in ``HOOKS``).

Hooks that belong to a package above the engine live there (``PlyExportHook`` in ``export/``,
``ViewerHook`` in ``viewer/``); ``pointrix_lite.components`` imports those packages so YAML can name them.
"""

from .appearance_opt_hook import AppearanceOptHook
from .base import SITES, Hook
from .builder import build_hooks, format_hook_table, sort_hooks
from .checkpoint_hook import CheckPointHook
from .iter_timer_hook import IterTimerHook
from .log_hook import LogHook
from .nan_guard_hook import NaNGuardHook, NonFiniteLossError
from .pose_opt_hook import PoseOptHook
from .profiler_hook import ProfilerHook
from .resolution_hook import ResolutionScheduleHook
from .signature import HookSignatureError, check_hook_class

__all__ = [
    "SITES", "AppearanceOptHook", "Hook", "HookSignatureError", "build_hooks", "check_hook_class", "format_hook_table", "sort_hooks", "CheckPointHook", "IterTimerHook",
    "LogHook", "NaNGuardHook", "NonFiniteLossError", "PoseOptHook", "ProfilerHook", "ResolutionScheduleHook",
]
