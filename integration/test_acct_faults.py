"""Outbox fault tests: a real spurctld, a simulated fleet speaking the agent protocol, a real PostgreSQL.

- PostgreSQL crashes (``pg_ctl stop -m immediate``) while 2,000 jobs finish; scheduling goes on, the
  outbox holds the records (sdiag shows its depth and the error); once PostgreSQL is back every record
  arrives exactly once (row count == distinct keys == jobs).
- The controller is killed (-9) in the middle of a flush and restarted: no duplicate, no gap.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import psycopg
import pytest
import trio

from integration.fleet import Fleet, FleetConfig, fixed_runtime
from integration.harness import Cluster
from integration.postgres import PgCluster, find_pg_bin
from spur.rpc.proto import accounting_db_pb2 as apb
from spur.rpc.proto import spur_pb2 as pb

pytestmark = pytest.mark.integration

JOBS = 2000


class FaultCluster(Cluster):
    """Harness controller with fleet-friendly timers and an accounting database."""

    database_url: str = ""

    def write_conf(self) -> Path:
        conf = self.root / "spur.conf"
        conf.write_text(
            'cluster_name = "faults"\n'
            "[controller]\n"
            f'state_dir = "{self.root / "ctl"}"\n'
            "heartbeat_interval_secs = 2\n"
            "node_timeout_secs = 30\n"
            "kill_grace_secs = 1\n"
            "[scheduler]\n"
            "interval_secs = 0.2\n"
            "[accounting]\n"
            f'database_url = "{self.database_url}"\n'
        )
        return conf


@pytest.fixture
def private_pg():
    bin_dir = find_pg_bin()
    if bin_dir is None:
        pytest.skip("PostgreSQL binaries (initdb, pg_ctl) not found: run scripts/setup.sh as root")
    server = PgCluster(bin_dir)
    try:
        yield server.init()
    finally:
        server.destroy()


@pytest.fixture
def ctl(tmp_path: Path, private_pg: PgCluster):
    c = FaultCluster(tmp_path)
    c.database_url = private_pg.url
    c.start_controller()
    try:
        yield c
    finally:
        c.stop()


def _counts(pg: PgCluster) -> tuple[int, int]:
    try:
        with psycopg.connect(pg.url, connect_timeout=2) as conn:
            row = conn.execute(
                "SELECT count(*), count(DISTINCT (cluster_id, job_id, submit_time)) FROM spur_jobs"
            ).fetchone()
            return int(row[0]), int(row[1])
    except psycopg.Error:
        return -1, -1


async def _diag(address: str) -> apb.DiagResponse:
    from spur.auth.identity import identity_metadata
    from spur.controller.accounting_db_service import SERVICE
    from spur.rpc.channel import open_channel
    from spur.rpc.stub import Stub

    md = identity_metadata()
    async with open_channel(address, metadata_provider=lambda: md) as ch:
        return await Stub(ch, SERVICE).GetDiag(apb.DiagRequest(), timeout=10)


async def _wait(predicate, timeout: float, what: str, poll: float = 0.2):
    last = None
    with trio.move_on_after(timeout):
        while True:
            last = await predicate()
            if last:
                return last
            await trio.sleep(poll)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}; last value {last!r}")


async def _submit_array(fleet: Fleet, count: int) -> int:
    spec = pb.JobSpec(name="burst", script="#!/bin/sh\ntrue\n", work_dir="/tmp", array=f"0-{count - 1}")
    return (await fleet.call("SubmitJob", pb.SubmitJobRequest(spec=spec))).job_id


def _fleet(ctl: FaultCluster) -> Fleet:
    """50 simulated nodes of 8 CPUs whose jobs take 20 ms: 2,000 jobs finish in seconds."""
    return Fleet(
        FleetConfig(
            controller=ctl.address,
            nodes=50,
            cpus=8,
            heartbeat_secs=2.0,
            runtime=fixed_runtime(0.02),
            connections=2,
        )
    )


async def _finished(address: str, total: int) -> bool:
    d = await _diag(address)
    return d.jobs_completed >= total


async def test_postgresql_crash_while_2000_jobs_finish_loses_and_duplicates_nothing(
    ctl: FaultCluster, private_pg: PgCluster
) -> None:
    fleet = _fleet(ctl)
    with trio.fail_after(240):
        async with trio.open_nursery() as nursery:
            await nursery.start(fleet.run)
            # the database works: a first job's record arrives
            await _submit_array(fleet, 1)
            await _wait(
                lambda: trio.to_thread.run_sync(lambda: _counts(private_pg)[0] == 1), 30, "first record"
            )

            private_pg.stop("immediate")
            began = time.monotonic()
            await _submit_array(fleet, JOBS)
            await _wait(lambda: _finished(ctl.address, JOBS + 1), 120, f"{JOBS} jobs to finish")
            scheduled_in = time.monotonic() - began

            async def outbox_full() -> apb.DiagResponse | None:
                d = await _diag(ctl.address)
                return d if d.outbox_depth == JOBS and d.database_status == "unavailable" else None

            diag = await _wait(outbox_full, 60, "the outbox to hold every record and the error to show")
            assert private_pg.password not in diag.database_error
            assert diag.outbox_dropped == 0

            private_pg.start()

            async def drained() -> bool:
                d = await _diag(ctl.address)
                return d.outbox_depth == 0 and d.database_status == "connected"

            await _wait(drained, 90, "the outbox to drain", poll=0.5)
            total, distinct = await trio.to_thread.run_sync(lambda: _counts(private_pg))
            assert (total, distinct) == (JOBS + 1, JOBS + 1)
            print(f"{JOBS} jobs finished in {scheduled_in:.1f}s with PostgreSQL down; all flushed once")
            nursery.cancel_scope.cancel()


async def test_the_leader_killed_during_a_flush_resumes_without_duplicates_or_gaps(
    ctl: FaultCluster, private_pg: PgCluster
) -> None:
    fleet = _fleet(ctl)
    with trio.fail_after(240):
        async with trio.open_nursery() as nursery:
            await nursery.start(fleet.run)
            private_pg.stop("immediate")
            await _submit_array(fleet, JOBS)
            await _wait(lambda: _finished(ctl.address, JOBS), 120, f"{JOBS} jobs to finish")
            nursery.cancel_scope.cancel()

    # PostgreSQL comes back; kill -9 the controller as soon as the flush's rows are visible, i.e.
    # between the database commit and the replicated OutboxFlushed (or right after it).
    private_pg.start()
    deadline = time.monotonic() + 120
    while _counts(private_pg)[0] <= 0:
        assert time.monotonic() < deadline, "the flush never reached PostgreSQL"
        time.sleep(0.005)
    ctl.controller.kill(signal.SIGKILL)
    killed_at = _counts(private_pg)

    ctl.start_controller()

    async def drained() -> bool:
        d = await _diag(ctl.address)
        return d.outbox_depth == 0 and d.database_status == "connected"

    with trio.fail_after(120):
        await _wait(drained, 110, "the restarted leader to drain the outbox", poll=0.5)
    assert _counts(private_pg) == (JOBS, JOBS), f"rows when killed: {killed_at}"
    with psycopg.connect(private_pg.url) as conn:
        ids = [r[0] for r in conn.execute("SELECT job_id FROM spur_jobs ORDER BY job_id")]
    assert ids == list(range(ids[0], ids[0] + JOBS))  # no gap
