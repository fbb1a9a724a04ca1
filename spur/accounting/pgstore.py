"""The accounting store in PostgreSQL: psycopg 3 + psycopg_pool, driven from Trio through worker threads.

Every public coroutine is one unit of work: one ``trio.to_thread.run_sync`` hop that takes a pooled
connection, runs one transaction (or one ``executemany``) and returns. A thread cannot be cancelled,
so when the Trio side is cancelled the store calls ``conn.cancel_safe()`` on the connection the
thread is using (the server aborts the statement, the transaction rolls back) and then waits for the
thread to return; the connection goes back to the pool usable.

Errors surface as :class:`StoreError` whose message never contains the password of the URL.

Contracts:

- :meth:`PgStore.migrate` applies :data:`spur.accounting.migrations.MIGRATIONS` under an advisory lock
  and returns the schema version; safe to call from several controllers at once.
- :meth:`PgStore.write_records` upserts on (cluster id, job id, submit time): writing the same records
  again changes nothing (no row, no usage counted twice); a changed record replaces the old one and its
  usage. Job rows, step rows and usage commit together or not at all.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar, cast

import trio

from spur.accounting.dburl import check_database_url, redact, redact_url
from spur.accounting.migrations import LATEST, MIGRATION_LOCK_KEY, MIGRATIONS, SCHEMA_VERSION_TABLE
from spur.accounting.records import COLUMNS, JobRecord, record_columns

if TYPE_CHECKING:
    from psycopg import Connection, Cursor
    from psycopg.rows import TupleRow
    from psycopg_pool import ConnectionPool

__all__ = ["PgStore", "StoreError", "JobQuery", "UsageRow"]

log = logging.getLogger("spur.accounting")
T = TypeVar("T")

_UPSERT_JOB = (
    f"INSERT INTO spur_jobs ({', '.join(COLUMNS)}, record) VALUES ({', '.join(['%s'] * (len(COLUMNS) + 1))}) "
    "ON CONFLICT (cluster_id, job_id, submit_time) DO UPDATE SET "
    + ", ".join(f"{c} = EXCLUDED.{c}" for c in COLUMNS[3:])
    + ", record = EXCLUDED.record WHERE spur_jobs.record IS DISTINCT FROM EXCLUDED.record"
)
_STEP_COLUMNS = (
    "cluster_id",
    "job_id",
    "submit_time",
    "step_id",
    "name",
    "state",
    "exit_code",
    "start_time",
    "end_time",
    "cpus",
    "ntasks",
    "nodelist",
)
_STEP_TYPES = (
    "text",
    "bigint",
    "float8",
    "text",
    "text",
    "text",
    "int",
    "float8",
    "float8",
    "int",
    "int",
    "text",
)
# Steps of a whole batch in ONE statement (column arrays through unnest): a job has several steps, and a
# statement per step row would halve the flush rate.
_UPSERT_STEPS = (
    f"INSERT INTO spur_steps ({', '.join(_STEP_COLUMNS)}) "
    f"SELECT * FROM unnest({', '.join(f'%s::{t}[]' for t in _STEP_TYPES)}) "
    "ON CONFLICT (cluster_id, job_id, submit_time, step_id) DO UPDATE SET "
    + ", ".join(f"{c} = EXCLUDED.{c}" for c in _STEP_COLUMNS[4:])
)


class StoreError(Exception):
    """The database could not do what was asked; ``str()`` is safe to log and show (no password)."""


@dataclass(frozen=True)
class JobQuery:
    """What sacct asks for. Empty lists mean "any"; ``jobs`` holds (job id, array task id or None)."""

    cluster_id: str
    start: float
    end: float
    users: Sequence[str] = ()
    accounts: Sequence[str] = ()
    partitions: Sequence[str] = ()
    names: Sequence[str] = ()
    states: Sequence[str] = ()
    jobs: Sequence[tuple[int, int | None]] = ()
    limit: int = 200_000


@dataclass(frozen=True)
class UsageRow:
    """Usage of one association over a period."""

    account: str
    user: str
    cpu_seconds: float
    gpu_seconds: float


def build_job_query(q: JobQuery) -> tuple[str, list[Any]]:
    """SQL and parameters selecting the records of :class:`JobQuery` (pure; used by :meth:`PgStore.jobs`).

    The window is Slurm's: a job is selected when it existed at some time in [start, end], that is
    it was submitted by ``end`` and had not ended before ``start``.
    """
    where = ["cluster_id = %s", "submit_time <= %s", "end_time >= %s"]
    params: list[Any] = [q.cluster_id, q.end, q.start]
    for column, values in (
        ("user_name", q.users),
        ("account", q.accounts),
        ("partition", q.partitions),
        ("name", q.names),
        ("state", q.states),
    ):
        if values:
            where.append(f"{column} = ANY(%s)")
            params.append(list(values))
    if q.jobs:
        alts = []
        for job_id, task in q.jobs:
            if task is None:
                alts.append("(job_id = %s OR array_job_id = %s)")
                params.extend([job_id, job_id])
            else:
                alts.append("(array_job_id = %s AND array_task_id = %s)")
                params.extend([job_id, task])
        where.append("(" + " OR ".join(alts) + ")")
    sql = f"SELECT record FROM spur_jobs WHERE {' AND '.join(where)} ORDER BY job_id, submit_time LIMIT %s"
    params.append(q.limit)
    return sql, params


def _step_rows(record: JobRecord) -> list[tuple[Any, ...]]:
    from spur.core.hostlist import compress

    job = record["job"]
    rows = []
    for step in job.get("steps") or []:
        alloc = step.get("allocation") or []
        spec = step.get("spec") or {}
        argv = spec.get("argv") or []
        rows.append(
            (
                record["cluster_id"],
                int(record["job_id"]),
                float(record["submit_time"]),
                str(step["step_id"]),
                spec.get("name") or (argv[0].rsplit("/", 1)[-1] if argv else ""),
                step.get("state", "RUNNING"),
                int(step.get("exit_code", 0)),
                float(step.get("start_time", 0.0)),
                float(step.get("end_time", 0.0)),
                sum(int(a.get("cpus", 0)) for a in alloc),
                sum(int(a.get("tasks", 1)) for a in alloc),
                compress([a["node"] for a in alloc]) if alloc else "",
            )
        )
    return rows


class PgStore:
    """A pool of connections to one database (see the module docstring for the contracts)."""

    def __init__(self, url: str, *, max_size: int = 4, connect_timeout: float = 5.0) -> None:
        check_database_url(url)  # DatabaseUrlError (a ValueError) for a URL that does not parse
        self.url = url
        self.display_url = redact_url(url)
        self._max_size = max_size
        self._connect_timeout = connect_timeout
        self._pool: ConnectionPool[Connection[TupleRow]] | None = None
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ pool

    def _get_pool(self) -> ConnectionPool[Connection[TupleRow]]:
        """The pool, created on first use (in a worker thread: opening it may block)."""
        with self._lock:
            if self._pool is None:
                from psycopg_pool import ConnectionPool

                # The pool's own reconnect loop logs every failed attempt (with the host); our callers
                # report the state once per change instead.
                logging.getLogger("psycopg.pool").setLevel(logging.CRITICAL)
                logging.getLogger("psycopg").setLevel(logging.ERROR)  # e.g. "error ignored terminating"
                self._pool = ConnectionPool(
                    self.url,
                    min_size=1,
                    max_size=self._max_size,
                    open=False,
                    timeout=self._connect_timeout,
                    kwargs={"connect_timeout": max(1, int(self._connect_timeout)), "autocommit": False},
                    name="spur-accounting",
                )
                self._pool.open(wait=False)
            return self._pool

    async def aclose(self) -> None:
        """Close the pool (one thread hop); the store can be used again afterwards (a new pool)."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            await trio.to_thread.run_sync(lambda: pool.close(timeout=5.0))

    def _reset(self, pool: ConnectionPool[Connection[TupleRow]]) -> None:
        """Drop ``pool`` (called in a worker thread after a connection failure)."""
        with self._lock:
            if self._pool is pool:
                self._pool = None
        try:
            pool.close(timeout=0.5)
        except Exception as exc:
            log.debug("closing a failed PostgreSQL pool: %s", type(exc).__name__)

    def _error(self, exc: BaseException | str) -> StoreError:
        """A StoreError with libpq's message on one line and no password."""
        text = str(exc).strip() or type(exc).__name__
        return StoreError(
            redact("; ".join(line.strip() for line in text.splitlines() if line.strip()), self.url)
        )

    def _diagnose(self) -> str:
        """Why no connection: connect once directly to get libpq's reason (pool timeouts hide it)."""
        import psycopg

        try:
            with psycopg.connect(self.url, connect_timeout=max(1, int(self._connect_timeout))):
                return "connection pool timed out"
        except Exception as exc:
            return str(exc)

    async def _run(self, fn: Callable[[Any], T]) -> T:
        """Run ``fn(conn)`` in a worker thread on a pooled connection: one unit of work.

        If the calling Trio task is cancelled meanwhile, the running statement is cancelled with
        ``conn.cancel_safe()`` and the thread is awaited before Cancelled propagates.
        """
        in_use: dict[str, Any] = {}
        outcome: dict[str, Any] = {}

        def work() -> T:
            import psycopg
            from psycopg import OperationalError
            from psycopg_pool import PoolClosed, PoolTimeout

            if self._pool is None:
                # Probe before building a pool: a database that is down fails here at once, with libpq's
                # reason, instead of after the pool's wait (and its reconnect loop) in every retry.
                try:
                    psycopg.connect(self.url, connect_timeout=max(1, int(self._connect_timeout))).close()
                except psycopg.Error as exc:
                    raise self._error(exc) from None
            pool = self._get_pool()
            try:
                try:
                    conn = pool.getconn()
                except PoolClosed:  # another thread just replaced a failed pool: use the new one
                    pool = self._get_pool()
                    conn = pool.getconn()
                in_use["conn"] = conn
                try:
                    return fn(conn)
                finally:
                    in_use.pop("conn", None)
                    pool.putconn(conn)  # rolls back whatever fn left open; closes it if broken
            except PoolTimeout:
                self._reset(pool)
                raise self._error(self._diagnose()) from None
            except OperationalError:
                # The server went away (or never answered): start over with a fresh pool next time
                # rather than wait out the pool's own reconnect backoff (up to minutes).
                self._reset(pool)
                raise

        done = trio.Event()

        async def worker() -> None:
            try:
                # Not abandoned on cancel: the thread always finishes before this task does.
                outcome["value"] = await trio.to_thread.run_sync(work)
            except BaseException as exc:  # handed to the caller below
                outcome["error"] = exc
            finally:
                done.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(worker)
            try:
                await done.wait()
            except trio.Cancelled:
                conn = in_use.get("conn")
                if conn is not None:
                    with trio.CancelScope(shield=True):
                        await trio.to_thread.run_sync(_cancel_quietly, conn)
                raise
        if "error" in outcome:
            exc = outcome["error"]
            if isinstance(exc, StoreError):
                raise exc
            raise self._error(exc) from None
        return cast(T, outcome["value"])

    # ------------------------------------------------------------------ schema

    async def migrate(self) -> int:
        """Apply missing migrations (under the advisory lock); return the schema version now in force."""
        return await self._run(_migrate)

    async def schema_version(self) -> int:
        """The applied version (0 for an empty database)."""

        def read(conn: Connection[TupleRow]) -> int:
            with conn.cursor() as cur:
                cur.execute("SELECT to_regclass('spur_schema_version') IS NOT NULL")
                if not _row(cur)[0]:
                    conn.rollback()
                    return 0
                cur.execute("SELECT coalesce(max(version), 0) FROM spur_schema_version")
                version = int(_row(cur)[0])
            conn.rollback()
            return version

        return await self._run(read)

    # ------------------------------------------------------------------ writes

    async def write_records(self, records: Sequence[JobRecord]) -> int:
        """Upsert ``records`` (and their steps and usage) in one transaction; returns len(records)."""
        if not records:
            return 0

        def write(conn: Connection[TupleRow]) -> int:
            # Rows are built in the worker thread too: records are never changed once in the outbox.
            rows = [(*record_columns(r), json.dumps(r["job"], separators=(",", ":"))) for r in records]
            steps = [s for r in records for s in _step_rows(r)]
            with conn.transaction(), conn.cursor() as cur:
                # Records leave the outbox once this commits: the commit must be durable even where the
                # server's default is synchronous_commit = off.
                cur.execute("SET LOCAL synchronous_commit = on")
                cur.executemany(_UPSERT_JOB, rows)
                if steps:
                    cur.execute(_UPSERT_STEPS, [list(column) for column in zip(*steps, strict=True)])
            conn.commit()
            return len(rows)

        return await self._run(write)

    # ------------------------------------------------------------------ reads

    async def jobs(self, query: JobQuery) -> list[JobRecord]:
        """Records matching ``query`` as :func:`spur.accounting.records.job_record` builds them."""
        sql, params = build_job_query(query)

        def read(conn: Connection[TupleRow]) -> list[JobRecord]:
            with conn.cursor() as cur:
                cur.execute(sql, params)
                out = [
                    {
                        "cluster_id": query.cluster_id,
                        "job_id": job["job_id"],
                        "submit_time": job.get("submit_time", 0.0),
                        "job": job,
                    }
                    for (job,) in cur.fetchall()
                ]
            conn.rollback()
            return out

        return await self._run(read)

    async def usage(
        self,
        cluster_id: str,
        start: float,
        end: float,
        *,
        users: Sequence[str] = (),
        accounts: Sequence[str] = (),
    ) -> list[UsageRow]:
        """Usage per (account, user) in hours starting in [start, end), largest cpu-seconds first."""
        sql = (
            "SELECT account, user_name, sum(cpu_seconds), sum(gpu_seconds) FROM spur_usage_hourly "
            "WHERE cluster_id = %s AND hour >= %s AND hour < %s"
        )
        params: list[Any] = [cluster_id, int(start), int(end)]
        if users:
            sql += " AND user_name = ANY(%s)"
            params.append(list(users))
        if accounts:
            sql += " AND account = ANY(%s)"
            params.append(list(accounts))
        sql += " GROUP BY account, user_name ORDER BY sum(cpu_seconds) DESC, user_name, account"

        def read(conn: Connection[TupleRow]) -> list[UsageRow]:
            with conn.cursor() as cur:
                cur.execute(sql, params)
                rows = [UsageRow(a, u, float(c or 0), float(g or 0)) for a, u, c, g in cur.fetchall()]
            conn.rollback()
            return rows

        return await self._run(read)

    async def count(self, cluster_id: str) -> tuple[int, int]:
        """(job rows, distinct keys) of ``cluster_id``: equal unless something was written twice."""

        def read(conn: Connection[TupleRow]) -> tuple[int, int]:
            with conn.cursor() as cur:
                cur.execute(
                    "SELECT count(*), count(DISTINCT (job_id, submit_time)) FROM spur_jobs WHERE cluster_id = %s",
                    [cluster_id],
                )
                total, distinct = _row(cur)
            conn.rollback()
            return int(total), int(distinct)

        return await self._run(read)


