"""Pure parts of accounting storage: URL redaction, sacct selection, the SQL it becomes, sreport and sdiag text."""

from __future__ import annotations

from datetime import datetime

import pytest

from spur.accounting.dburl import DatabaseUrlError, check_database_url, redact, redact_url
from spur.accounting.pgstore import JobQuery, build_job_query
from spur.accounting.selection import job_matches
from spur.cli import sdiag, sreport
from spur.core.job import Job, JobSpec, JobState
from spur.rpc.proto import accounting_db_pb2 as apb

NOW = datetime(2026, 12, 3, 9, 30, 15).timestamp()


def test_passwords_never_survive_redaction() -> None:
    url = "postgresql://spur:p%40ss-w0rd@db:5432/spur"
    assert redact_url(url) == "postgresql://spur:***@db:5432/spur"
    assert "w0rd" not in redact("connect to db failed for p@ss-w0rd (password=p@ss-w0rd)", url)
    with pytest.raises(DatabaseUrlError) as info:
        check_database_url("postgresql://spur:topsecret@db:99999/spur")
    assert "topsecret" not in str(info.value) and "spur:***@db" in str(info.value)
    check_database_url("postgresql://spur@db/spur?sslmode=require")


def _job(**kw) -> Job:
    spec = JobSpec(name=kw.pop("name", "a"), account=kw.pop("account", "phys"))
    kw.setdefault("state", JobState.COMPLETED)
    return Job(
        job_id=kw.pop("job_id", 5),
        spec=spec,
        user=kw.pop("user", "alice"),
        partition="debug",
        submit_time=kw.pop("submit", 100.0),
        end_time=kw.pop("end", 200.0),
        **kw,
    )


def test_selection_uses_sacct_rules() -> None:
    q = JobQuery("c", start=150.0, end=300.0)
    assert job_matches(_job(), q)
    assert not job_matches(_job(end=140.0), q)  # ended before the window
    assert not job_matches(_job(submit=301.0, end=0.0, state=JobState.PENDING), q)
    assert job_matches(_job(end=0.0, state=JobState.RUNNING), q)
    assert not job_matches(_job(), JobQuery("c", 0, 300, users=["bob"]))
    assert job_matches(_job(), JobQuery("c", 0, 300, accounts=["phys"], names=["a"], states=["COMPLETED"]))
    task = _job(job_id=12, array_job_id=10, array_task_id=2)
    assert job_matches(task, JobQuery("c", 0, 300, jobs=[(10, None)]))
    assert job_matches(task, JobQuery("c", 0, 300, jobs=[(10, 2)]))
    assert not job_matches(task, JobQuery("c", 0, 300, jobs=[(10, 3)]))


def test_the_sacct_query_filters_in_sql_with_parameters_only() -> None:
    sql, params = build_job_query(
        JobQuery("c1", 10.0, 20.0, users=["u'); DROP TABLE x;--"], jobs=[(7, None), (9, 1)])
    )
    assert "DROP" not in sql and "u'); DROP TABLE x;--" in params[3]
    assert "user_name = ANY(%s)" in sql and "(array_job_id = %s AND array_task_id = %s)" in sql
    assert params[:3] == ["c1", 20.0, 10.0] and params[-1] == 200_000


def test_sreport_period_defaults_and_hours() -> None:
    start, end = sreport.report_period(None, None, NOW)
    assert datetime.fromtimestamp(start) == datetime(2026, 12, 2, 0, 0)
    assert datetime.fromtimestamp(end) == datetime(2026, 12, 3, 0, 0)
    start, end = sreport.report_period(NOW - 7200 + 59, NOW + 86400, NOW)
    assert datetime.fromtimestamp(start) == datetime(2026, 12, 3, 7, 0)
    assert datetime.fromtimestamp(end) == datetime(2026, 12, 3, 10, 0)  # the current hour included


