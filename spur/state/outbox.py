"""The accounting outbox: finished jobs' records waiting to be confirmed by PostgreSQL (a state domain).

Records enter in the apply that finished the job (:meth:`OutboxDomain.on_job_finished`) and leave only
through :class:`OutboxFlushed`, which the leader proposes after PostgreSQL committed their rows. So a
database outage, a slow database or a leader change loses nothing: a new leader re-sends whatever is
still here, and the upsert on (cluster id, job id, submit time) writes nothing twice.

Records enter only while accounting storage is enabled. Whether it is enabled is replicated state,
not each controller's configuration: apply must be deterministic, and two controllers with different
config files must still build the same outbox. The leader proposes :class:`SetAccountingStorage` at
the start of its term with ``enabled = database_url is set``. Without a database nothing is recorded
(the embedded history serves sacct), so an unconfigured cluster pays nothing. When storage is turned
off, records already queued stay and are flushed once it is on again.

The outbox is bounded (``max_records``, stamped into the same command): at the bound the oldest
record is dropped and counted in ``dropped`` (shown by sdiag), so an outage of days cannot grow the
replicated state and its snapshots without limit. The default bound (1,000,000) holds more than a
week of a busy site's jobs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from spur.accounting.records import JobRecord, job_record, key_text
from spur.core.job import Job
from spur.state.domain import Rejected, StateDomain, StateQueries

DEFAULT_MAX_RECORDS = 1_000_000


@dataclass
class SetAccountingStorage:
    """Leader at term start: whether finished jobs are queued for PostgreSQL, and the outbox bound."""

    enabled: bool
    max_records: int = DEFAULT_MAX_RECORDS


@dataclass
class OutboxFlushed:
    """PostgreSQL committed these records: ``keys`` are [job id, submit time] pairs."""

    keys: list[list[float]] = field(default_factory=list)


class OutboxDomain(StateDomain):
    """Ordered records keyed by :func:`spur.accounting.records.key_text` (oldest first)."""

    name = "outbox"
    commands = (SetAccountingStorage, OutboxFlushed)

    def __init__(self, state: StateQueries) -> None:
        super().__init__(state)
        self.enabled = False
        self.max_records = DEFAULT_MAX_RECORDS
        self.records: dict[str, JobRecord] = {}
        self.dropped = 0
        self.appended = 0

    # ------------------------------------------------------------------ queries

    @property
    def depth(self) -> int:
        """Records waiting for PostgreSQL."""
        return len(self.records)

    def batch(self, limit: int) -> list[JobRecord]:
        """The oldest ``limit`` records (read-only views: callers must not change them)."""
        out: list[JobRecord] = []
        for rec in self.records.values():
            if len(out) >= limit:
                break
            out.append(rec)
        return out

    # ------------------------------------------------------------------ apply

    def _apply_SetAccountingStorage(self, cmd: SetAccountingStorage) -> Any:
        if cmd.max_records < 1:
            return Rejected("INVALID_ARGUMENT", "the outbox bound must be at least 1")
        self.enabled = bool(cmd.enabled)
        self.max_records = int(cmd.max_records)
        self._trim()
        return self.enabled

    def _apply_OutboxFlushed(self, cmd: OutboxFlushed) -> Any:
        removed = 0
        for key in cmd.keys:
            if len(key) != 2:
                continue
            if self.records.pop(key_text(int(key[0]), float(key[1])), None) is not None:
                removed += 1
        return removed

    def on_job_finished(self, job: Job) -> None:
        if not self.enabled:
            return
        rec = job_record(job, self.state.cluster_id)
        key = key_text(job.job_id, job.submit_time)
        self.records.pop(key, None)  # a requeued job that finished again: the newer record wins
        self.records[key] = rec
        self.appended += 1
        self._trim()

    def _trim(self) -> None:
        while len(self.records) > self.max_records:
            self.records.pop(next(iter(self.records)))
            self.dropped += 1

    # ------------------------------------------------------------------ snapshot

    def snapshot(self) -> Any:
        return {
            "enabled": self.enabled,
            "max_records": self.max_records,
            "dropped": self.dropped,
            "appended": self.appended,
            "records": list(self.records.values()),
        }

    def restore(self, body: Any | None) -> None:
        body = body or {}
        self.enabled = bool(body.get("enabled", False))
        self.max_records = int(body.get("max_records", DEFAULT_MAX_RECORDS))
        self.dropped = int(body.get("dropped", 0))
        self.appended = int(body.get("appended", 0))
        self.records = {key_text(r["job_id"], r["submit_time"]): r for r in body.get("records", [])}
