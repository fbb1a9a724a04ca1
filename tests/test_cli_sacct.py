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


def test_cancelled_job_names_who_cancelled_and_batch_step_carries_the_signal() -> None:
    # As Slurm 22.05 records a job scancel'd while it ran (sacct/layout/cancelled in the
    # conformance suite): the job ends 0:0, its batch step is CANCELLED by the signal.
    j = finished(14, "c", "CANCELLED", sig=15, uid=1000, user="alice")
    rows = build_rows([j], NOW, allocations_only=False)
    out = render_table(parse_columns("JobID,State,ExitCode"), rows, header=False, parsable="plain")
    assert out == "14|CANCELLED by 1000|0:0\n14.batch|CANCELLED|0:15\n"


def test_a_batch_shell_killed_by_a_signal_is_a_cancelled_step() -> None:
    j = finished(15, "k", "FAILED", sig=15)
    rows = build_rows([j], NOW, allocations_only=False)
    out = render_table(parse_columns("JobID,State,ExitCode"), rows, header=False, parsable="plain")
    assert out == "15|FAILED|0:15\n15.batch|CANCELLED|0:15\n"


def test_zero_width_column_and_cut_titles() -> None:
    rows = build_rows([finished(16, "done", "COMPLETED")], NOW, allocations_only=True)
    out = render_table(parse_columns("JobName%0,State,ExitCode%3"), rows, header=True)
    assert out.splitlines() == ["      State Exi ", " ---------- --- ", "  COMPLETED 0:0 "]
    cols = parse_columns("JobName%0,State")
    assert render_table(cols, rows, header=False, parsable="plain", delimiter=":") == "done:COMPLETED\n"


def test_step_lines_blank_what_belongs_to_the_job() -> None:
    j = finished(17, "d", "COMPLETED", spec={"submit_line": "sbatch --wrap true"})
    rows = build_rows([j], NOW, allocations_only=False, cluster="c1")
    cols = parse_columns("JobID,Cluster,SubmitLine,WorkDir,DerivedExitCode,AllocTRES,Layout,ReqCPUFreq")
    assert render_table(cols, rows, header=False, parsable="plain").splitlines() == [
        "17|c1|sbatch --wrap true|/tmp/slurmbench|0:0|billing=1,cpu=1,node=1||Unknown",
        "17.batch|c1||||cpu=1,mem=0,node=1|Unknown|0",
    ]


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
    assert out.splitlines()[2] == "16|PENDING|1|None assigned|Unknown"  # the CPUs it asks, as Slurm shows


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


def test_reserved_is_the_wait_from_eligible_to_start_times_cpus() -> None:
    # 2 tasks x 2 CPUs waited 65 s from submission (eligible) to start.
    j = job(19, submit_time=NOW - 100, start_time=NOW - 35, spec={"num_tasks": 2})
    j.spec.cpus_per_task = 2
    row = build_rows([j], NOW, allocations_only=True)[0]
    assert (row["Reserved"], row["ResvCPU"], row["ResvCPURAW"]) == ("00:01:05", "00:04:20", "260")
    held = job(20, "h", "PENDING", submit_time=NOW - 100, priority=0)
    assert build_rows([held], NOW, allocations_only=True)[0]["Reserved"] == "00:00:00"


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


def test_state_filter_means_in_that_state_during_the_window() -> None:
    from spur.cli.sacct import in_state_window

    done = finished(20, "d", "COMPLETED", eligible_time=NOW - 30, start_time=NOW - 20)
    held = job(21, "h", "PENDING", priority=0)
    running = job(22, "r", "RUNNING", start_time=NOW - 5)
    # -s PD: eligible and waiting at some time in the window (a held job never was)
    assert in_state_window(done, {"PENDING"}, 0, NOW)
    assert not in_state_window(held, {"PENDING"}, 0, NOW)
    assert not in_state_window(done, {"PENDING"}, NOW - 10, NOW)
    # -s R: started and not ended then; -s CD: ended so within the window
    assert in_state_window(running, {"RUNNING"}, NOW - 1, NOW)
    assert in_state_window(done, {"RUNNING"}, NOW - 10, NOW) and not in_state_window(done, {"RUNNING"}, NOW, NOW)
    assert in_state_window(done, {"COMPLETED"}, 0, NOW) and not in_state_window(done, {"COMPLETED"}, NOW, NOW)