def test_sreport_arguments() -> None:
    args = sreport.parse_args(
        ["-nP", "-t", "hours", "user", "top", "start=2026-12-01", "topcount=3", "users=a,b"], NOW
    )
    assert (args.report, args.header, args.parsable, args.time_format) == ("top", False, "plain", "hours")
    assert args.top_count == 3 and args.users == ("a", "b")
    assert datetime.fromtimestamp(args.start) == datetime(2026, 12, 1)
    for bad, message in (
        (["user", "top", "colour=blue"], "Unknown condition: colour=blue"),
        (["user", "top", "topcount=0"], "Invalid TopCount"),
        (["job", "sizes"], "Not valid report"),
        (["-t", "fortnights", "cluster", "utilization"], "unknown time format"),
        (["cluster", "utilization", "start=yesterdayish"], "Invalid time specification"),
    ):
        with pytest.raises(sreport.SreportError, match=message):
            sreport.parse_args(bad, NOW)


def _usage() -> apb.UsageResponse:
    return apb.UsageResponse(
        cluster_name="spur",
        usage=[
            apb.AssocUsage(account="physics", user="alice", cpu_seconds=7200.0),
            apb.AssocUsage(account="chem", user="bob", cpu_seconds=600.0),
        ],
        allocated_cpu_seconds=7800.0,
        reported_cpu_seconds=4 * 86400.0,
    )


def test_cluster_utilization_layout() -> None:
    args = sreport.parse_args(["cluster", "utilization", "start=2026-12-02", "end=2026-12-03"], NOW)
    lines = sreport.utilization_text(args, _usage()).splitlines()
    assert lines[0] == "-" * 80
    assert lines[1] == "Cluster Utilization 2026-12-02T00:00:00 - 2026-12-02T23:59:59"
    assert lines[2] == "Usage reported in CPU Minutes"
    assert lines[4] == "  Cluster    Allocated       Down  PLND Down         Idle   Planned     Reported "
    assert lines[5] == "--------- ------------ ---------- ---------- ------------ --------- ------------ "
    assert lines[6] == "     spur          130          0          0         5630         0         5760 "
    pct = sreport.parse_args(["-P", "-t", "percent", "cluster", "utilization"], NOW)
    assert (
        sreport.utilization_text(pct, _usage()).splitlines()[-1]
        == "spur|2.26%|0.00%|0.00%|97.74%|0.00%|100.00%"
    )


def test_user_top_layout() -> None:
    args = sreport.parse_args(["user", "top", "start=2026-12-02", "end=2026-12-03", "topcount=1"], NOW)
    lines = sreport.user_top_text(args, _usage()).splitlines()
    assert lines[1] == "Top 1 Users 2026-12-02T00:00:00 - 2026-12-02T23:59:59 (86400 secs)"
    assert lines[4] == "  Cluster     Login     Proper Name         Account       Used     Energy "
    assert lines[6].split() == ["spur", "alice", "physics", "120", "0"]
    assert len(lines) == 7


def test_sdiag_and_show_config_text() -> None:
    d = apb.DiagResponse(
        now=NOW,
        server_start_time=NOW - 60,
        jobs_submitted=5,
        outbox_depth=3,
        database_configured=True,
        database_url="postgresql://spur:***@db/spur",
        database_status="unavailable",
        database_error="connection refused",
        cluster_name="spur",
    )
    text = sdiag.diag_text(d)
    assert "DBD Agent queue size: 3" in text and "Jobs submitted: 5" in text
    assert "\tStatus:            unavailable: connection refused" in text
    assert "\tLast flush:        never" in text
    rows = dict(sdiag.config_rows(d))
    assert rows["AccountingStorageOutboxDepth"] == "3"
    assert rows["AccountingStorageType"] == "accounting_storage/postgresql"
    bare = sdiag.diag_text(apb.DiagResponse(now=NOW))
    assert "not configured" in bare and "Last flush" not in bare
