"""Accounting outbox flush rate into PostgreSQL (target: >= 5,000 job records/s).

Two figures, both against a private PostgreSQL server (integration/postgres.py):

1. store: ``PgStore.write_records`` of 5,000-record batches (one transaction, ``executemany``, the usage
   trigger included) for ``--records`` synthetic records with a step each; then the same records again
   (the idempotent re-send a new leader does).
2. end to end: a real spurctld with ``database_url`` set and PostgreSQL stopped runs a ``--jobs`` job
   array on a simulated fleet (real agent protocol), so the outbox fills; PostgreSQL is started and the
   time from the first row to an empty outbox is taken (write + replicated OutboxFlushed per batch).

Run: ``.venv/bin/python -m bench.acct_flush [--records 50000] [--jobs 10000]``.
"""

from __future__ import annotations

import argparse
import time

import psycopg
import trio

from bench.common import controller, print_table
from integration.postgres import PgCluster, find_pg_bin
from spur.accounting.pgstore import PgStore
from spur.accounting.records import job_record
from spur.core.job import Job, JobSpec, JobState, NodeAllocation, Step, StepSpec

BATCH = 5000


def synthetic(n: int, now: float) -> list[dict]:
    out = []
    for i in range(1, n + 1):
        start = now - 86400 + (i % 86000)
        job = Job(
            job_id=i,
            spec=JobSpec(name=f"job{i}", account=f"acct{i % 50}", work_dir="/home/u/run", cpus_per_task=4),
            user=f"user{i % 1000}",
            uid=10000 + i % 1000,
            state=JobState.COMPLETED,
            partition="batch",
            submit_time=start - 5,
            start_time=start,
            end_time=start + 600,
            time_limit_secs=3600,
            allocation=[NodeAllocation(f"n{i % 500:04d}", 4, 8000, [0])],
        )
        job.steps = [
            Step(
                0,
                StepSpec(argv=["/bin/app"]),
                JobState.COMPLETED,
                start,
                start + 600,
                0,
                0,
                [NodeAllocation(f"n{i % 500:04d}", 4, 0, [], 1)],
            )
        ]
        out.append(job_record(job, "bench"))
    return out


async def store_rate(url: str, records: list[dict]) -> list[tuple[str, int, float, float]]:
    store = PgStore(url)
    rows = []
    try:
        await store.migrate()
        for label in ("first write", "re-send (no-op)"):
            began = time.perf_counter()
            for i in range(0, len(records), BATCH):
                await store.write_records(records[i : i + BATCH])
            secs = time.perf_counter() - began
            rows.append((label, len(records), secs, len(records) / secs))
        total, distinct = await store.count("bench")
        assert total == distinct == len(records)
    finally:
        await store.aclose()
    return rows


async def end_to_end(pg: PgCluster, jobs: int) -> tuple[float, float]:
    from integration.fleet import Fleet, FleetConfig, fixed_runtime
    from spur.auth.identity import identity_metadata
    from spur.controller.accounting_db_service import SERVICE
    from spur.rpc.channel import open_channel
    from spur.rpc.proto import accounting_db_pb2 as apb
    from spur.rpc.proto import spur_pb2 as pb
    from spur.rpc.stub import Stub

    extra = f'[accounting]\ndatabase_url = "{pg.url}"\n'
    pg.stop("immediate")
    with controller(
        wal_fsync=False,
        heartbeat_interval_secs=5,
        node_timeout_secs=60,
        scheduler_interval_secs=0.2,
        extra=extra,
    ) as ctl:
        fleet = Fleet(
            FleetConfig(
                controller=ctl.address,
                nodes=100,
                cpus=16,
                heartbeat_secs=5.0,
                runtime=fixed_runtime(0.01),
                connections=2,
            )
        )
        md = identity_metadata()
        async with (
            trio.open_nursery() as nursery,
            open_channel(ctl.address, metadata_provider=lambda: md) as ch,
        ):
            await nursery.start(fleet.run)
            db = Stub(ch, SERVICE)
            spec = pb.JobSpec(name="b", script="#!/bin/sh\ntrue\n", work_dir="/tmp", array=f"0-{jobs - 1}")
            await fleet.call("SubmitJob", pb.SubmitJobRequest(spec=spec))
            while (await db.GetDiag(apb.DiagRequest(), timeout=30)).outbox_depth < jobs:
                await trio.sleep(0.5)
            nursery.cancel_scope.cancel()
        await trio.to_thread.run_sync(pg.start)
        started = time.perf_counter()

        def rows() -> int:
            try:
                with psycopg.connect(pg.url, connect_timeout=2) as conn:
                    return conn.execute("SELECT count(*) FROM spur_jobs").fetchone()[0]
            except psycopg.Error:
                return 0

        while await trio.to_thread.run_sync(rows) == 0:
            await trio.sleep(0.01)
        first = time.perf_counter()
        async with open_channel(ctl.address, metadata_provider=lambda: md) as ch:
            db = Stub(ch, SERVICE)
            while (await db.GetDiag(apb.DiagRequest(), timeout=30)).outbox_depth > 0:
                await trio.sleep(0.02)
        drained = time.perf_counter()
        assert await trio.to_thread.run_sync(rows) == jobs
    return first - started, drained - first


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=50_000)
    parser.add_argument("--jobs", type=int, default=10_000)
    args = parser.parse_args()
    bin_dir = find_pg_bin()
    if bin_dir is None:
        raise SystemExit("PostgreSQL is not installed (run scripts/setup.sh as root)")
    pg = PgCluster(bin_dir).init()
    try:
        records = synthetic(args.records, time.time())
        rows = trio.run(store_rate, pg.url, records)
        print_table(
            ["pass", "records", "secs", "records/s"],
            rows,
            title=f"PgStore.write_records, batches of {BATCH} (job row + step row + hourly usage)",
        )
        pg.psql("DROP SCHEMA public CASCADE; CREATE SCHEMA public")
        wait, drain = trio.run(end_to_end, pg, args.jobs)
        print_table(
            ["jobs", "retry wait s", "drain s", "records/s"],
            [(args.jobs, wait, drain, args.jobs / drain if drain else float("inf"))],
            title="spurctld outbox -> PostgreSQL after an outage (fleet sim; write + OutboxFlushed per batch)",
        )
    finally:
        pg.destroy()


if __name__ == "__main__":
    main()
