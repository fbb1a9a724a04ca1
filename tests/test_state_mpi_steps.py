"""Steps as MPI launchers create them: --ntasks-per-node with --nodes/--nodelist inside an allocation."""

from __future__ import annotations

from state_helpers import Log, register, spec

from spur.core.job import NodeAllocation, StepSpec
from spur.state import commands as c
from spur.state.machine import Rejected


def running_job(log: Log, nodes: int = 3) -> int:
    for i in range(1, nodes + 1):
        register(log, f"n{i}", cpus=4)
    job_id = log(c.SubmitJob(spec(num_nodes=nodes), "u", 1000, 1000, "u", 1.0))
    log(c.StartJob(job_id, [NodeAllocation(f"n{i}", 2) for i in range(1, nodes + 1)], 1.0, 1))
    log(c.JobLaunched(job_id, 1))
    return job_id


def layout(step) -> list[tuple[str, int]]:
    return [(a.node, a.tasks) for a in step.allocation]


def test_ntasks_per_node_alone_fills_every_node_of_the_allocation():
    log = Log()
    j = running_job(log)
    step = log(c.CreateStep(j, StepSpec(argv=["a"], ntasks_per_node=2), 1000, 2.0))
    assert layout(step) == [("n1", 2), ("n2", 2), ("n3", 2)]


def test_open_mpi_orted_step_one_task_on_each_listed_node():
    log = Log()
    j = running_job(log)
    orted = StepSpec(argv=["orted"], num_nodes=2, num_tasks=2, ntasks_per_node=1, nodelist=["n2", "n3"])
    assert layout(log(c.CreateStep(j, orted, 1000, 2.0))) == [("n2", 1), ("n3", 1)]


def test_ntasks_with_ntasks_per_node_picks_just_enough_nodes():
    log = Log()
    j = running_job(log)
    step = log(c.CreateStep(j, StepSpec(argv=["a"], num_tasks=3, ntasks_per_node=2), 1000, 2.0))
    assert layout(step) == [("n1", 2), ("n2", 1)]


def test_more_tasks_than_ntasks_per_node_allows_is_refused():
    log = Log()
    j = running_job(log)
    before = log.state.jobs[j].next_step_id
    too_many = log(
        c.CreateStep(j, StepSpec(argv=["a"], num_nodes=1, num_tasks=3, ntasks_per_node=2), 1000, 2.0)
    )
    assert isinstance(too_many, Rejected) and too_many.code == "INVALID_ARGUMENT"
    assert "--ntasks-per-node=2" in too_many.message
    assert log.state.jobs[j].next_step_id == before


def test_a_step_gets_no_more_cpus_than_its_job_holds_on_a_node():
    log = Log()
    j = running_job(log)  # two CPUs on each of three nodes
    before = log.state.jobs[j].next_step_id
    refused = log(c.CreateStep(j, StepSpec(argv=["a"], num_nodes=1, num_tasks=3), 1000, 2.0))
    assert isinstance(refused, Rejected) and refused.code == "INVALID_ARGUMENT"
    assert refused.message == "More processors requested than permitted"
    assert log.state.jobs[j].next_step_id == before
    wide = log(c.CreateStep(j, StepSpec(argv=["a"], num_tasks=1, cpus_per_task=3), 1000, 2.0))
    assert isinstance(wide, Rejected)
    assert layout(log(c.CreateStep(j, StepSpec(argv=["a"], num_tasks=6), 1000, 2.0))) == [
        ("n1", 2),
        ("n2", 2),
        ("n3", 2),
    ]
