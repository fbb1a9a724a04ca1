"""An unacknowledged launch is retried with backoff, then requeued (or failed): never left RUNNING."""

from __future__ import annotations

import pytest
import trio
from trio.testing import MockClock

from spur.config import parse_config_text
from spur.controller.app import Controller
from spur.controller.duties import LAUNCH_POLICY, Dispatcher
from spur.controller.launch_policy import Fail, LaunchPolicy, Requeue, Retry, next_step
from spur.controller.launch_watch import missing_jobs
from spur.core.job import JobSpec, JobState, Node, NodeAllocation
from spur.rpc.pool import agent_pool
from spur.rpc.status import StatusCode
from spur.state import commands as c

POLICY = LaunchPolicy(max_attempts=3, first_delay=0.5, max_delay=10.0)


def step(attempt, code, *, requeueable=True):
    return next_step(POLICY, attempt, code, "no answer", node="n1", requeueable=requeueable)


@pytest.mark.parametrize(
    "code",
    [StatusCode.UNAVAILABLE, StatusCode.DEADLINE_EXCEEDED, StatusCode.INTERNAL, StatusCode.PERMISSION_DENIED],
)
def test_unacknowledged_launch_is_retried_with_backoff_then_requeued(code):
    assert step(1, code) == Retry(0.5)
    assert step(2, code) == Retry(1.0)
    outcome = step(3, code)
    assert isinstance(outcome, Requeue)
    assert outcome.reason == "launch not acknowledged by n1 after 3 attempts: no answer"


def test_non_requeueable_job_fails_after_the_retries():
    assert step(1, StatusCode.UNAVAILABLE, requeueable=False) == Retry(0.5)
    assert isinstance(step(3, StatusCode.UNAVAILABLE, requeueable=False), Fail)


@pytest.mark.parametrize("code", [StatusCode.FAILED_PRECONDITION, StatusCode.INVALID_ARGUMENT])
def test_a_refusal_the_job_caused_fails_at_once(code):
    assert step(1, code) == Fail("launch failed on n1: no answer")


def test_backoff_is_capped():
    policy = LaunchPolicy(max_attempts=10, first_delay=1.0, max_delay=4.0)
    assert [policy.delay(a) for a in range(1, 6)] == [1.0, 2.0, 4.0, 4.0, 4.0]


# ---------------------------------------------------------------- the dispatcher, on Trio's MockClock


@pytest.fixture
def mock_clock() -> MockClock:
    return MockClock(autojump_threshold=0.05)


def closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nobody listens there once the socket is closed


async def launch_on_dead_node(tmp_path, **spec) -> tuple[Controller, int, float]:
    cfg = parse_config_text("", overrides={"controller.state_dir": str(tmp_path / "state")})
    ctl = Controller(cfg, listen=("127.0.0.1", 0))
    async with trio.open_nursery() as nursery:
        await nursery.start(ctl.raft.run)
        node = Node(name="n1", address="127.0.0.1", port=closed_port(), cpus=1, memory_mb=1000)
        await ctl.propose(c.RegisterNode(node, 0.0))
        job = await ctl.propose(
            c.SubmitJob(JobSpec(script="#!/bin/sh\ntrue\n", work_dir="/tmp", **spec), "u", 1, 1, "u", 1.0)
        )
        await ctl.propose(c.StartJob(job, [NodeAllocation("n1", 1)], 1.0, ctl.raft.term))
        began = trio.current_time()
        async with agent_pool() as pool:
            await Dispatcher(ctl)._launch(pool, job)
        waited = trio.current_time() - began
        nursery.cancel_scope.cancel()
    return ctl, job, waited


async def test_dispatcher_requeues_a_launch_no_agent_acknowledged(tmp_path, mock_clock):
    ctl, job, waited = await launch_on_dead_node(tmp_path)
    record = ctl.state.jobs[job]
    assert record.state is JobState.PENDING and not record.allocation
    assert record.reason == "launch failed requeued"
    assert record.restarts == 1
    from spur.cli.jobfields import scontrol_job
    from spur.rpc.convert import job_to_proto

    assert "JobState=PENDING Reason=launch_failed_requeued " in scontrol_job(job_to_proto(record), 0.0)
    # the retries waited out the backoff (0.5 s + 1 s) on the mock clock, not in real time
    assert waited >= LAUNCH_POLICY.delay(1) + LAUNCH_POLICY.delay(2)


