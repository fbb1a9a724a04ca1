"""sacct, sreport, sdiag and scontrol show config against a real spurctld writing to a real PostgreSQL."""

from __future__ import annotations

import getpass
from pathlib import Path

import psycopg
import pytest

from integration.harness import Cluster, free_port, wait_for


@pytest.fixture
def db_cluster(tmp_path: Path, pg_db: str):
    c = Cluster(tmp_path, conf_extra=f'[accounting]\ndatabase_url = "{pg_db}"\n')
    c.start_controller()
    try:
        yield c
    finally:
        c.stop()


def _rows(pg_db: str) -> int:
    with psycopg.connect(pg_db) as conn:
        return conn.execute("SELECT count(*) FROM spur_jobs").fetchone()[0]


def _sbatch(c: Cluster, tmp: Path, *args: str, body: str = "true") -> int:
    script = tmp / "job.sh"
    script.write_text(f"#!/bin/bash\n{body}\n")
    return int(c.cli("sbatch", "--parsable", *args, str(script), cwd=tmp).stdout.split(";")[0])


def test_sacct_reads_job_and_step_records_from_postgresql(db_cluster: Cluster, pg_db: str, tmp_path: Path):
    c = db_cluster
    c.start_agent("node1", cpus=4)
    c.wait_nodes("node1")
    ok = _sbatch(c, tmp_path, "-J", "good", "-A", "physics", body="srun -n1 true")
    bad = _sbatch(c, tmp_path, "-J", "bad", "-A", "chem", body="exit 3")
    array = _sbatch(c, tmp_path, "-J", "arr", "--array=0-2")
    ids = [ok, bad, array, array + 1, array + 2]
    for job_id in ids:
        c.wait_job(job_id, "COMPLETED", "FAILED", timeout=60)
    wait_for(lambda: _rows(pg_db) == len(ids), timeout=30, what="the records in PostgreSQL")

    out = c.cli("sacct", "-j", f"{ok},{bad}", "-P", "-o", "JobID,JobName,Account,State,ExitCode").stdout
    lines = out.splitlines()
    assert lines[0] == "JobID|JobName|Account|State|ExitCode"
    assert f"{ok}|good|physics|COMPLETED|0:0" in lines
    assert f"{ok}.batch|batch|physics|COMPLETED|0:0" in lines
    assert f"{ok}.0|true|physics|COMPLETED|0:0" in lines
    assert f"{bad}|bad|chem|FAILED|3:0" in lines
    # array rows, -X (no steps), -n, --name, -A, -s, -u, -r
    arr = c.cli("sacct", "-j", str(array), "-X", "-n", "-P", "-o", "JobID,State").stdout.split()
    assert arr == [f"{array}_{i}|COMPLETED" for i in range(3)]
    me = getpass.getuser()
    by_name = c.cli("sacct", "-X", "-n", "-P", "-o", "JobID", "--name", "good,bad", "-u", me).stdout.split()
    assert by_name == [str(ok), str(bad)]
    assert c.cli("sacct", "-X", "-n", "-P", "-o", "JobID", "-A", "chem").stdout.split() == [str(bad)]
    assert c.cli("sacct", "-X", "-n", "-P", "-o", "JobID", "-s", "F", "-S", "now-1hour").stdout.split() == [
        str(bad)
    ]
    assert c.cli("sacct", "-X", "-n", "-P", "-o", "JobID", "-r", "nope").stdout.split() == []
    assert c.cli("sacct", "-X", "-n", "-P", "-o", "JobID", "-u", "nobody-here").stdout.split() == []
    window = c.cli("sacct", "-X", "-n", "-P", "-o", "JobID", "-S", "now-1day", "-E", "now").stdout.split()
    assert window == [str(i) if i in (ok, bad) else f"{array}_{i - array}" for i in ids]
    assert c.cli("sacct", "-X", "-n", "-P", "-o", "JobID", "-S", "now+1hour").stdout.split() == []

    # the rows really come from PostgreSQL: change one there and sacct shows it
    with psycopg.connect(pg_db) as conn:
        conn.execute(
            "UPDATE spur_jobs SET record = jsonb_set(record, '{spec,name}', '\"renamed\"') WHERE job_id = %s",
            [bad],
        )
    assert c.cli("sacct", "-j", str(bad), "-X", "-n", "-P", "-o", "JobName").stdout.split() == ["renamed"]

    # a running job is shown too (it is not in PostgreSQL yet)
    running = _sbatch(c, tmp_path, "-J", "sleeper", body="sleep 60")
    c.wait_job(running, "RUNNING", timeout=30)
    assert c.cli("sacct", "-j", str(running), "-X", "-n", "-P", "-o", "JobID,State").stdout.split() == [
        f"{running}|RUNNING"
    ]
    c.cli("scancel", str(running))


