"""The PostgreSQL accounting store against a real private PostgreSQL server (no mocks)."""

from __future__ import annotations

import time

import psycopg
import pytest
import trio

from integration.harness import free_port
from spur.accounting.migrations import LATEST
from spur.accounting.pgstore import JobQuery, PgStore, StoreError, migrate_to
from spur.accounting.records import job_record
from spur.core.job import Job, JobSpec, JobState, NodeAllocation, Step, StepSpec

HOUR = 3600.0
T0 = 1_700_000_000.0 - (1_700_000_000.0 % HOUR)  # an hour boundary


def make_job(
    job_id: int,
    *,
    user: str = "alice",
    account: str = "physics",
    start: float = T0,
    end: float = T0 + 1800,
    cpus: int = 4,
    gpus: int = 0,
    state: JobState = JobState.COMPLETED,
    **spec,
) -> Job:
    spec.setdefault("name", f"job{job_id}")
    spec.setdefault("account", account)
    job = Job(
        job_id=job_id,
        spec=JobSpec(**spec),
        user=user,
        uid=1000,
        state=state,
        partition="debug",
        submit_time=start - 10,
        start_time=start,
        end_time=end,
        time_limit_secs=3600,
        allocation=[NodeAllocation("n1", cpus, 1000, list(range(gpus)))],
    )
    job.steps = [
        Step(
            0,
            StepSpec(argv=["/bin/hostname"]),
            JobState.COMPLETED,
            start,
            end,
            0,
            0,
            [NodeAllocation("n1", cpus, 0, [], 2)],
        )
    ]
    return job


def _usage(url: str) -> dict[tuple[str, str, int], float]:
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT account, user_name, hour, cpu_seconds FROM spur_usage_hourly").fetchall()
    return {(a, u, int(h)): c for a, u, h, c in rows if c}


async def test_migrations_from_an_empty_database_and_again(pg_db) -> None:
    store = PgStore(pg_db)
    try:
        assert await store.schema_version() == 0
        assert await store.migrate() == LATEST
        assert await store.migrate() == LATEST
        assert await store.schema_version() == LATEST
    finally:
        await store.aclose()
    with psycopg.connect(pg_db) as conn:
        versions = [v for (v,) in conn.execute("SELECT version FROM spur_schema_version ORDER BY 1")]
    assert versions == list(range(1, LATEST + 1))


async def test_a_schema_of_the_previous_release_migrates_and_keeps_its_rows(pg_db) -> None:
    with psycopg.connect(pg_db) as conn:
        assert migrate_to(conn, 1) == 1
        conn.execute(
            "INSERT INTO spur_jobs (cluster_id, job_id, submit_time, name, user_name, account, partition,"
            " state, exit_code, start_time, end_time, nodelist, cpus) VALUES"
            " ('c1', 7, %s, 'old', 'bob', 'chem', 'debug', 'COMPLETED', 0, %s, %s, 'n3', 2)",
            [T0 - 5, T0, T0 + HOUR],
        )
        conn.commit()
    store = PgStore(pg_db)
    try:
        assert await store.migrate() == LATEST
        records = await store.jobs(JobQuery("c1", start=0, end=T0 + 10 * HOUR))
    finally:
        await store.aclose()
    assert len(records) == 1
    job = records[0]["job"]
    assert (job["job_id"], job["user"], job["spec"]["account"], job["state"]) == (
        7,
        "bob",
        "chem",
        "COMPLETED",
    )
    assert _usage(pg_db) == {("chem", "bob", int(T0)): 2 * HOUR}


async def test_two_migrators_at_once_apply_each_migration_once(pg_db) -> None:
    stores = [PgStore(pg_db), PgStore(pg_db)]
    results: list[int] = []
    try:
        async with trio.open_nursery() as nursery:
            for s in stores:
                nursery.start_soon(lambda s=s: _append(results, s.migrate()))
    finally:
        for s in stores:
            await s.aclose()
    assert results == [LATEST, LATEST]
    with psycopg.connect(pg_db) as conn:
        assert conn.execute("SELECT count(*) FROM spur_schema_version").fetchone()[0] == LATEST


async def _append(out: list, coro) -> None:
    out.append(await coro)