async def test_dispatcher_fails_a_no_requeue_job_it_could_not_launch(tmp_path, mock_clock):
    ctl, job, _waited = await launch_on_dead_node(tmp_path, no_requeue=True)
    record = ctl.state.jobs[job]
    assert record.state is JobState.FAILED
    assert "launch not acknowledged by n1 after 3 attempts" in record.reason


# ---------------------------------------------------------------- launches lost or ignored by the node


def test_missing_jobs_are_lost_only_after_the_grace_period():
    since, lost = missing_jobs({1, 2, 3}, {1}, {}, now=10.0, grace=90.0)
    assert since == {2: 10.0, 3: 10.0} and lost == []
    since, lost = missing_jobs({1, 2, 3}, {1, 3}, since, now=60.0, grace=90.0)
    assert since == {2: 10.0} and lost == []  # job 3 showed up again: forgotten
    since, lost = missing_jobs({1, 2, 3}, {1}, since, now=100.0, grace=90.0)
    assert since == {2: 10.0, 3: 100.0} and lost == []  # 90 s missing is not yet more than the grace
    since, lost = missing_jobs({1, 2, 3}, {1}, since, now=100.5, grace=90.0)
    assert lost == [2] and since == {3: 100.0}
    assert missing_jobs(set(), {7}, since, now=500.0, grace=90.0) == ({}, [])


async def test_a_job_its_node_never_mentions_is_requeued_not_left_running(tmp_path):
    from spur.rpc.proto import spur_pb2 as pb

    cfg = parse_config_text(
        "[controller]\nnode_timeout_secs = 90\n", overrides={"controller.state_dir": str(tmp_path)}
    )
    ctl = Controller(cfg, listen=("127.0.0.1", 0))
    async with trio.open_nursery() as nursery:
        await nursery.start(ctl.raft.run)
        for name in ("n1", "n2"):
            await ctl.propose(
                c.RegisterNode(Node(name=name, address="127.0.0.1", cpus=2, memory_mb=1000), 0.0)
            )
        script = JobSpec(script="#!/bin/sh\ntrue\n", work_dir="/tmp")
        ids = [await ctl.propose(c.SubmitJob(script, "u", 1, 1, "u", 1.0)) for _ in range(3)]
        for job_id, node in zip(ids, ("n1", "n1", "n2"), strict=True):
            await ctl.propose(c.StartJob(job_id, [NodeAllocation(node, 1)], 1.0, ctl.raft.term))
            await ctl.propose(c.JobLaunched(job_id, ctl.raft.term))
        ran, ignored, elsewhere = ids
        watch = ctl.launch_watch
        for now in (0.0, 45.0, 90.0):
            beat = pb.HeartbeatRequest(name="n1", running_job_ids=[ran] if now < 90 else [])
            if now == 90.0:
                beat.unreported_job_ids.append(ran)  # it ended; the report is on its way
            assert await watch.heartbeat(ctl, beat, now) == []
        assert await watch.heartbeat(ctl, pb.HeartbeatRequest(name="n1", running_job_ids=[ran]), 90.5) == [
            ignored
        ]
        nursery.cancel_scope.cancel()
    record = ctl.state.jobs[ignored]
    assert record.state is JobState.PENDING and record.reason == "launch failed requeued"
    assert ctl.state.jobs[ran].state is JobState.RUNNING
    assert ctl.state.jobs[elsewhere].state is JobState.RUNNING  # n2's heartbeats speak for it


