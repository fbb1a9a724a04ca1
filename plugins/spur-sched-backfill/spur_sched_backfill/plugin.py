"""The pluggy object registered under entry point ``scheduler.backfill`` in group ``spur``."""

from __future__ import annotations

from typing import Any

from spur.core.job import NodeAllocation
from spur.core.scheduling import PendingView, Plan, SchedSnapshot
from spur.hookspecs import hookimpl

from spur_sched_backfill.planner import place_now, plan


class BackfillScheduler:
    """Implements ``spur_schedule`` with conservative backfill (see ``spur_sched_backfill.planner``)."""

    @hookimpl
    def spur_schedule(self, snapshot: SchedSnapshot, options: dict[str, Any]) -> Plan:
        """Plan one pass. Raises ``BackfillOptionError`` for a malformed option; never mutates ``snapshot``."""
        return plan(snapshot, options)

    @hookimpl
    def spur_place_now(
        self, snapshot: SchedSnapshot, job: PendingView, options: dict[str, Any]
    ) -> tuple[NodeAllocation, ...] | None:
        """Where ``job`` starts now, chosen as a pass would choose for the first job in the queue."""
        return place_now(snapshot, job, options)


plugin = BackfillScheduler()
