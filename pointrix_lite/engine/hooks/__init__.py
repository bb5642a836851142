"""Hooks: the trainer's own hooks (registered in ``HOOKS``), how they are built, and re-exports.

Every hook lives with the feature it serves: the trainer's own (logging, checkpoints, NaN guard,
timing, profiling) here; ``PoseOptHook`` and ``AppearanceOptHook`` in ``model/``,
``ResolutionScheduleHook`` in ``data/``, ``PlyExportHook`` in ``export/``, ``ViewerHook`` in
``viewer/``. The :class:`Hook` base, :data:`SITES` and priorities are in ``pointrix_lite/hook/``,
below all of them. This package re-exports them and the hooks below the engine, so
``from pointrix_lite.engine.hooks import Hook, PoseOptHook`` keeps working;
``pointrix_lite.components`` imports ``export/`` and ``viewer/`` so YAML can name their hooks.
"""

from ...data.resolution_hook import ResolutionScheduleHook
from ...hook import HOOK_ENGINE_KEYS, SITES, Hook, Priority, get_priority, priority_name
from ...model.appearance_hook import AppearanceOptHook
from ...model.pose_hook import PoseOptHook
from .builder import build_hooks, format_hook_table, sort_hooks
from .checkpoint_hook import CheckPointHook
from .iter_timer_hook import IterTimerHook
from .log_hook import LogHook
from .nan_guard_hook import NaNGuardHook, NonFiniteLossError
from .profiler_hook import ProfilerHook
from .signature import HookSignatureError, check_hook_class

__all__ = [
    "HOOK_ENGINE_KEYS",
    "SITES",
    "AppearanceOptHook",
    "Hook",
    "HookSignatureError",
    "Priority",
    "build_hooks",
    "check_hook_class",
    "format_hook_table",
    "get_priority",
    "priority_name",
    "sort_hooks",
    "CheckPointHook",
    "IterTimerHook",
    "LogHook",
    "NaNGuardHook",
    "NonFiniteLossError",
    "PoseOptHook",
    "ProfilerHook",
    "ResolutionScheduleHook",
]
