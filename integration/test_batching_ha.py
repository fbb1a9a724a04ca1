"""A leader change in the middle of batched proposals loses no acknowledged submission.

Many concurrent clients keep several submissions in each Raft entry (spur/controller/batching.py); the
leader is killed while they stream. Every submission a client saw acknowledged must exist, once, with
its own name, on the new leader. (Loopback only: integration/test_ha.py owns the netns scenarios.)
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import trio

from integration.ha_harness import HACluster, workload
from integration.harness import wait_for
from spur.rpc.proto import spur_pb2 as pb

pytestmark = pytest.mark.integration


def test_no_acknowledged_submission_lost_when_the_leader_dies_mid_batch(tmp_path: Path) -> None:
    ha = HACluster(tmp_path, size=3)
    ha.start()
    try:
        first = ha.wait_leader()

        def kill_leader() -> None:
            ha.kill(first)

        def spec(tag: str) -> pb.JobSpec:
            return pb.JobSpec(name=tag, script="#!/bin/sh\ntrue\n", work_dir=str(tmp_path), hold=True)

        async def main():
            return await workload(
                ha.addresses, total=300, spec=spec, clients=24, readers=0, milestones=[(80, kill_leader)]
            )

        history = trio.run(main)
        new = ha.wait_leader(among=[i for i in (1, 2, 3) if i != first])
        assert new != first
        jobs = ha.call("GetJobs", pb.GetJobsRequest(include_finished=True)).jobs
        by_id = {j.job_id: j for j in jobs}
        acked = history.acked()
        assert len({s.tag for s in acked}) == 300  # every logical submission acknowledged in the end
        for s in acked:
            assert s.job_id in by_id, f"acknowledged job {s.job_id} ({s.tag}) lost"
            assert by_id[s.job_id].spec.name == s.tag
        assert len(by_id) == len({j.job_id for j in jobs})
    finally:
        ha.stop()


def test_a_follower_forwards_a_call_of_job_reports_whole_to_the_leader(tmp_path: Path) -> None:
    """``ReportJobStatuses`` sent to a follower reaches the leader as one call: every report gets the
    outcome the leader gave it (an item that does not parse fails alone) and the job ends there."""
    from spur.rpc.batching import CONTROLLER_BATCH
    from spur.rpc.channel import open_channel
    from spur.rpc.proto import batch_pb2
    from spur.rpc.status import StatusCode
    from spur.rpc.stub import Stub

    ha = HACluster(tmp_path, size=3)
    ha.start()
    try:
        leader = ha.wait_leader()
        follower = next(i for i in (1, 2, 3) if i != leader)
        ha.start_agent("node1", cpus=2)
        ha.wait_nodes("node1")
        spec = pb.JobSpec(name="long", script="#!/bin/sh\nsleep 300\n", work_dir=str(tmp_path))
        job_id = ha.call("SubmitJob", pb.SubmitJobRequest(spec=spec)).job_id

        def job() -> pb.JobInfo:
            [info] = ha.call("GetJobs", pb.GetJobsRequest(job_ids=[job_id], include_finished=True)).jobs
            return info

        wait_for(lambda: job().state == "RUNNING", timeout=30, what=f"job {job_id} to run")
        report = pb.JobStatusReport(job_id=job_id, node="node1", exit_code=3, end_time=time.time())
        request = batch_pb2.JobStatusReports(reports=[report.SerializeToString(), b"\xff\xff\xff"])

        async def send() -> batch_pb2.BatchOutcomes:
            async with open_channel(ha.member(follower).address, connect_timeout=2.0) as ch:
                return await Stub(ch, CONTROLLER_BATCH).ReportJobStatuses(request, timeout=10)

        out = trio.run(send)
        assert [o.code for o in out.outcomes] == [0, StatusCode.INVALID_ARGUMENT.value]
        assert out.outcomes[1].message.startswith("item 1 does not parse")
        wait_for(lambda: job().state == "FAILED", timeout=10, what=f"job {job_id} to end FAILED")
        assert job().exit_code == 3
    finally:
        ha.stop()
