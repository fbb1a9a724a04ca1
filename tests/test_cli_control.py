"""scontrol show job layout, scontrol update/actions, scancel ids, sinfo layouts and sbatch --test-only."""

from __future__ import annotations

import json

import pytest
from cli_jobs import NOW, array_task, job

from spur.cli.client import CliError
from spur.cli.formats import parse_format, render, render_header
from spur.cli.jobfields import scontrol_job
from spur.cli.sbatch import estimate_start
from spur.cli.scancel import CancelError, parse_ids, parse_targets
from spur.cli.scontrol import ScontrolError, build_update_job, job_action_requests, parse_key_values
from spur.cli.sinfo import HEADERS, default_format, reason_rows, sinfo_json, summary_rows
from spur.core.job import JobSpec
from spur.rpc.proto import spur_pb2 as pb

HELD = """\
JobId=217 JobName=held
   UserId=root(0) GroupId=root(0) MCS_label=N/A
   Priority=0 Nice=0 Account=(null) QOS=normal
   JobState=PENDING Reason=JobHeldUser Dependency=(null)
   Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=0:0
   RunTime=00:00:00 TimeLimit=1-00:00:00 TimeMin=N/A
   SubmitTime={submit} EligibleTime=Unknown
   AccrueTime=Unknown
   StartTime=Unknown EndTime=Unknown Deadline=N/A
   SuspendTime=None SecsPreSuspend=0 LastSchedEval={submit} Scheduler=Main
   Partition=debug AllocNode:Sid=localhost:0
   ReqNodeList=(null) ExcNodeList=(null)
   NodeList=
   NumNodes=1 NumCPUs=1 NumTasks=1 CPUs/Task=1 ReqB:S:C:T=0:0:*:*
   TRES=cpu=1,node=1,billing=1
   Socks/Node=* NtasksPerN:B:S:C=0:0:*:* CoreSpec=*
   MinCPUsNode=1 MinMemoryNode=0 MinTmpDiskNode=0
   Features=(null) DelayBoot=00:00:00
   OverSubscribe=OK Contiguous=0 Licenses=(null) Network=(null)
   Command=(null)
   WorkDir=/tmp/slurmbench
   StdErr=/tmp/slurmbench/slurm-217.out
   StdIn=/dev/null
   StdOut=/tmp/slurmbench/slurm-217.out
   Power=
   \n
"""


def test_scontrol_show_job_layout_matches_slurm() -> None:
    from spur.core.timespec import format_timestamp

    held = job(217, "held", "PENDING", reason="JobHeldUser", time_limit_secs=86400)
    assert scontrol_job(held, NOW) == HELD.format(submit=format_timestamp(NOW - 10))


def test_scontrol_show_job_alloc_sid_is_the_submitters_session() -> None:
    held = job(217, "held", "PENDING", spec={"alloc_sid": 4242}, submit_host="login1")
    assert "AllocNode:Sid=login1:4242\n" in scontrol_job(held, NOW)


def test_scontrol_array_task_first_line_and_dependency() -> None:
    task = array_task(221, 218, 4, "PENDING", reason="Dependency", dependency="afterok:12_*(unfulfilled)")
    text = scontrol_job(task, NOW)
    assert text.startswith("JobId=221 ArrayJobId=218 ArrayTaskId=4 ArrayTaskThrottle=2 JobName=arr\n")
    assert "   JobState=PENDING Reason=Dependency Dependency=afterok:12_*(unfulfilled)\n" in text
    assert "StdOut=/tmp/slurmbench/slurm-218_4.out" in text


def test_scontrol_requeue_restarts_and_suspend_line() -> None:
    j = job(30, state="SUSPENDED", restarts=2, start_time=NOW - 100, suspend_time=NOW - 40, suspended_secs=0)
    j.spec.no_requeue = True
    text = scontrol_job(j, NOW)
    assert "   Requeue=0 Restarts=2 BatchFlag=1" in text
    assert "SecsPreSuspend=60 " in text and "RunTime=00:01:00 " in text


def test_update_job_request() -> None:
    kv = parse_key_values(["JobId=218_3", "TimeLimit=1:00:00", "Partition=gpu", "Nice=5", "Name=x"])
    req = build_update_job(kv)
    assert (req.job_id, req.array_task_id, req.time_limit_secs) == (218, 3, 3600)
    assert (req.partition, req.nice, req.name) == ("gpu", 5, "x")
    assert not req.HasField("priority") and not req.HasField("comment")
    unlimited = build_update_job({"jobid": "5", "timelimit": "UNLIMITED"})
    assert unlimited.time_limit_secs == -1
    with pytest.raises(ScontrolError, match="not supported: bogus=1"):
        build_update_job({"jobid": "5", "bogus": "1"})
    with pytest.raises(ScontrolError, match="Invalid job id specified"):
        build_update_job({"jobid": "x"})