async def test_a_heartbeat_is_answered_at_once_unless_it_shows_a_lost_job_or_a_node_coming_back(
    tmp_path, mock_clock
):
    """``Heartbeat_now`` (answered by the connection's reader) records what ``Heartbeat`` records for
    a quiet node, and leaves to ``Heartbeat`` a beat that loses a job, a node DOWN for not
    responding, and every beat before this controller is a ready leader."""
    from spur.controller.service import ControllerService
    from spur.rpc.proto import spur_pb2 as pb
    from spur.rpc.server import CallContext

    cfg = parse_config_text(
        "[controller]\nnode_timeout_secs = 90\nheartbeat_interval_secs = 20\n",
        overrides={"controller.state_dir": str(tmp_path)},
    )
    ctl = Controller(cfg, listen=("127.0.0.1", 0))
    service = ControllerService(ctl)
    ctx = CallContext("/spur.v1.Controller/Heartbeat", {}, "127.0.0.1:1", None)
    async with trio.open_nursery() as nursery:
        await nursery.start(ctl.raft.run)
        for name in ("n1", "idle"):
            await ctl.propose(
                c.RegisterNode(Node(name=name, address="127.0.0.1", cpus=2, memory_mb=1000), 0.0)
            )
        job_id = await ctl.propose(
            c.SubmitJob(JobSpec(script="#!/bin/sh\ntrue\n", work_dir="/tmp"), "u", 1, 1, "u", 1.0)
        )
        await ctl.propose(c.StartJob(job_id, [NodeAllocation("n1", 1)], 1.0, ctl.raft.term))
        await ctl.propose(c.JobLaunched(job_id, ctl.raft.term))
        assert service.Heartbeat_now(pb.HeartbeatRequest(name="idle"), ctx) is None  # not ready yet
        ctl._leader_ready.set()  # what the leader duties set once the configuration is proposed

        answer = service.Heartbeat_now(pb.HeartbeatRequest(name="idle"), ctx)
        assert answer == pb.HeartbeatResponse(known=True, heartbeat_interval_secs=20)
        assert ctl.last_seen["idle"] == trio.current_time()
        assert service.Heartbeat_now(pb.HeartbeatRequest(name="nobody"), ctx) == pb.HeartbeatResponse(
            known=False
        )

        # n1 stops mentioning its job: quiet beats until the grace has passed, then the async path.
        began = trio.current_time()
        assert service.Heartbeat_now(pb.HeartbeatRequest(name="n1"), ctx) is not None
        assert ctl.launch_watch.missing["n1"] == {job_id: began}
        mock_clock.jump(90.5)
        assert service.Heartbeat_now(pb.HeartbeatRequest(name="n1"), ctx) is None
        assert ctl.launch_watch.missing["n1"] == {job_id: began}  # nothing recorded: Heartbeat decides
        assert ctl.state.jobs[job_id].state is JobState.RUNNING
        answer = await service.Heartbeat(pb.HeartbeatRequest(name="n1"), ctx)
        assert answer.known
        assert ctl.state.jobs[job_id].state is JobState.PENDING  # requeued by the async path

        await ctl.propose(c.NodeLost(["idle"], "Not responding", 0.0))
        assert service.Heartbeat_now(pb.HeartbeatRequest(name="idle"), ctx) is None
        await service.Heartbeat(pb.HeartbeatRequest(name="idle"), ctx)
        assert not ctl.state.nodes["idle"].down  # NodeReturned, proposed by the async path
        assert service.Heartbeat_now(pb.HeartbeatRequest(name="idle"), ctx) is not None
        nursery.cancel_scope.cancel()


async def test_the_dispatcher_acts_on_each_change_and_sweeps_every_job_once_a_second(
    mock_clock: MockClock,
) -> None:
    """A change wakes the dispatcher for the jobs it touched at once; with no change at all it still
    looks at every job once a second (what a failed call left undone is tried again)."""

    class _Auth:
        def daemon_metadata(self) -> dict[str, str]:
            return {}

    class _Ctl:
        auth = _Auth()
        client_tls = None

        def __init__(self) -> None:
            self.changed = trio.Event()

        async def wait_change(self) -> None:
            await self.changed.wait()

        def change(self) -> None:
            self.changed.set()
            self.changed = trio.Event()

    ctl = _Ctl()
    dispatcher = Dispatcher(ctl)  # type: ignore[arg-type]
    calls: list[tuple[float, bool]] = []
    dispatcher._spawn_work = lambda pool, nursery, *, full=True: calls.append(  # type: ignore[method-assign]
        (trio.current_time(), full)
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(dispatcher.run)
        await trio.testing.wait_all_tasks_blocked()
        start = trio.current_time()
        assert sorted(calls) == [(start, False), (start, True)]  # the first look, and the first sweep
        calls.clear()
        mock_clock.jump(0.3)
        ctl.change()
        await trio.testing.wait_all_tasks_blocked()
        assert calls == [(pytest.approx(start + 0.3), False)]  # at once, for the change
        calls.clear()
        for second in (1, 2, 3):  # nothing changes: a sweep each second, and nothing else
            mock_clock.jump(1.0 if second > 1 else 0.7)
            await trio.testing.wait_all_tasks_blocked()
            assert calls == [(pytest.approx(start + second), True)]
            calls.clear()
        nursery.cancel_scope.cancel()
