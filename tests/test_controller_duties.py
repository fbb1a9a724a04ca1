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


# ------------------------------------------------------------------ scheduler pacing


def test_pace_delay_holds_passes_back_only_under_load() -> None:
    from spur.controller.duties import BUSY_CHANGES, BUSY_SHARE, pace_delay

    common = {"min_interval": 0.05, "interval": 1.0}
    # idle: a job ended 10 ms after a pass, nothing else going on: at once
    assert pace_delay(since_pass=0.01, changes=2, cpu=0.003, wall=0.02, **common) == 0.0
    # under load by CPU: until min_interval after the last pass
    assert pace_delay(since_pass=0.01, changes=1, cpu=BUSY_SHARE * 0.02, wall=0.02, **common) == pytest.approx(0.04)
    # under load by changes, however little CPU the controller got (a starved controller)
    assert pace_delay(since_pass=0.01, changes=BUSY_CHANGES, cpu=0.0, wall=0.02, **common) == pytest.approx(0.04)
    # past min_interval nothing is held back, loaded or not
    assert pace_delay(since_pass=0.05, changes=100, cpu=1.0, wall=1.0, **common) == 0.0
    # never beyond the interval; min_interval 0 never holds back
    assert pace_delay(since_pass=0.0, changes=100, cpu=1.0, wall=1.0, min_interval=5.0, interval=1.0) == 1.0
    assert pace_delay(since_pass=0.0, changes=100, cpu=1.0, wall=1.0, min_interval=0.0, interval=1.0) == 0.0


class _PacedLoop(SchedulerLoop):
    """A scheduler loop whose passes only record when they start; each takes 2 ms, 0.5 ms of it CPU
    (in ``cpu``, for a CPU clock that reads it)."""

    def __init__(self, host, cpu_clock, cpu: list[float]) -> None:  # noqa: ANN001 (a fake host)
        super().__init__(host, cpu_clock=cpu_clock)
        self.starts: list[float] = []
        self.cpu = cpu

    async def cycle(self) -> int:
        self.starts.append(trio.current_time())
        self.cpu[0] += 0.0005
        await trio.sleep(0.002)
        return 0


def _fake_host(min_interval: float = 0.05):  # noqa: ANN202
    from types import SimpleNamespace

    return SimpleNamespace(
        cfg=SimpleNamespace(scheduler=SimpleNamespace(interval_secs=10.0, min_interval_secs=min_interval)),
        state=SimpleNamespace(applied_index=0),
        scheduler_kick=trio.Event(),
        metrics=None,
    )


async def _kick_every(host, period: float, count: int, entries: int = 1) -> None:  # noqa: ANN001
    for _ in range(count):
        host.state.applied_index += entries
        host.scheduler_kick.set()
        await trio.sleep(period)


async def _pass_starts(cpu_clock, cpu: list[float], count: int, entries: int = 1) -> list[float]:  # noqa: ANN001
    """When each pass began (seconds after the first kick) as ``count`` kicks come 10 ms apart, each
    after ``entries`` applied log entries, with the controller's CPU read from ``cpu_clock``."""
    host = _fake_host()
    loop = _PacedLoop(host, cpu_clock, cpu)
    async with trio.open_nursery() as nursery:
        await nursery.start(loop.run)
        began = trio.current_time()
        await _kick_every(host, 0.01, count, entries)
        await trio.sleep(1.0)
        nursery.cancel_scope.cancel()
    return [t - began for t in loop.starts]


async def test_an_idle_controller_serves_each_kick_at_once(autojump_clock) -> None:
    cpu = [0.0]  # the controller spends CPU only on the passes: idle
    starts = await _pass_starts(lambda: cpu[0], cpu, 5)
    assert [round(t, 4) for t in starts] == [0.0, 0.01, 0.02, 0.03, 0.04]


async def test_a_loaded_controller_paces_passes_by_min_interval(autojump_clock) -> None:
    # Busy: the controller's CPU clock runs as fast as the wall clock between passes too.
    starts = await _pass_starts(trio.current_time, [0.0], 12)
    assert starts[0] == 0.0
    # each pass ends 2 ms after it starts; the next waits min_interval from there, kicks coalesced
    assert all(b - a >= 0.052 - 1e-9 for a, b in zip(starts, starts[1:], strict=False))
    assert len(starts) == 4  # 12 kicks over 0.11 s served by 4 passes


async def test_a_starved_controller_with_many_changes_is_paced_too(autojump_clock) -> None:
    from spur.controller.duties import BUSY_CHANGES

    cpu = [0.0]  # little CPU for the controller (a crowded machine)...
    starts = await _pass_starts(lambda: cpu[0], cpu, 12, entries=BUSY_CHANGES)  # ...but changes keep coming
    assert all(b - a >= 0.052 - 1e-9 for a, b in zip(starts, starts[1:], strict=False))
    assert len(starts) == 4
