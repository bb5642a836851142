"""The :class:`Hook` base class, the site list and hook priorities: what every hook is built on.

It sits below every package that has hooks, so each hook lives with the feature it serves
(``PoseOptHook`` in ``model/``, ``ResolutionScheduleHook`` in ``data/``, ``PlyExportHook`` in
``export/``, ``ViewerHook`` in ``viewer/``); the trainer's own hooks are in ``engine/hooks/``.
"""

from .base import HOOK_ENGINE_KEYS, SITES, Hook, TrainerLike
from .priority import Priority, get_priority, priority_name

__all__ = ["HOOK_ENGINE_KEYS", "SITES", "Hook", "Priority", "TrainerLike", "get_priority", "priority_name"]
