"""Leader duty "accounting-flush": move the replicated outbox into PostgreSQL.

Loop: take the oldest records of the outbox, upsert them in one transaction (``executemany``), then
propose :class:`~spur.state.outbox.OutboxFlushed` with their keys. Only committed rows leave the outbox,
and the upsert makes a re-sent batch harmless, so a crash or a step-down at any point (before the
write, during it, between commit and proposal) loses nothing and duplicates nothing: the next leader
simply sends the same records again.

Database errors back off exponentially (``trio.sleep``: Trio's clock, so MockClock drives it in tests)
and retry for ever; scheduling never waits for this task. While the outbox is empty the database is
pinged every ``health_interval`` seconds so sdiag shows an outage before records pile up.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Protocol

import trio

from spur.accounting.pgstore import StoreError
from spur.accounting.runtime import CONNECTED, UNAVAILABLE
from spur.rpc.status import RpcError
from spur.state.outbox import OutboxDomain, OutboxFlushed, SetAccountingStorage

if TYPE_CHECKING:
    from spur.accounting.runtime import AccountingRuntime
    from spur.core.clock import Clock
    from spur.state.machine import ClusterState


class FlusherHost(Protocol):
    """What the flusher needs of the leader's controller (``spur.controller.app.Controller``)."""

    @property
    def accounting(self) -> AccountingRuntime: ...

    @property
    def state(self) -> ClusterState: ...

    @property
    def clock(self) -> Clock: ...

    async def raft_propose_quiet(self, cmd: Any) -> Any: ...

    async def wait_change(self) -> None: ...

__all__ = ["AccountingFlusher"]

log = logging.getLogger("spur.accounting")


class AccountingFlusher:
    """One per leader term; ``run`` is started in the leader-duties nursery."""

    def __init__(
        self,
        ctl: FlusherHost,
        *,
        batch_size: int = 5000,
        backoff_initial: float = 0.5,
        backoff_max: float = 30.0,
        health_interval: float = 10.0,
    ) -> None:
        self.ctl = ctl
        self.batch_size = batch_size
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self.health_interval = health_interval
        self._backoff = backoff_initial

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        ctl = self.ctl
        runtime = ctl.accounting
        outbox = ctl.state.domain(OutboxDomain)
        if outbox.enabled != runtime.configured:
            # Replicated, so every controller's outbox records the same finished jobs from here on.
            await ctl.raft_propose_quiet(SetAccountingStorage(runtime.configured))
        task_status.started()
        store = runtime.store
        if store is None:  # no database, or a URL that does not parse (the status says why)
            await trio.sleep_forever()
        migrated = False
        idle_since = trio.current_time()
        while True:
            try:
                if not migrated:
                    runtime.status.schema_version = await store.migrate()
                    migrated = True
                    runtime.status.set_state(CONNECTED)
                batch = outbox.batch(self.batch_size)
                if not batch:
                    if trio.current_time() - idle_since >= self.health_interval:
                        await store.schema_version()
                        runtime.status.set_state(CONNECTED)
                        idle_since = trio.current_time()
                    with trio.move_on_after(1.0):
                        await ctl.wait_change()
                    continue
                began = trio.current_time()
                written = await store.write_records(batch)
            except StoreError as exc:
                # Migrate again before the next write: the database may have been replaced meanwhile
                # (restored from a backup, recreated empty); migrating a current schema is a no-op.
                migrated = False
                runtime.status.flush_errors += 1
                runtime.status.set_state(UNAVAILABLE, str(exc))
                await self._back_off()
                continue
            took = trio.current_time() - began
            result = await ctl.raft_propose_quiet(
                OutboxFlushed([[r["job_id"], r["submit_time"]] for r in batch])
            )
            if isinstance(result, RpcError):
                # Not committed (e.g. leadership is going): the rows are in PostgreSQL, the records stay
                # in the outbox and are re-sent (harmlessly) by whoever leads next.
                await self._back_off()
                continue
            status = runtime.status
            status.set_state(CONNECTED)
            status.last_flush_time = ctl.clock.wall()
            status.last_flush_records = written
            status.last_flush_rate = written / took if took > 0 else 0.0
            status.records_flushed += written
            self._backoff = self.backoff_initial
            idle_since = trio.current_time()

    async def _back_off(self) -> None:
        await trio.sleep(self._backoff)
        self._backoff = min(self.backoff_max, self._backoff * 2)
