"""The accounting-flush duty in-process on a real Raft log: backoff on Trio's (mock) clock, and draining.

The database is a real PostgreSQL (the session's private server) or a closed port; time is Trio's
MockClock, so backoffs of up to 30 s are exercised without waiting for them.
"""

from __future__ import annotations

import trio
from trio.testing import MockClock

from integration.harness import free_port
from spur.accounting.pgstore import PgStore
from spur.accounting.runtime import AccountingRuntime
from spur.config import parse_config_text
from spur.controller.accounting_flusher import AccountingFlusher
from spur.controller.app import Controller
from spur.core.job import JobSpec
from spur.state import commands as c


def make_controller(tmp_path, url: str) -> Controller:
    cfg = parse_config_text(
        f'[accounting]\ndatabase_url = "{url}"\n', overrides={"controller.state_dir": str(tmp_path / "state")}
    )
    return Controller(cfg, listen=("127.0.0.1", 0))


async def finish_jobs(ctl: Controller, n: int) -> list[int]:
    ids = []
    for _ in range(n):
        job = await ctl.propose(
            c.SubmitJob(JobSpec(script="#!/bin/sh\n", work_dir="/tmp"), "u", 1, 1, "u", 1.0)
        )
        await ctl.propose(c.CancelJob(job, 0, 2.0))
        ids.append(job)
    return ids


def test_database_errors_back_off_exponentially_up_to_30s_and_records_wait(tmp_path) -> None:
    clock = MockClock(autojump_threshold=0.05)
    url = f"postgresql://spur:pw-9f3k@127.0.0.1:{free_port()}/spur"

    async def scenario() -> tuple[int, float, int, str]:
        ctl = make_controller(tmp_path, url)
        ctl.accounting.store = PgStore(url, connect_timeout=0.2)  # fail fast in real time
        async with trio.open_nursery() as nursery:
            await nursery.start(ctl.raft.run)
            while not ctl.is_leader:
                await trio.sleep(0.05)
            await ctl.propose(c.InitClusterId("cafe"))
            flusher = AccountingFlusher(ctl)
            await nursery.start(flusher.run)  # proposes SetAccountingStorage(True) before it starts
            await finish_jobs(ctl, 3)
            began = trio.current_time()
            await trio.sleep(300)
            errors = ctl.accounting.status.flush_errors
            result = (
                errors,
                trio.current_time() - began,
                ctl.state.domains["outbox"].depth,
                ctl.accounting.status.error,
            )
            nursery.cancel_scope.cancel()
        return result

    errors, elapsed, depth, error = trio.run(scenario, clock=clock)
    # 0.5 + 1 + 2 + 4 + 8 + 16 = 31.5 s, then every 30 s: about 15 attempts in 300 s, not thousands
    assert 8 <= errors <= 20, errors
    assert depth == 3 and "pw-9f3k" not in error and error


async def test_the_flusher_drains_the_outbox_into_postgresql(tmp_path, pg_db) -> None:
    import psycopg

    ctl = make_controller(tmp_path, pg_db)
    async with trio.open_nursery() as nursery:
        await nursery.start(ctl.raft.run)
        while not ctl.is_leader:
            await trio.sleep(0.05)
        await ctl.propose(c.InitClusterId("cafe"))
        await nursery.start(AccountingFlusher(ctl).run)
        ids = await finish_jobs(ctl, 25)
        with trio.fail_after(30):
            while ctl.state.domains["outbox"].depth or ctl.accounting.status.records_flushed < 25:
                await trio.sleep(0.05)
        nursery.cancel_scope.cancel()
    await ctl.accounting.aclose()
    with psycopg.connect(pg_db) as conn:
        rows = conn.execute("SELECT job_id, state FROM spur_jobs ORDER BY job_id").fetchall()
    assert rows == [(i, "CANCELLED") for i in ids]
    assert ctl.accounting.status.state == "connected" and ctl.accounting.status.schema_version == 2


def test_runtime_without_a_database_is_inert() -> None:
    runtime = AccountingRuntime(None)
    assert not runtime.configured and runtime.store is None and runtime.status.state == "not configured"