def test_job_action_requests() -> None:
    reqs = job_action_requests("hold", ["1,2", "3_4"])
    assert [(r.job_id, r.action) for r in reqs] == [(1, "hold"), (2, "hold"), (3, "hold")]
    assert reqs[2].array_task_id == 4 and not reqs[0].HasField("array_task_id")


@pytest.mark.parametrize(
    ("ids", "expected"),
    [
        (["12"], [(12, None)]),
        (["1_3"], [(1, 3)]),
        (["1_[1-3]"], [(1, 1), (1, 2), (1, 3)]),
        (["1_[1,3-4]", "7"], [(1, 1), (1, 3), (1, 4), (7, None)]),
    ],
)
def test_scancel_targets(ids: list[str], expected: list) -> None:
    assert parse_targets(ids) == expected


def test_scancel_step_ids() -> None:
    assert parse_ids(["12.3", "7", "1_[1-2].0"]) == [(12, None, 3), (7, None, None), (1, 1, 0), (1, 2, 0)]
    assert parse_targets(["12.3"]) == [(12, None)]


@pytest.mark.parametrize("bad", ["abc", "1_[3-1]", "1_x", "0", "12.batch", "12.x"])
def test_scancel_bad_ids(bad: str) -> None:
    with pytest.raises(CancelError, match="Invalid job id"):
        parse_targets([bad])


def node(name: str, state: str = "allocated", **kw) -> pb.NodeInfo:
    defaults = dict(
        cpus=2, memory_mb=20000, sockets=2, cores_per_socket=1, threads_per_core=1, partitions=["debug"]
    )
    defaults.update(kw)
    return pb.NodeInfo(name=name, state=state, **defaults)


PART = pb.PartitionInfo(name="debug", state="UP", is_default=True, nodes=["vm"], max_time_secs=-1)


def sinfo_text(nodes, *, node_oriented: bool = False, long: bool = False) -> str:
    rows = summary_rows([PART], {n.name: n for n in nodes}, node_oriented)
    spec = parse_format(default_format(rows, node_oriented, long))
    return "".join(
        line + "\n" for line in [render_header(spec, HEADERS)] + [render(spec, r.value) for r in rows]
    )


def test_sinfo_layouts_match_reference() -> None:
    nodes = [node("vm", alloc_cpus=2)]
    assert sinfo_text(nodes) == (
        "PARTITION AVAIL  TIMELIMIT  NODES  STATE NODELIST\ndebug*       up   infinite      1  alloc vm\n"
    )
    assert sinfo_text(nodes, node_oriented=True) == (
        "NODELIST   NODES PARTITION STATE \nvm             1    debug* alloc \n"
    )
    assert sinfo_text(nodes, node_oriented=True, long=True) == (
        "NODELIST   NODES PARTITION       STATE CPUS    S:C:T MEMORY TMP_DISK WEIGHT AVAIL_FE REASON              \n"
        "vm             1    debug*   allocated 2       2:1:1  20000        0      1   (null) none                \n"
    )


def test_sinfo_reasons_and_letters() -> None:
    rows = reason_rows(
        [node("a", "drained", reason="maint"), node("b", "drained", reason="maint"), node("c")]
    )
    spec = parse_format("%E|%N|%C|%F")
    assert [render(spec, r.value) for r in rows] == ["maint|a,b|0/0/4/4|0/0/2/2"]


def test_sinfo_json_shape() -> None:
    doc = json.loads(sinfo_json([PART], [node("vm", alloc_cpus=1)]))
    assert set(doc) == {"meta", "errors", "nodes", "partitions"}
    assert doc["nodes"][0]["name"] == "vm" and doc["nodes"][0]["state"] == "allocated"
    assert doc["nodes"][0]["idle_cpus"] == 1
    assert doc["partitions"][0]["name"] == "debug" and doc["partitions"][0]["total_cpus"] == 2


def test_test_only_estimate_now_and_later() -> None:
    spec = JobSpec(num_nodes=1, num_tasks=2, cpus_per_task=1)
    idle = [node("vm", "idle")]
    start, names, cpus, part = estimate_start(spec, [PART], idle, [], NOW)
    assert (start, names, cpus, part) == (NOW, ["vm"], 2, "debug")
    busy = [node("vm", alloc_cpus=2)]
    running = job(5, start_time=NOW - 60, time_limit_secs=600)
    running.allocation[0].cpus = 2
    start, names, _, _ = estimate_start(spec, [PART], busy, [running], NOW)
    assert (start, names) == (NOW + 540, ["vm"])
    with pytest.raises(CliError, match="Requested node configuration is not available"):
        estimate_start(JobSpec(num_nodes=2), [PART], idle, [], NOW)
    with pytest.raises(CliError, match="Invalid partition name"):
        estimate_start(JobSpec(partition="nope"), [PART], idle, [], NOW)
