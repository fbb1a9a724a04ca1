"""A leader change in the middle of batched proposals loses no acknowledged submission.

Many concurrent clients keep several submissions in each Raft entry (spur/controller/batching.py); the
leader is killed while they stream. Every submission a client saw acknowledged must exist, once, with
its own name, on the new leader. (Loopback only: integration/test_ha.py owns the netns scenarios.)
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from integration.ha_harness import HACluster, workload
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
