"""Controller.WatchJob: every change reaches the watcher, including one applied while the stream was
suspended at a yield (the consumer not yet asking for the next message), and the job's end is sent
even when the job ended during that suspension (found by srun waiting forever for a reason that had
been applied while its first message was being sent)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import trio

from spur.controller.service import ControllerService
from spur.core.job import Job, JobSpec, JobState
from spur.rpc.proto import spur_pb2 as pb


class _Ctl:
    """The part of the controller WatchJob reads: its state and the change signalling of app.py."""

    def __init__(self, job: Job) -> None:
        self.state = SimpleNamespace(jobs={job.job_id: job})
        self._changed = trio.Event()

    def applied(self) -> None:  # what an applied log entry does (Controller._signal_change)
        self._changed.set()
        self._changed = trio.Event()

    def change_event(self) -> trio.Event:
        return self._changed

    async def wait_change(self) -> None:
        await self._changed.wait()


async def test_a_change_applied_during_the_yield_is_not_lost() -> None:
    job = Job(job_id=7, spec=JobSpec(name="w"), user="alice", partition="debug", submit_time=1.0)
    ctl = _Ctl(job)
    service = ControllerService(ctl)  # type: ignore[arg-type]  # the fake has what WatchJob reads
    context: Any = SimpleNamespace(metadata={}, identity=None)
    updates = service.WatchJob(pb.GetJobsRequest(job_ids=[7]), context)
    first = await updates.__anext__()
    assert (first.state, first.reason) == ("PENDING", "None")
    # The scheduler's reason is applied while the server is still sending the first message.
    job.reason = "Resources"
    ctl.applied()
    with trio.fail_after(5):
        second = await updates.__anext__()
    assert (second.state, second.reason) == ("PENDING", "Resources")
    job.state = JobState.CANCELLED  # the job ends while the server is suspended after sending
    ctl.applied()
    with trio.fail_after(5):
        last = await updates.__anext__()
    assert last.state == "CANCELLED"
    await updates.aclose()
