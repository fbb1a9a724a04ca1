"""Batched paths keep per-job semantics on a simulated fleet (real spurctld, real agent protocol).

Bursts of jobs go out in ``LaunchJobs`` calls (several jobs per agent call) and come back in
``ReportJobStatuses`` calls, their state changes in shared Raft entries; each job must still see its
own dependency order, array throttle, time limit and cancellation.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import trio

from integration.fleet import Fleet, FleetConfig
from integration.test_fleet import FleetCluster, _wait_until
from spur.rpc.proto import spur_pb2 as pb

pytestmark = pytest.mark.integration

TERMINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL"}


@pytest.fixture
def controller(tmp_path: Path):
    c = FleetCluster(tmp_path)
    c.start_controller()
    try:
        yield c
    finally:
        c.stop()


def _runtime(rng: random.Random, job: pb.JobInfo) -> float:
    return 3600.0 if job.spec.name in ("limited", "victim") else rng.uniform(0.1, 0.3)


def _max_overlap(spans: list[tuple[float, float]]) -> int:
    events = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
    best = now = 0
    for _, step in events:
        now += step
        best = max(best, now)
    return best


async def test_batched_launches_and_reports_keep_per_job_semantics(controller: FleetCluster) -> None:
    fleet = Fleet(
        FleetConfig(controller=controller.address, nodes=20, cpus=4, heartbeat_secs=1.0, runtime=_runtime)
    )
    with trio.fail_after(90):
        async with trio.open_nursery() as nursery:
            await nursery.start(fleet.run)

            async def submit(**kw) -> int:
                spec = pb.JobSpec(script="#!/bin/sh\ntrue\n", work_dir="/tmp", **kw)
                return (await fleet.call("SubmitJob", pb.SubmitJobRequest(spec=spec))).job_id

            burst: list[int] = []
            victims: list[int] = []

            async def burst_one(i: int) -> None:
                burst.append(await submit(name=f"b{i}"))

            async def victim() -> None:
                job_id = await submit(name="victim")
                victims.append(job_id)
                await fleet.call("CancelJob", pb.CancelJobRequest(job_id=job_id))  # races its launch

            async with trio.open_nursery() as inner:
                for i in range(80):
                    inner.start_soon(burst_one, i)
                for _ in range(10):
                    inner.start_soon(victim)
            first = await submit(name="first")
            second = await submit(name="second", dependency=f"afterok:{first}")
            third = await submit(name="third", dependency=f"afterany:{second}")
            array = await submit(name="arr", array="1-12%2")
            limited = await submit(name="limited", time_limit_secs=2)

            async def everything() -> dict[int, pb.JobInfo]:
                resp = await fleet.call("GetJobs", pb.GetJobsRequest(include_finished=True))
                return {j.job_id: j for j in resp.jobs}

            async def all_ended() -> bool:
                jobs = await everything()
                return bool(jobs) and all(j.state in TERMINAL for j in jobs.values())

            await _wait_until(all_ended, 60, "every job to end")
            jobs = await everything()

            assert all(jobs[i].state == "COMPLETED" for i in burst)
            assert fleet.stats.launch_batches > 0, "no LaunchJobs call reached the fleet"
            assert fleet.stats.report_batches > 0
            assert fleet.stats.duplicate_launches == 0
            assert fleet.stats.report_failures == 0
            # dependency order
            assert jobs[second].start_time >= jobs[first].end_time > 0
            assert jobs[third].start_time >= jobs[second].end_time > 0
            # array throttle %2 held throughout
            tasks = [j for j in jobs.values() if j.array_job_id == array]
            assert len(tasks) == 12 and all(t.state == "COMPLETED" for t in tasks)
            assert _max_overlap([(t.start_time, t.end_time) for t in tasks]) <= 2
            # time limit
            assert jobs[limited].state == "TIMEOUT"
            # a cancel racing the launch: cancelled, and nothing of it left running on the fleet
            assert all(jobs[v].state == "CANCELLED" for v in victims), [jobs[v].state for v in victims]
            assert all(fleet.jobs_of(v) == [] for v in victims)
            nursery.cancel_scope.cancel()
