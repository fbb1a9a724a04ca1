"""Conservative backfill scheduler plugin for Spur (entry point ``scheduler.backfill``)."""

from spur_sched_backfill.planner import BackfillOptionError, BackfillOptions, BackfillPlanner, plan
from spur_sched_backfill.plugin import BackfillScheduler

__all__ = ["BackfillOptionError", "BackfillOptions", "BackfillPlanner", "BackfillScheduler", "plan"]