async def test_the_upsert_is_idempotent_and_usage_is_never_counted_twice(pg_db) -> None:
    store = PgStore(pg_db)
    try:
        await store.migrate()
        # 2 hours over three hour buckets, 4 cpus, 1 gpu
        records = [
            job_record(make_job(i, start=T0 + 1800, end=T0 + 2 * HOUR + 1800, gpus=1), "c1")
            for i in range(1, 51)
        ]
        assert await store.write_records(records) == 50
        assert await store.write_records(records) == 50
        assert await store.write_records(records[:10]) == 10
        assert await store.count("c1") == (50, 50)
        usage = _usage(pg_db)
        assert usage == {
            ("physics", "alice", int(T0)): 50 * 1800 * 4,
            ("physics", "alice", int(T0 + HOUR)): 50 * HOUR * 4,
            ("physics", "alice", int(T0 + 2 * HOUR)): 50 * 1800 * 4,
        }
        # A changed record (requeued and finished again) replaces the row and its usage.
        changed = job_record(make_job(1, start=T0 + 1800, end=T0 + 1800 + 60, gpus=1), "c1")
        changed["submit_time"] = records[0]["submit_time"]
        changed["job"]["submit_time"] = records[0]["submit_time"]
        await store.write_records([changed])
        assert await store.count("c1") == (50, 50)
        rows = await store.usage("c1", T0, T0 + 3 * HOUR)
        assert len(rows) == 1 and rows[0].cpu_seconds == 49 * 2 * HOUR * 4 + 60 * 4
        assert rows[0].gpu_seconds == 49 * 2 * HOUR + 60
        with psycopg.connect(pg_db) as conn:
            assert conn.execute("SELECT count(*) FROM spur_steps").fetchone()[0] == 50
    finally:
        await store.aclose()


async def test_queries_filter_like_sacct(pg_db) -> None:
    store = PgStore(pg_db)
    try:
        await store.migrate()
        jobs = [
            make_job(1, user="alice", account="physics"),
            make_job(2, user="bob", account="chem", state=JobState.FAILED),
            make_job(3, user="alice", account="chem", start=T0 - 3 * 86400, end=T0 - 2 * 86400),
        ]
        task = make_job(11, user="bob", account="chem")
        task.array_job_id, task.array_task_id = 10, 1
        await store.write_records([job_record(j, "c1") for j in [*jobs, task]])
        await store.write_records([job_record(make_job(1, user="zed"), "other-cluster")])

        async def ids(**kw) -> list[int]:
            q = JobQuery("c1", start=kw.pop("start", T0 - 86400), end=kw.pop("end", T0 + 86400), **kw)
            return [r["job_id"] for r in await store.jobs(q)]

        assert await ids() == [1, 2, 11]
        assert await ids(start=0) == [1, 2, 3, 11]
        assert await ids(users=["alice"]) == [1]
        assert await ids(accounts=["chem"]) == [2, 11]
        assert await ids(states=["FAILED"]) == [2]
        assert await ids(names=["job11"]) == [11]
        assert await ids(jobs=[(10, None)]) == [11]
        assert await ids(jobs=[(10, 1), (1, None)]) == [1, 11]
        assert await ids(jobs=[(10, 2)]) == []
        assert await ids(partitions=["nope"]) == []
    finally:
        await store.aclose()


async def test_a_cancelled_call_cancels_the_statement_and_the_store_stays_usable(pg_db) -> None:
    store = PgStore(pg_db)
    try:
        await store.migrate()
        began = time.monotonic()
        with trio.move_on_after(0.3):
            await store._run(lambda conn: conn.execute("SELECT pg_sleep(5)").fetchall())
        assert time.monotonic() - began < 3.0
        assert await store.schema_version() == LATEST
    finally:
        await store.aclose()


async def test_an_unreachable_database_is_a_clear_error_without_the_password() -> None:
    url = f"postgresql://spur:hunter2-secret@127.0.0.1:{free_port()}/spur"
    store = PgStore(url, connect_timeout=1.0)
    try:
        with pytest.raises(StoreError) as info:
            await store.migrate()
    finally:
        await store.aclose()
    assert "hunter2-secret" not in str(info.value)
    assert "refused" in str(info.value).lower() or "failed" in str(info.value).lower()
    assert store.display_url == "postgresql://spur:***@127.0.0.1:" + url.rsplit(":", 1)[1]


def test_a_url_that_does_not_parse_is_refused_without_the_password() -> None:
    from spur.accounting.dburl import DatabaseUrlError

    with pytest.raises(DatabaseUrlError) as info:
        PgStore("postgresql://spur:hunter2-secret@db:notaport/spur")
    assert "hunter2-secret" not in str(info.value) and "does not parse" in str(info.value)
