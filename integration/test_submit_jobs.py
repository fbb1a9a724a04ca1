"""SubmitJobs (spur.batch.v1.ControllerBatch): many submissions in one call against real spurctld/spurd.

Each item is served as its own SubmitJob: accepted ones get increasing ids in the request's order, for
the authenticated caller; an item that does not parse or that the state refuses fails alone; the
immediate grant of each item sees the earlier items of the same call in flight; a call past the bound
is refused whole and creates nothing; a follower forwards the call to the leader.
"""

from __future__ import annotations

import getpass
from pathlib import Path
from typing import Any

import pytest
import trio

from integration.ha_harness import HACluster
from integration.harness import Cluster
from spur.controller.batch_service import MAX_SUBMISSIONS
from spur.rpc.batching import CONTROLLER_BATCH
from spur.rpc.proto import batch_pb2
from spur.rpc.proto import spur_pb2 as pb
from spur.rpc.status import RpcError, StatusCode

pytestmark = pytest.mark.integration


def _submit_jobs(address: str, submissions: list[bytes], tls: Any = None) -> batch_pb2.BatchOutcomes:
    from spur.auth.identity import identity_metadata
    from spur.rpc.channel import open_channel
    from spur.rpc.stub import Stub

    md = identity_metadata()

    async def run() -> batch_pb2.BatchOutcomes:
        async with open_channel(address, metadata_provider=lambda: md, tls=tls) as ch:
            request = batch_pb2.SubmitJobsRequest(submissions=submissions)
            return await Stub(ch, CONTROLLER_BATCH).SubmitJobs(request, timeout=30)

    return trio.run(run)


def _item(tmp: Path, name: str, **kw: Any) -> bytes:
    spec = pb.JobSpec(name=name, script="#!/bin/sh\nsleep 30\n", work_dir=str(tmp), **kw)
    return pb.SubmitJobRequest(spec=spec).SerializeToString()


def _cancel(c: Cluster, *job_ids: int) -> None:
    for job_id in job_ids:
        c.cli("scancel", str(job_id))
    for job_id in job_ids:
        c.wait_job(job_id, "CANCELLED")


def test_each_item_is_served_as_its_own_submission_in_request_order(
    one_node: Cluster, tmp_path: Path
) -> None:
    items = [
        _item(tmp_path, "first", hold=True),
        b"\xff\xff not a message",
        _item(tmp_path, "second", hold=True),
        _item(tmp_path, "elsewhere", hold=True, partition="no-such-partition"),
        _item(tmp_path, "third", hold=True),
    ]
    answer = _submit_jobs(one_node.address, items)
    codes = [StatusCode(o.code) for o in answer.outcomes]
    assert codes == [StatusCode.OK, StatusCode.INVALID_ARGUMENT, StatusCode.OK, codes[3], StatusCode.OK]
    assert codes[3] is not StatusCode.OK and "no-such-partition" in answer.outcomes[3].message
    assert "submission 1" in answer.outcomes[1].message
    ids = [answer.outcomes[i].job_id for i in (0, 2, 4)]
    assert ids == sorted(ids) and len(set(ids)) == 3
    assert answer.outcomes[1].job_id == answer.outcomes[3].job_id == 0
    jobs = one_node.jobs(*ids)
    assert [jobs[i].spec.name for i in ids] == ["first", "second", "third"]
    assert all(jobs[i].user == getpass.getuser() for i in ids)  # the caller, as SubmitJob does
    assert all(jobs[i].state == "PENDING" and jobs[i].reason == "JobHeldUser" for i in ids)
    _cancel(one_node, *ids)


def test_each_grant_sees_the_earlier_items_of_the_call(one_node: Cluster, tmp_path: Path) -> None:
    """Two 1-CPU jobs fill the 2-CPU node from their own submit entries; the third of the same call
    finds no CPU left and pends for the scheduler, as three separate submissions would."""
    one_node.wait_nodes("node1")
    answer = _submit_jobs(one_node.address, [_item(tmp_path, f"j{i}", num_tasks=1) for i in range(3)])
    assert [o.code for o in answer.outcomes] == [0, 0, 0]
    ids = [o.job_id for o in answer.outcomes]
    jobs = one_node.jobs(*ids)
    for job_id in ids[:2]:
        assert jobs[job_id].state == "RUNNING" and jobs[job_id].start_time == jobs[job_id].submit_time
    assert jobs[ids[2]].state == "PENDING"  # reason None until the scheduler's pass looks at it
    _cancel(one_node, *ids)


def test_a_call_past_the_bound_is_refused_whole(one_node: Cluster, tmp_path: Path) -> None:
    before = len(one_node.call("GetJobs", pb.GetJobsRequest(include_finished=True)).jobs)
    items = [_item(tmp_path, "many", hold=True)] * (MAX_SUBMISSIONS + 1)
    with pytest.raises(RpcError) as refused:
        _submit_jobs(one_node.address, items)
    assert refused.value.code is StatusCode.INVALID_ARGUMENT
    assert f"at most {MAX_SUBMISSIONS} per call" in refused.value.message
    assert len(one_node.call("GetJobs", pb.GetJobsRequest(include_finished=True)).jobs) == before


def test_a_follower_forwards_the_call_to_the_leader(tmp_path: Path) -> None:
    ha = HACluster(tmp_path, size=3)
    ha.start()
    try:
        leader = ha.wait_leader()
        follower = next(i for i in (1, 2, 3) if i != leader)
        answer = _submit_jobs(
            ha.member(follower).address, [_item(tmp_path, f"f{i}", hold=True) for i in range(3)], tls=ha.tls
        )
        assert [o.code for o in answer.outcomes] == [0, 0, 0]
        ids = [o.job_id for o in answer.outcomes]
        jobs = {j.job_id: j for j in ha.call("GetJobs", pb.GetJobsRequest(job_ids=ids)).jobs}
        assert [jobs[i].spec.name for i in ids] == ["f0", "f1", "f2"]
    finally:
        ha.stop()
