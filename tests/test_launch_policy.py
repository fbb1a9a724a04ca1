"""An unacknowledged launch is retried with backoff, then requeued (or failed): never left RUNNING."""

from __future__ import annotations

import pytest
import trio
from trio.testing import MockClock

from spur.config import parse_config_text
from spur.controller.app import Controller
from spur.controller.duties import LAUNCH_POLICY, Dispatcher
from spur.controller.launch_policy import Fail, LaunchPolicy, Requeue, Retry, next_step
from spur.controller.pool import agent_pool
from spur.core.job import JobSpec, JobState, Node, NodeAllocation
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
    # the retries waited out the backoff (0.5 s + 1 s) on the mock clock, not in real time
    assert waited >= LAUNCH_POLICY.delay(1) + LAUNCH_POLICY.delay(2)


async def test_dispatcher_fails_a_no_requeue_job_it_could_not_launch(tmp_path, mock_clock):
    ctl, job, _waited = await launch_on_dead_node(tmp_path, no_requeue=True)
    record = ctl.state.jobs[job]
    assert record.state is JobState.FAILED
    assert "launch not acknowledged by n1 after 3 attempts" in record.reason
