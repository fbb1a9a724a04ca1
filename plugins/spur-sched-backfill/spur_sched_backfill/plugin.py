"""The pluggy object registered under entry point ``scheduler.backfill`` in group ``spur``."""

from __future__ import annotations

from typing import Any

from spur.core.scheduling import Plan, SchedSnapshot
from spur.hookspecs import hookimpl

from spur_sched_backfill.planner import plan


class BackfillScheduler:
    """Implements ``spur_schedule`` with conservative backfill (see ``spur_sched_backfill.planner``)."""

    @hookimpl
    def spur_schedule(self, snapshot: SchedSnapshot, options: dict[str, Any]) -> Plan:
        """Plan one pass. Raises ``BackfillOptionError`` for a malformed option; never mutates ``snapshot``."""
        return plan(snapshot, options)


plugin = BackfillScheduler()
