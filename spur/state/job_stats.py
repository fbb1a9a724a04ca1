"""State domain ``job_stats``: how many jobs ever finished, by final state (for metrics).

Replicated like all state, so the counters are the same on every controller and survive restarts
and failovers. It has no commands: it only counts in ``on_job_finished`` (see spur.state.domain).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from spur.state.domain import StateDomain, StateQueries

if TYPE_CHECKING:
    from spur.core.job import Job


class JobStats(StateDomain):
    name = "job_stats"
    commands = ()

    def __init__(self, state: StateQueries) -> None:
        super().__init__(state)
        self.finished: dict[str, int] = {}
        self.finished_after_start = 0

    def on_job_finished(self, job: Job) -> None:
        key = job.state.value
        self.finished[key] = self.finished.get(key, 0) + 1
        if job.start_time:
            self.finished_after_start += 1

    def snapshot(self) -> Any:
        return {"finished": dict(self.finished), "finished_after_start": self.finished_after_start}

    def restore(self, body: Any | None) -> None:
        body = body or {}
        self.finished = {str(k): int(v) for k, v in body.get("finished", {}).items()}
        self.finished_after_start = int(body.get("finished_after_start", 0))
