"""sacct formatting: Slurm's widths, dashes line, parsable forms, step lines and field parsing."""

from __future__ import annotations

import pytest
from cli_jobs import NOW, array_task, job

from spur.cli.sacct import (
    DEFAULT_FORMAT,
    SacctError,
    build_rows,
    in_window,
    parse_columns,
    parse_job_selectors,
    parse_state_list,
    parse_time_option,
    render_table,
    through_end_of_second,
)
from spur.rpc.proto import spur_pb2 as pb


def finished(job_id: int, name: str, state: str, exit_code: int = 0, sig: int = 0, **kw) -> pb.JobInfo:
    kw.setdefault("end_time", NOW - 1)
    return job(job_id, name, state, exit_code=exit_code, signal=sig, **kw)


def test_default_format_layout() -> None:
    rows = build_rows([finished(12, "hello", "COMPLETED")], NOW, allocations_only=False)
    out = render_table(parse_columns(DEFAULT_FORMAT), rows, header=True)
    assert out.splitlines() == [
        "JobID           JobName  Partition    Account  AllocCPUS      State ExitCode ",
        "------------ ---------- ---------- ---------- ---------- ---------- -------- ",
        "12                hello      debug                     1  COMPLETED      0:0 ",
        "12.batch          batch                                1  COMPLETED      0:0 ",
    ]


def test_parsable_forms() -> None:
    rows = build_rows([finished(13, "bad", "FAILED", exit_code=7)], NOW, allocations_only=True)
    cols = parse_columns("JobID,JobName,State,ExitCode")
    assert (
        render_table(cols, rows, header=True, parsable="plain")
        == "JobID|JobName|State|ExitCode\n13|bad|FAILED|7:0\n"
    )
    assert render_table(cols, rows, header=False, parsable="trailing") == "13|bad|FAILED|7:0|\n"


def test_cancelled_job_names_who_cancelled_and_batch_step_is_plain() -> None:
    j = finished(14, "c", "CANCELLED", sig=15, uid=1000, user="alice")
    rows = build_rows([j], NOW, allocations_only=False)
    out = render_table(parse_columns("JobID,State,ExitCode"), rows, header=False, parsable="plain")
    assert out == "14|CANCELLED by 1000|0:15\n14.batch|CANCELLED|0:15\n"


def test_array_tasks_and_steps() -> None:
    task = finished(221, "arr", "COMPLETED", array_job_id=218, array_task_id=3)
    task.steps.append(
        pb.StepInfo(
            step_id=0,
            spec=pb.StepSpec(argv=["/bin/hostname"]),
            state="COMPLETED",
            start_time=NOW - 2,
            end_time=NOW - 1,
            exit_code=0,
            allocation=[pb.NodeAllocation(node="vm", cpus=1, tasks=1)],
        )
    )
    rows = build_rows([task], NOW, allocations_only=False)
    out = render_table(parse_columns("JobID,JobIDRaw,JobName,State"), rows, header=False, parsable="plain")
    assert out.splitlines() == [
        "218_3|221|arr|COMPLETED",
        "218_3.batch|221.batch|batch|COMPLETED",
        "218_3.0|221.0|hostname|COMPLETED",
    ]


def test_standalone_srun_job_has_step_zero_and_pending_has_no_steps() -> None:
    srun = finished(15, "hostname", "COMPLETED", spec={"interactive": True, "argv": ["hostname"]})
    pending = job(16, "wait", "PENDING")
    rows = build_rows([srun, pending], NOW, allocations_only=False)
    out = render_table(
        parse_columns("JobID,State,AllocCPUS,NodeList,Start"), rows, header=False, parsable="plain"
    )
    assert out.splitlines()[1] == f"15.0|COMPLETED|1|vm|{rows[1]['Start']}"
    assert out.splitlines()[2] == "16|PENDING|0|None assigned|Unknown"


def test_width_suffix_case_insensitive_names_and_truncation() -> None:
    cols = parse_columns("jobid,jobname%5,STATE")
    assert [(c.name, c.width) for c in cols] == [("JobID", -12), ("JobName", 5), ("State", 10)]
    rows = build_rows([finished(17, "longjobname", "COMPLETED")], NOW, allocations_only=True)
    assert render_table(cols, rows, header=False) == "17           long+  COMPLETED \n"


def test_unknown_field_is_an_error() -> None:
    with pytest.raises(SacctError, match='Invalid field requested: "Bogus"'):
        parse_columns("JobID,Bogus")


def test_elapsed_and_times() -> None:
    j = job(18, start_time=NOW - 3725, submit_time=NOW - 4000)
    row = build_rows([j], NOW, allocations_only=True)[0]
    assert row["Elapsed"] == "01:02:05"
    assert row["End"] == "Unknown"


def test_selectors_states_and_times() -> None:
    assert parse_job_selectors(["12", "218_3", "14.batch"]) == [(12, None, None), (218, 3, None), (14, None, "batch")]
    with pytest.raises(SacctError):
        parse_job_selectors(["x1"])
    assert parse_state_list(["cd", "F", "cancelled"]) == {"COMPLETED", "FAILED", "CANCELLED"}
    with pytest.raises(SacctError):
        parse_state_list(["bogus"])
    assert parse_time_option("now-1hour", NOW) == NOW - 3600
    with pytest.raises(SacctError):
        parse_time_option("yesterday-ish", NOW)


def test_window_selects_jobs_alive_in_the_range() -> None:
    old = finished(19, "old", "COMPLETED", end_time=NOW - 7200)
    assert not in_window(old, NOW - 3600, NOW)
    assert in_window(old, NOW - 8000, NOW)
    assert in_window(job(20), NOW - 1, NOW)
    late = job(21, submit_time=NOW + 100)
    assert not in_window(late, NOW - 3600, NOW)


def test_end_bound_covers_its_whole_second() -> None:
    # `-E now` parses to the current whole second; a job submitted (and run) within that second is
    # still in the window, as in Slurm, whose times have no fractions.
    now = 1_700_000_000.7
    end = through_end_of_second(parse_time_option("now", now))
    assert in_window(job(30, submit_time=1_700_000_000.4, start_time=1_700_000_000.5), now - 60, end)
    assert not in_window(job(31, submit_time=1_700_000_001.0), now - 60, end)
    assert through_end_of_second(1_700_000_000.0) < 1_700_000_001.0


def test_array_selector_field_of_a_pending_task() -> None:
    task = array_task(222, 218, 5, "PENDING")
    assert build_rows([task], NOW, allocations_only=False)[0]["JobID"] == "218_5"
