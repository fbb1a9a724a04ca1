"""Slurm 22.05 forms the CLI prints: ``scontrol -o`` records, the date line of ``sinfo -l``, ``sacct -j
ID.STEP`` selection and ``sshare -U`` (the formatting and parsing, without a controller)."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from cli_jobs import NOW, array_task, job

from spur.cli.jobfields import scontrol_job
from spur.cli.sacct import JobSelector, SacctError, build_rows, parse_job_selectors
from spur.cli.scontrol import show_node_text, show_partition_text, split_oneliner
from spur.cli.sinfo import date_line
from spur.cli.sshare import users_only
from spur.rpc.proto import spur_pb2 as pb

REFERENCE = Path("/work/shared/reference/slurm-22.05-outputs.txt")


def _section(title: str) -> str:
    text = REFERENCE.read_text()
    start = text.index(f"## {title}\n") + len(title) + 4
    end = text.find("\n## ", start)
    return text[start : end + 1]


def _node(**kw) -> pb.NodeInfo:
    base = dict(
        name="vm", state="allocated", cpus=2, alloc_cpus=2, memory_mb=20000, sockets=2,
        cores_per_socket=1, threads_per_core=1, partitions=["debug"], address="vm", os="Linux",
    )  # fmt: skip
    base.update(kw)
    return pb.NodeInfo(**base)


# ---- scontrol -o ---------------------------------------------------------------------------------


def test_oneliner_flag_is_taken_from_anywhere_before_a_double_dash() -> None:
    assert split_oneliner(["-o", "show", "job"]) == (True, ["show", "job"])
    assert split_oneliner(["show", "node", "vm", "--oneliner"]) == (True, ["show", "node", "vm"])
    assert split_oneliner(["show", "job", "5"]) == (False, ["show", "job", "5"])
    assert split_oneliner(["show", "--", "-o"]) == (False, ["show", "-o"])


def test_job_record_on_one_line_keeps_every_field_and_slurms_trailing_separator() -> None:
    held = job(217, "held", "PENDING", reason="JobHeldUser", time_limit_secs=86400)
    multi = scontrol_job(held, NOW)
    one = scontrol_job(held, NOW, one_liner=True)
    assert one.count("\n") == 1 and one.endswith(" Power= \n")
    assert one.startswith("JobId=217 JobName=held UserId=root(0) GroupId=root(0) MCS_label=N/A Priority=0 ")
    # The same fields in the same order: only Slurm's line end ("\n   ") became one space.
    assert one.split() == multi.split()
    assert " JobState=PENDING Reason=JobHeldUser Dependency=(null) Requeue=1 " in one


def test_node_and_partition_records_on_one_line_match_the_reference_fields() -> None:
    node_text = show_node_text(_node(), NOW, one_liner=True)
    # Slurm's first node line ends in a space, so a double space follows it on one line.
    assert node_text.startswith("NodeName=vm Arch=x86_64 CoresPerSocket=1  CPUAlloc=2 CPUEfctv=2 CPUTot=2 ")
    assert node_text.count("\n") == 1
    ref_keys = [tok.split("=")[0] for tok in _section("scontrol show node").split() if "=" in tok]
    ours = [tok.split("=")[0] for tok in node_text.split() if "=" in tok]
    assert ours[:8] == ref_keys[:8]
    part = pb.PartitionInfo(name="debug", state="UP", is_default=True, nodes=["vm"], max_time_secs=-1)
    one = show_partition_text(part, {"vm": _node()}, one_liner=True)
    multi = show_partition_text(part, {"vm": _node()})
    assert one == " ".join(line.strip() for line in multi.strip().splitlines()) + "\n"
    assert one.startswith("PartitionName=debug AllowGroups=ALL AllowAccounts=ALL AllowQos=ALL AllocNodes=ALL ")
    assert multi.startswith(_section("scontrol show partition").splitlines()[0] + "\n   AllowGroups=ALL")


# ---- sinfo -l ------------------------------------------------------------------------------------


def test_sinfo_long_date_line_is_slurm_ctime() -> None:
    stamp = time.mktime((2026, 12, 4, 13, 57, 35, 0, 0, -1))
    assert date_line(stamp) == "Fri Dec 04 13:57:35 2026"
    assert re.fullmatch(r"[A-Z][a-z]{2} [A-Z][a-z]{2} \d\d \d\d:\d\d:\d\d \d{4}", date_line(time.time()))


# ---- sacct -j ID.STEP ----------------------------------------------------------------------------


def _with_steps(job_id: int) -> pb.JobInfo:
    j = job(job_id, "stepped", "COMPLETED", end_time=NOW - 1)
    for step_id in (0, 1):
        j.steps.append(
            pb.StepInfo(
                step_id=step_id, spec=pb.StepSpec(argv=["/bin/true"]), state="COMPLETED",
                start_time=NOW - 2, end_time=NOW - 1, allocation=[pb.NodeAllocation(node="vm", cpus=1, tasks=1)],
            )  # fmt: skip
        )
    return j


def _ids(rows) -> list[str]:
    return [r["JobID"] for r in rows]


def test_step_selectors_parse_named_and_numbered_steps() -> None:
    assert parse_job_selectors(["40.batch", "40.extern", "40.00", "218_3.1", "41"]) == [
        JobSelector(40, None, "batch"),
        JobSelector(40, None, "extern"),
        JobSelector(40, None, "0"),
        JobSelector(218, 3, "1"),
        JobSelector(41, None, None),
    ]
    for bad in ("40.", "40.bogus", "40_x.0", ".0"):
        with pytest.raises(SacctError, match=f"Bad job/step specified: {re.escape(bad)}"):
            parse_job_selectors([bad])


def test_a_step_selector_prints_only_that_step() -> None:
    j = _with_steps(40)
    everything = build_rows([j], NOW, allocations_only=False)
    assert _ids(everything) == ["40", "40.batch", "40.0", "40.1"]
    assert _ids(build_rows([j], NOW, allocations_only=False, selectors=parse_job_selectors(["40.1"]))) == [
        "40.1"
    ]
    assert _ids(build_rows([j], NOW, allocations_only=False, selectors=parse_job_selectors(["40.batch"]))) == [
        "40.batch"
    ]
    both = parse_job_selectors(["40.batch", "40.0"])
    assert _ids(build_rows([j], NOW, allocations_only=False, selectors=both)) == ["40.batch", "40.0"]
    # No extern step was recorded: nothing to print for it, and -X prints no step at all.
    assert build_rows([j], NOW, allocations_only=False, selectors=parse_job_selectors(["40.extern"])) == []
    assert build_rows([j], NOW, allocations_only=True, selectors=parse_job_selectors(["40.0"])) == []
    # A plain id next to a step id shows the whole job.
    mixed = parse_job_selectors(["40", "40.1"])
    assert _ids(build_rows([j], NOW, allocations_only=False, selectors=mixed)) == _ids(everything)


def test_step_selector_of_one_array_task_leaves_its_siblings_out() -> None:
    t3 = array_task(221, 218, 3, "COMPLETED", end_time=NOW - 1)
    t4 = array_task(222, 218, 4, "COMPLETED", end_time=NOW - 1)
    rows = build_rows([t3, t4], NOW, allocations_only=False, selectors=parse_job_selectors(["218_4.batch"]))
    assert _ids(rows) == ["218_4.batch"]
    rows = build_rows([t3, t4], NOW, allocations_only=False, selectors=parse_job_selectors(["218.batch"]))
    assert _ids(rows) == ["218_3.batch", "218_4.batch"]


# ---- sshare -U -----------------------------------------------------------------------------------


def test_sshare_users_only_drops_account_lines_and_their_indentation() -> None:
    rows = [
        {"account": "root", "user": ""},
        {"account": " root", "user": "root"},
        {"account": " physics", "user": ""},
        {"account": "  physics", "user": "alice"},
    ]
    assert users_only(rows) == [{"account": "root", "user": "root"}, {"account": "physics", "user": "alice"}]
