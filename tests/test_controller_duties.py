"""Leader duties driven in-process against a real Raft log: scheduling passes and the node-health sweep.

The health sweep's 90 s timeout is exercised with Trio's MockClock, not by waiting.
"""

from __future__ import annotations

import pytest
import trio
from trio.testing import MockClock

from spur.config import parse_config_text
from spur.controller.app import Controller
from spur.controller.duties import HealthSweep, SchedulerLoop
from spur.core.job import JobSpec, JobState, Node
from spur.state import commands as c


@pytest.fixture
def mock_clock() -> MockClock:
    """Autojumps only after 50 ms of real idleness, so WAL fsyncs in worker threads don't move time."""
    return MockClock(autojump_threshold=0.05)


def make_controller(tmp_path, conf: str = "") -> Controller:
    cfg = parse_config_text(conf, overrides={"controller.state_dir": str(tmp_path / "state")})
    return Controller(cfg, listen=("127.0.0.1", 0))


def batch(**kw) -> JobSpec:
    return JobSpec(script="#!/bin/sh\ntrue\n", work_dir="/tmp", **kw)


async def register(ctl: Controller, name: str, cpus: int) -> None:
    await ctl.propose(c.RegisterNode(Node(name=name, address="127.0.0.1", cpus=cpus, memory_mb=1000), 0.0))
    ctl.last_seen[name] = trio.current_time()


async def test_scheduler_cycle_starts_what_fits_and_explains_the_rest(tmp_path):
    ctl = make_controller(tmp_path)
    from spur.plugins import load_plugin_manager

    ctl.plugin_manager = load_plugin_manager("scheduler", "backfill")
    async with trio.open_nursery() as nursery:
        await nursery.start(ctl.raft.run)
        await register(ctl, "n1", cpus=2)
        ids = [await ctl.propose(c.SubmitJob(batch(), "u", 1, 1, "u", 1.0)) for _ in range(3)]
        started = await SchedulerLoop(ctl).cycle()
        assert started == 2
        states = [ctl.state.jobs[i].state for i in ids]
        assert states == [JobState.RUNNING, JobState.RUNNING, JobState.PENDING]
        assert ctl.state.jobs[ids[2]].reason == "Resources"
        assert ctl.state.node_state("n1") == "allocated"
        # a second pass with nothing free starts nothing and writes no new reasons
        before = ctl.raft.commit_index
        assert await SchedulerLoop(ctl).cycle() == 0
        assert ctl.raft.commit_index == before
        nursery.cancel_scope.cancel()


async def test_silent_node_goes_down_after_timeout_and_fails_its_jobs(tmp_path, mock_clock):
    ctl = make_controller(tmp_path, "[controller]\nnode_timeout_secs = 90\n")
    async with trio.open_nursery() as nursery:
        await nursery.start(ctl.raft.run)
        await register(ctl, "quiet", cpus=1)
        await register(ctl, "chatty", cpus=1)
        job = await ctl.propose(c.SubmitJob(batch(), "u", 1, 1, "u", 1.0))
        from spur.core.job import NodeAllocation

        await ctl.propose(c.StartJob(job, [NodeAllocation("quiet", 1)], 1.0, 1))
        await nursery.start(HealthSweep(ctl).run)

        async def heartbeats() -> None:
            while True:
                ctl.last_seen["chatty"] = trio.current_time()
                await trio.sleep(30)

        nursery.start_soon(heartbeats)
        start = trio.current_time()
        await trio.sleep(80)
        assert ctl.state.node_state("quiet") != "down"
        while ctl.state.node_state("quiet") != "down":
            await trio.sleep(1)
        elapsed = trio.current_time() - start
        assert 90 <= elapsed <= 90 + 15 + 1  # timeout plus at most one sweep period
        assert ctl.state.nodes["quiet"].reason == "Not responding"
        assert ctl.state.jobs[job].state is JobState.NODE_FAIL
        await trio.sleep(600)
        assert ctl.state.node_state("chatty") == "idle"
        nursery.cancel_scope.cancel()
