"""What a batch launch records once the agent acknowledged it (``spur.controller.launch_batch``).

The acknowledged jobs' ``JobLaunched`` commands leave in one proposal; a command the leader refuses
is logged and skips only its own job; a time limit changed while the launch was in flight is sent
after it; every job's busy mark is gone at the end, whatever happened.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import pytest
import trio

from spur.controller import launch_batch
from spur.rpc.status import RpcError, StatusCode
from spur.state import commands as c


@dataclass
class _Job:
    time_limit_secs: int


@dataclass
class _State:
    jobs: dict[int, _Job]


@dataclass
class _Ctl:
    state: _State
    refuse: set[int] = field(default_factory=set)
    proposals: list[list[Any]] = field(default_factory=list)

    async def propose_many(self, cmds: list[Any]) -> list[Any]:
        self.proposals.append(cmds)
        await trio.lowlevel.checkpoint()
        return [
            RpcError(StatusCode.FAILED_PRECONDITION, "refused") if cmd.job_id in self.refuse else True
            for cmd in cmds
        ]


@dataclass
class _Dispatcher:
    ctl: _Ctl
    _busy: set[tuple[int, str]]
    limits_sent: list[int] = field(default_factory=list)

    async def _launch(self, pool: Any, job_id: int) -> None:
        raise AssertionError("the single path is not for acknowledged launches")

    async def _send_time_limit(self, pool: Any, job: _Job) -> None:
        self.limits_sent.append(job.time_limit_secs)


def _dispatcher(jobs: dict[int, _Job], refuse: set[int] = frozenset()) -> _Dispatcher:
    return _Dispatcher(_Ctl(_State(jobs), set(refuse)), {(job_id, "launch") for job_id in jobs})


async def test_acknowledged_launches_share_one_proposal() -> None:
    d = _dispatcher({1: _Job(60), 2: _Job(60), 3: _Job(60)})
    await launch_batch._launched(d, None, [(1, 7, 60), (2, 7, 60), (3, 8, 60)])  # type: ignore[arg-type]
    assert d.ctl.proposals == [[c.JobLaunched(1, 7), c.JobLaunched(2, 7), c.JobLaunched(3, 8)]]
    assert d._busy == set()
    assert d.limits_sent == []


async def test_a_limit_changed_in_flight_is_sent_and_a_refusal_skips_its_job(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="spur.controller.launch_batch")
    # job 1's limit changed while its launch was in flight; job 2's too, but its JobLaunched was refused
    d = _dispatcher({1: _Job(120), 2: _Job(300), 3: _Job(60)}, refuse={2})
    await launch_batch._launched(d, None, [(1, 1, 60), (2, 1, 60), (3, 1, 60)])  # type: ignore[arg-type]
    assert d.limits_sent == [120]
    assert "JobLaunched of job 2 not applied" in caplog.text
    assert d._busy == set()


async def test_busy_marks_are_discarded_when_cancelled() -> None:
    d = _dispatcher({1: _Job(60), 2: _Job(60)})
    with trio.move_on_after(0) as scope:
        await launch_batch._launched(d, None, [(1, 1, 60), (2, 1, 60)])  # type: ignore[arg-type]
    assert scope.cancelled_caught
    assert d._busy == set()