def _row(cur: Cursor[TupleRow]) -> TupleRow:
    """The one row of an aggregate query (which always returns one)."""
    row = cur.fetchone()
    assert row is not None
    return row


def _cancel_quietly(conn: Connection[TupleRow]) -> None:
    try:
        conn.cancel_safe(timeout=5.0)
    except Exception as exc:
        log.debug("cancelling a PostgreSQL statement failed: %s", type(exc).__name__)


def _migrate(conn: Connection[TupleRow]) -> int:
    return migrate_to(conn, LATEST)


def migrate_to(conn: Connection[TupleRow], target: int) -> int:
    """Apply migrations up to ``target`` only (same lock and bookkeeping as :meth:`PgStore.migrate`)."""
    with conn.transaction(), conn.cursor() as cur:
        cur.execute("SET LOCAL synchronous_commit = on")
        cur.execute("SELECT pg_advisory_xact_lock(%s)", [MIGRATION_LOCK_KEY])
        cur.execute(SCHEMA_VERSION_TABLE)
        cur.execute("SELECT coalesce(max(version), 0) FROM spur_schema_version")
        current = int(_row(cur)[0])
        for version, description, sql in MIGRATIONS:
            if current < version <= target:
                cur.execute(sql)
                cur.execute(
                    "INSERT INTO spur_schema_version (version, description) VALUES (%s, %s)",
                    [version, description],
                )
                log.info("accounting database migrated to schema version %s (%s)", version, description)
                current = version
    conn.commit()
    return current
