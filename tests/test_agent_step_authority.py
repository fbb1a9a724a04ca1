"""spur.agent.step_authority: a LaunchStep runs only what the controller's record says, for its owner."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spur.agent.step_authority import may_act_for, step_launch
from spur.auth.identity import Identity
from spur.rpc.proto import spur_pb2 as pb
from spur.rpc.status import RpcError, StatusCode

OWNER = Identity(1001, 1001, "alice", "alice")
OTHER = Identity(1002, 1002, "bob", "bob")
ROOT = Identity(0, 0, "root", "root")


def record(**changes: object) -> pb.JobInfo:
    """Job 7 of alice, running on n0 and n1; step 3 runs 2 tasks on n0 and 3 on n1."""
    job = pb.JobInfo(
        job_id=7,
        user="alice",
        uid=1001,
        gid=1001,
        state="RUNNING",
        restarts=2,
        time_limit_secs=600,
        allocation=[
            pb.NodeAllocation(node="n0", cpus=2, tasks=2),
            pb.NodeAllocation(node="n1", cpus=4, tasks=3),
        ],
        steps=[
            pb.StepInfo(
                step_id=3,
                state="RUNNING",
                spec=pb.StepSpec(argv=["hostname"]),
                allocation=[pb.NodeAllocation(node="n0", tasks=2), pb.NodeAllocation(node="n1", tasks=3)],
            )
        ],
    )
    for name, value in changes.items():
        if name == "step_allocation":
            del job.steps[0].allocation[:]
            job.steps[0].allocation.extend(value)  # type: ignore[arg-type]
        elif name.startswith("step_"):
            setattr(job.steps[0], name[5:], value)
        elif name == "exited_nodes":
            job.steps[0].exited_nodes.extend(value)  # type: ignore[arg-type]
        else:
            setattr(job, name, value)
    return job


def refusal(
    job: pb.JobInfo | None, *, step_id: int = 3, node: str = "n1", caller: Identity = OWNER
) -> RpcError:
    with pytest.raises(RpcError) as exc:
        step_launch(job, 7, step_id, node=node, caller=caller)
    return exc.value


def test_the_launch_is_the_controllers_record_with_this_nodes_first_rank() -> None:
    launch = step_launch(record(), 7, 3, node="n1", caller=OWNER)
    assert (launch.job.uid, launch.job.gid, launch.job.user, launch.job.restarts) == (1001, 1001, "alice", 2)
    assert launch.job.time_limit_secs == 600 and len(launch.job.allocation) == 2
    assert list(launch.step.spec.argv) == ["hostname"] and launch.step.allocation[1].tasks == 3
    assert (launch.node, launch.first_task) == ("n1", 2)  # after n0's two tasks, as srun numbers them
    assert step_launch(record(), 7, 3, node="n0", caller=OWNER).first_task == 0


def test_an_administrator_may_start_a_step_of_any_job() -> None:
    assert step_launch(record(), 7, 3, node="n1", caller=ROOT).job.uid == 1001  # still runs as alice
    assert may_act_for(ROOT, 1001) and may_act_for(OWNER, 1001) and not may_act_for(OTHER, 1001)


@pytest.mark.parametrize(
    ("job", "kwargs", "code", "words"),
    [
        (None, {}, StatusCode.NOT_FOUND, "job 7 is not known to the controller"),
        (record(job_id=8), {}, StatusCode.NOT_FOUND, "job 7 is not known"),
        (record(), {"caller": OTHER}, StatusCode.PERMISSION_DENIED, "belongs to uid 1001, not to uid 1002"),
        (record(state="PENDING"), {}, StatusCode.FAILED_PRECONDITION, "job 7 is PENDING"),
        (record(state="COMPLETED"), {}, StatusCode.FAILED_PRECONDITION, "job 7 is COMPLETED"),
        (record(), {"node": "n9"}, StatusCode.FAILED_PRECONDITION, "node n9 is not allocated to job 7"),
        (record(), {"step_id": 4}, StatusCode.NOT_FOUND, "step 7.4 is not known to the controller"),
        (record(step_state="COMPLETED"), {}, StatusCode.FAILED_PRECONDITION, "step 7.3 is COMPLETED"),
        (record(step_state="CANCELLED"), {}, StatusCode.FAILED_PRECONDITION, "step 7.3 is CANCELLED"),
        (record(exited_nodes=["n1"]), {}, StatusCode.FAILED_PRECONDITION, "on node n1 have already ended"),
        (
            record(step_allocation=[pb.NodeAllocation(node="n0", tasks=2)]),
            {},
            StatusCode.FAILED_PRECONDITION,
            "node n1 is not part of step 7.3",
        ),
    ],
)
def test_refusals_say_why(job: pb.JobInfo | None, kwargs: dict, code: StatusCode, words: str) -> None:
    exc = refusal(job, **kwargs)
    assert exc.code == code and words in exc.message, exc.message


def test_another_users_job_is_refused_before_anything_about_it_is_said() -> None:
    """A stranger learns no more than that the job is not its own (not its steps or nodes)."""
    for job in (record(state="PENDING"), record(step_state="COMPLETED"), record()):
        assert refusal(job, caller=OTHER, step_id=9, node="n9").code == StatusCode.PERMISSION_DENIED


# ---------------------------------------------------------------------------- any record, any caller

NODES = st.sampled_from(["n0", "n1", "n2"])
STATES = st.sampled_from(["RUNNING", "PENDING", "COMPLETED", "CANCELLED", ""])
UIDS = st.sampled_from([0, 1001, 1002])


@st.composite
def records(draw: st.DrawFn) -> pb.JobInfo:
    def allocation() -> list[pb.NodeAllocation]:
        nodes = draw(st.lists(NODES, unique=True, max_size=3))
        return [pb.NodeAllocation(node=n, tasks=draw(st.integers(0, 4))) for n in nodes]

    steps = [
        pb.StepInfo(
            step_id=step_id,
            state=draw(STATES),
            spec=pb.StepSpec(argv=["true"]),
            allocation=allocation(),
            exited_nodes=draw(st.lists(NODES, unique=True, max_size=2)),
        )
        for step_id in draw(st.lists(st.integers(0, 3), unique=True, max_size=3))
    ]
    return pb.JobInfo(
        job_id=draw(st.sampled_from([7, 8])),
        uid=draw(UIDS),
        gid=draw(st.integers(0, 2000)),
        state=draw(STATES),
        restarts=draw(st.integers(0, 3)),
        allocation=allocation(),
        steps=steps,
    )


@settings(max_examples=300, deadline=None)
@given(job=st.none() | records(), step_id=st.integers(0, 3), node=NODES, caller_uid=UIDS)
def test_whatever_the_record_only_a_running_step_of_ones_own_job_here_launches(
    job: pb.JobInfo | None, step_id: int, node: str, caller_uid: int
) -> None:
    caller = Identity(caller_uid, caller_uid, f"u{caller_uid}", f"u{caller_uid}")
    try:
        launch = step_launch(job, 7, step_id, node=node, caller=caller)
    except RpcError as exc:
        assert exc.code in (
            StatusCode.NOT_FOUND,
            StatusCode.PERMISSION_DENIED,
            StatusCode.FAILED_PRECONDITION,
        )
        return
    assert job is not None and launch.job == job  # the controller's record, unchanged
    assert caller_uid in (0, job.uid) and job.state == "RUNNING" and job.job_id == 7
    assert any(a.node == node for a in job.allocation)
    step = next(s for s in job.steps if s.step_id == step_id)
    assert launch.step == step and step.state == "RUNNING" and node not in step.exited_nodes
    names = [a.node for a in step.allocation]
    assert launch.first_task == sum(a.tasks for a in step.allocation[: names.index(node)])