def test_sreport_and_sdiag_with_a_database(db_cluster: Cluster, pg_db: str, tmp_path: Path):
    c = db_cluster
    c.start_agent("node1", cpus=4)
    c.wait_nodes("node1")
    job = _sbatch(c, tmp_path, "-A", "physics", "-c", "2", body="sleep 1.5")
    c.wait_job(job, "COMPLETED", timeout=60)
    wait_for(lambda: _rows(pg_db) == 1, timeout=30, what="the record in PostgreSQL")

    util = c.cli("sreport", "cluster", "utilization", "start=now-1hour", "end=now+1hour").stdout.splitlines()
    assert util[0] == "-" * 80 and util[1].startswith("Cluster Utilization ")
    assert util[2] == "Usage reported in CPU Minutes"
    assert util[4].split() == ["Cluster", "Allocated", "Down", "PLND", "Down", "Idle", "Planned", "Reported"]
    assert util[6].split()[0] == "itest"
    parsable = c.cli(
        "sreport", "-nP", "-t", "seconds", "cluster", "utilization", "start=now-1hour", "end=now+1hour"
    )
    cluster, alloc, down, pdown, idle, planned, reported = parsable.stdout.strip().split("|")
    assert cluster == "itest" and 2 <= int(alloc) <= 6 and int(reported) == 4 * 7200
    assert abs(int(idle) + int(alloc) - int(reported)) <= 1 and int(down) == int(pdown) == int(planned) == 0

    top = c.cli("sreport", "user", "top", "start=now-1hour", "end=now+1hour").stdout.splitlines()
    assert top[1].startswith("Top 10 Users ") and top[1].endswith("(7200 secs)")
    assert top[4].split() == ["Cluster", "Login", "Proper", "Name", "Account", "Used", "Energy"]
    assert top[6].split()[1] == getpass.getuser() and "physics" in top[6].split()
    rows = c.cli(
        "sreport",
        "-nP",
        "-t",
        "sec",
        "user",
        "top",
        "start=now-1hour",
        "end=now+1hour",
        "format=Login,Account,Used",
    ).stdout.split()
    assert len(rows) == 1 and rows[0].startswith(f"{getpass.getuser()}|physics|")
    bad = c.cli("sreport", "user", "top", "colour=blue", check=False)
    assert bad.returncode == 1 and "Unknown condition: colour=blue" in bad.stderr

    diag = c.cli("sdiag").stdout
    assert "DBD Agent queue size: 0" in diag and "Jobs submitted: 1" in diag
    assert "\tStatus:            connected" in diag and "Schema version:    2" in diag
    assert "Records flushed:   1" in diag and "s3cret-pw" not in diag and "spur:***@" in diag
    config = c.cli("scontrol", "show", "config").stdout
    assert "AccountingStorageType   = accounting_storage/postgresql" in config
    assert "ClusterName             = itest" in config
    assert "AccountingStorageOutboxDepth = 0" in config


def test_an_unreachable_database_leaves_scheduling_working_and_sdiag_says_why(tmp_path: Path):
    url = f"postgresql://spur:hunter2-pw@127.0.0.1:{free_port()}/spur"
    c = Cluster(tmp_path, conf_extra=f'[accounting]\ndatabase_url = "{url}"\n')
    c.start_controller()
    try:
        c.start_agent("node1", cpus=2)
        c.wait_nodes("node1")
        job = _sbatch(c, tmp_path, body="true")
        c.wait_job(job, "COMPLETED", timeout=60)

        def depth_shown() -> str | None:
            out = c.cli("sdiag").stdout
            return out if "DBD Agent queue size: 1" in out and "unavailable" in out else None

        diag = wait_for(depth_shown, timeout=30, what="sdiag to show the outbox and the error")
        assert "refused" in diag.lower() and "hunter2-pw" not in diag
        assert "AccountingStorageOutboxDepth = 1" in c.cli("scontrol", "show", "config").stdout
        failed = c.cli("sacct", check=False)
        assert failed.returncode == 1 and "Problem talking to the database" in failed.stderr
        log = c.controller.log()
        assert "hunter2-pw" not in log and log.count("unavailable") == 1
    finally:
        c.stop()


def test_a_database_url_that_does_not_parse_is_reported_and_the_daemon_runs(tmp_path: Path):
    url = "postgresql://spur:hunter2-pw@db:notaport/spur"
    c = Cluster(tmp_path, conf_extra=f'[accounting]\ndatabase_url = "{url}"\n')
    c.start_controller()
    try:
        c.start_agent("node1", cpus=2)
        c.wait_nodes("node1")
        job = _sbatch(c, tmp_path, body="true")
        c.wait_job(job, "COMPLETED", timeout=60)
        diag = c.cli("sdiag").stdout
        assert "does not parse" in diag and "hunter2-pw" not in diag
        assert "hunter2-pw" not in c.controller.log()
    finally:
        c.stop()
