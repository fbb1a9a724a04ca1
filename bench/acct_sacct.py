"""``sacct -S now-1day -u U`` over 1,000,000 job records stored in PostgreSQL (target: < 500 ms).

A private PostgreSQL server (integration/postgres.py) gets ``--records`` job records of one cluster,
spread over 30 days, 1,000 users and 50 accounts (bulk-loaded with SQL: about 33 records of user U
fall in the last day). A real spurctld with ``database_url`` set serves them; figures:

- the store query alone (``PgStore.jobs``, the SQL sacct's request becomes), median of 20;
- the whole command as a user runs it (``sacct -S now-1day -u user7``: process start, RPC, query,
  formatting), median of 10; and the plan PostgreSQL chose (the index it uses).

Run: ``.venv/bin/python -m bench.acct_sacct [--records 1000000]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import time

import trio

from bench.common import controller, print_table
from integration.harness import BIN
from integration.postgres import PgCluster, find_pg_bin
from spur.accounting.pgstore import JobQuery, PgStore, build_job_query

DAYS = 30
USERS = 1000

LOAD = """
INSERT INTO spur_jobs (cluster_id, job_id, submit_time, name, user_name, uid, account, partition, qos,
                       state, exit_code, start_time, end_time, nodelist, cpus, mem_mb, gpus,
                       time_limit_secs, work_dir, record)
SELECT %(cluster)s, g, t - 60, 'job' || g, 'user' || (g %% {users}), 10000 + g %% {users},
       'acct' || (g %% 50), 'batch', 'normal', 'COMPLETED', 0, t, t + 600, 'n' || (g %% 500), 4, 8000, 0,
       3600, '/home/run',
       jsonb_build_object('job_id', g, 'user', 'user' || (g %% {users}), 'uid', 10000 + g %% {users},
                          'state', 'COMPLETED', 'partition', 'batch', 'submit_time', t - 60,
                          'start_time', t, 'end_time', t + 600, 'time_limit_secs', 3600,
                          'spec', jsonb_build_object('name', 'job' || g, 'account', 'acct' || (g %% 50),
                                                     'work_dir', '/home/run'),
                          'allocation', jsonb_build_array(jsonb_build_object('node', 'n' || (g %% 500),
                                                                             'cpus', 4, 'mem_mb', 8000)))
FROM (SELECT g, %(now)s - {span} + g * ({span}::float8 / %(n)s) AS t FROM generate_series(1, %(n)s) g) s
"""


async def cluster_id(address: str) -> str:
    from spur.auth.identity import identity_metadata
    from spur.controller.accounting_db_service import SERVICE
    from spur.rpc.channel import open_channel
    from spur.rpc.proto import accounting_db_pb2 as apb
    from spur.rpc.stub import Stub

    md = identity_metadata()
    async with open_channel(address, metadata_provider=lambda: md) as ch:
        while True:
            d = await Stub(ch, SERVICE).GetDiag(apb.DiagRequest(), timeout=30)
            if d.cluster_id and d.schema_version:
                return d.cluster_id
            await trio.sleep(0.2)


async def query_times(url: str, cluster: str, now: float, runs: int = 20) -> tuple[list[float], int]:
    store = PgStore(url)
    q = JobQuery(cluster, start=now - 86400, end=now, users=["user7"])
    times, n = [], 0
    try:
        for _ in range(runs):
            began = time.perf_counter()
            n = len(await store.jobs(q))
            times.append(time.perf_counter() - began)
    finally:
        await store.aclose()
    return times, n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    args = parser.parse_args()
    bin_dir = find_pg_bin()
    if bin_dir is None:
        raise SystemExit("PostgreSQL is not installed (run scripts/setup.sh as root)")
    pg = PgCluster(bin_dir).init()
    try:
        with controller(wal_fsync=False, extra=f'[accounting]\ndatabase_url = "{pg.url}"\n') as ctl:
            cluster = trio.run(cluster_id, ctl.address)
            now = time.time()
            import psycopg

            began = time.perf_counter()
            with psycopg.connect(pg.url) as conn:
                conn.execute("ALTER TABLE spur_jobs DISABLE TRIGGER spur_jobs_usage")
                conn.execute(
                    LOAD.format(users=USERS, span=DAYS * 86400),
                    {"cluster": cluster, "now": now, "n": args.records},
                )
                conn.execute("ALTER TABLE spur_jobs ENABLE TRIGGER spur_jobs_usage")
                conn.commit()
                conn.autocommit = True
                conn.execute("VACUUM ANALYZE spur_jobs")
                sql, params = build_job_query(JobQuery(cluster, start=now - 86400, end=now, users=["user7"]))
                plan = conn.execute("EXPLAIN " + sql, params).fetchall()
            load_secs = time.perf_counter() - began
            times, found = trio.run(query_times, pg.url, cluster, now)
            env = dict(os.environ, SPUR_CONTROLLER=ctl.address)
            env.pop("SPUR_CONF", None)
            cli_times, lines = [], 0
            for _ in range(10):
                began = time.perf_counter()
                out = subprocess.run(
                    [str(BIN / "sacct"), "-S", "now-1day", "-u", "user7"],
                    env=env,
                    capture_output=True,
                    text=True,
                    check=True,
                ).stdout
                cli_times.append(time.perf_counter() - began)
                lines = len(out.splitlines())
        print(f"loaded {args.records} records in {load_secs:.1f}s; user7 has {found} records in the last day")
        print("plan: " + " | ".join(r[0].strip() for r in plan if "Scan" in r[0] or "Cond" in r[0]))
        print_table(
            ["what", "runs", "median ms", "max ms"],
            [
                ("PgStore.jobs (the SQL)", len(times), 1000 * statistics.median(times), 1000 * max(times)),
                (
                    f"sacct -S now-1day -u user7 ({lines} lines)",
                    len(cli_times),
                    1000 * statistics.median(cli_times),
                    1000 * max(cli_times),
                ),
            ],
            title=f"sacct over {args.records} stored records",
        )
    finally:
        pg.destroy()


if __name__ == "__main__":
    main()
