"""Impossible requests answered as Slurm 22.05 answers them (shared/reference/impossible-requests-22.05.txt):
refused at submission, or pending with PartitionConfig / PartitionNodeLimit (refused with
enforce_part_limits). One node of 2 CPUs / 20000 MB, no GPUs, as in the reference."""

from __future__ import annotations

import pytest

from spur.core.job import Partition
from spur.state import commands as c
from spur.state.feasibility import PartitionSummary, partition_reason, submit_refusal
from spur.state.machine import Rejected
from spur.state.sched_view import eligible_jobs
from tests.state_helpers import Log, register, spec, submit


def cluster(enforce: str = "NO", nodes_expr: str = "ALL") -> Log:
    log = Log()
    part = Partition("debug", is_default=True, nodes_expr=nodes_expr, enforce_limits=enforce)
    assert log(c.ConfigurePartitions([part])) is True
    register(log, "vm", cpus=2, mem=20000)
    return log


@pytest.mark.parametrize(
    ("request_kw", "message"),
    [
        (
            {"mem_per_node_mb": 100 * 1024},
            "Memory specification can not be satisfied\nRequested node configuration is not available",
        ),
        (
            {"mem_per_cpu_mb": 30000},
            "Memory specification can not be satisfied\nRequested node configuration is not available",
        ),
        ({"nodelist": ["nosuchnode"]}, "Invalid node name specified"),
        ({"gres": ["gpu:1"]}, "Requested node configuration is not available"),
        ({"gres": ["fpga:1"]}, "Requested node configuration is not available"),
        ({"gpus_total": 1}, "Requested node configuration is not available"),
        ({"constraint": ["bigmem"]}, "Invalid feature specification"),
        (
            {"partition": "nosuchpart"},
            "invalid partition specified: nosuchpart\nInvalid partition name specified",
        ),
    ],
)
def test_refused_at_submission_with_slurms_words(request_kw, message) -> None:
    log = cluster()
    result = submit(log, **request_kw)
    assert isinstance(result, Rejected)
    assert result.message == message
    assert log.state.jobs == {}  # no state change


@pytest.mark.parametrize(
    ("request_kw", "reason"),
    [
        ({"cpus_per_task": 64}, "PartitionConfig"),
        ({"num_tasks": 8}, "PartitionConfig"),
        ({"num_nodes": 2}, "PartitionNodeLimit"),
    ],
)
def test_beyond_the_partition_pends_with_slurms_reason(request_kw, reason) -> None:
    log = cluster()
    job_id = submit(log, **request_kw)
    assert isinstance(job_id, int)
    assert log.state.jobs[job_id].reason == reason
    # and the scheduler loop keeps that reason (the job is not offered to the plugin)
    eligible, blocked = eligible_jobs(log.state, 200.0)
    assert eligible == [] and blocked == {job_id: reason}


def test_held_job_beyond_the_partition_shows_the_hold_first() -> None:
    log = cluster()
    job_id = submit(log, num_nodes=2, hold=True)
    assert log.state.jobs[job_id].reason == "JobHeldUser"


@pytest.mark.parametrize("enforce", ["ALL", "ANY", "YES"])
@pytest.mark.parametrize(
    ("request_kw", "message"),
    [
        ({"cpus_per_task": 64}, "More processors requested than permitted"),
        ({"num_nodes": 2}, "Node count specification invalid"),
    ],
)
def test_enforce_part_limits_refuses_instead(enforce, request_kw, message) -> None:
    log = cluster(enforce)
    result = submit(log, **request_kw)
    assert isinstance(result, Rejected) and result.message == message


def test_requests_that_fit_are_untouched() -> None:
    log = cluster()
    job_id = submit(log, num_tasks=2, mem_per_node_mb=20000)
    assert log.state.jobs[job_id].reason == "None"
    eligible, _ = eligible_jobs(log.state, 200.0)
    assert [j.job_id for j in eligible] == [job_id]


def test_partition_without_registered_nodes_accepts_and_waits() -> None:
    """Agents register themselves: a starting cluster must not refuse everything."""
    log = Log()
    assert log(c.ConfigurePartitions([Partition("debug", is_default=True)])) is True
    job_id = submit(log, mem_per_node_mb=10**6, num_nodes=3)
    assert isinstance(job_id, int)


def test_listed_but_unregistered_node_is_not_invalid() -> None:
    log = cluster(nodes_expr="vm,gpu[1-2]")
    assert isinstance(submit(log, nodelist=["gpu1"]), int)
    assert isinstance(submit(log, nodelist=["gpu9"]), Rejected)


def test_pure_helpers_on_their_own() -> None:
    from tests.state_helpers import GpuDevice, Node

    nodes = [
        Node(name="a", cpus=4, memory_mb=1000, features=["fast"]),
        Node(
            name="b",
            cpus=2,
            memory_mb=3000,
            gpus=[GpuDevice(0, "nvidia", "a100"), GpuDevice(1, "nvidia", "h100")],
        ),
    ]
    part = PartitionSummary.of(nodes)
    assert (part.nodes, part.total_cpus, part.max_cpus, part.max_memory_mb) == (2, 6, 4, 3000)
    assert dict(part.max_gpus_by_model) == {"a100": 1, "h100": 1} and part.features == {"fast"}
    assert partition_reason(spec(num_tasks=7), part) == "PartitionConfig"
    assert partition_reason(spec(num_tasks=6), part) is None
    assert partition_reason(spec(num_nodes=3), part) == "PartitionNodeLimit"
    assert partition_reason(spec(), PartitionSummary()) is None
    names = {"a", "b"}
    assert submit_refusal(spec(mem_per_node_mb=3000), part, names, None) is None
    assert submit_refusal(spec(gres=["gpu:a100:1"]), part, names, None) is None
    assert submit_refusal(spec(gres=["gpu:a100:2"]), part, names, None) is not None
    assert submit_refusal(spec(gres=["gpu:2"]), part, names, None) is None
    assert submit_refusal(spec(gpus_total=3), part, names, None) is not None


def test_summary_follows_node_registration() -> None:
    log = cluster()
    assert isinstance(submit(log, mem_per_node_mb=30000), Rejected)
    register(log, "big", cpus=2, mem=64000)
    assert isinstance(submit(log, mem_per_node_mb=30000), int)
    assert log.replay().partition_summary(log.state.partitions["debug"]).max_memory_mb == 64000
