"""Group builders (base.py), one per file: what makes a training step's groups."""

from toolgym.training.groups.base import (
    BuildContext,
    Collect,
    GroupBuilder,
    PlaysRequests,
    ReportsMetrics,
    group_metrics,
)
from toolgym.training.groups.mixture import BuilderMixture
from toolgym.training.groups.tasks import TaskGroups

__all__ = [
    "BuildContext", "BuilderMixture", "Collect", "GroupBuilder", "PlaysRequests",
    "ReportsMetrics", "TaskGroups", "group_metrics",
]  # fmt: skip
