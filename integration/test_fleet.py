"""A real spurctld driving a simulated fleet of 200 nodes (integration/fleet.py) over the agent protocol."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import trio

from integration.fleet import Fleet, FleetConfig
from integration.harness import Cluster
from spur.rpc.proto import spur_pb2 as pb

pytestmark = pytest.mark.integration

NODES = 200
HEARTBEAT = 1.0
NODE_TIMEOUT = 5


class FleetCluster(Cluster):
    """The harness controller with heartbeat timers sized for a 200-node fleet on a small machine."""

    def write_conf(self) -> Path:
        conf = self.root / "spur.conf"
        conf.write_text(
            'cluster_name = "fleet"\n'
            "[controller]\n"
            f'state_dir = "{self.root / "ctl"}"\n'
            f"heartbeat_interval_secs = {int(HEARTBEAT)}\n"
            f"node_timeout_secs = {NODE_TIMEOUT}\n"
            "kill_grace_secs = 1\n"
            "[scheduler]\n"
            "interval_secs = 0.5\n"
        )
        return conf


@pytest.fixture
def controller(tmp_path: Path):
    c = FleetCluster(tmp_path)
    c.start_controller()
    try:
        yield c
    finally:
        c.stop()


def _runtime(rng: random.Random, job: pb.JobInfo) -> float:
    return 3600.0 if job.spec.name == "long" else rng.uniform(0.05, 0.5)


async def _wait_until(predicate, timeout: float, what: str, poll: float = 0.2):
    """Poll an async condition until it holds; fail naming ``what`` after ``timeout`` seconds."""
    last = None
    with trio.move_on_after(timeout):
        while True:
            last = await predicate()
            if last:
                return last
            await trio.sleep(poll)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}; last value {last!r}")


async def test_fleet_of_200_nodes_runs_jobs_and_stays_up(controller: FleetCluster) -> None:
    cfg = FleetConfig(
        controller=controller.address, nodes=NODES, cpus=4, heartbeat_secs=HEARTBEAT, runtime=_runtime
    )
    fleet = Fleet(cfg)
    with trio.fail_after(55):
        async with trio.open_nursery() as nursery:
            await nursery.start(fleet.run)

            nodes = (await fleet.call("GetNodes", pb.GetNodesRequest())).nodes
            assert len(nodes) == NODES
            assert {n.port for n in nodes} == {fleet.port}

            ids = []
            for i in range(60):
                spec = pb.JobSpec(name=f"j{i}", script="#!/bin/sh\ntrue\n", work_dir="/tmp", cpus_per_task=2)
                ids.append((await fleet.call("SubmitJob", pb.SubmitJobRequest(spec=spec))).job_id)
            long_spec = pb.JobSpec(name="long", script="#!/bin/sh\nsleep 1h\n", work_dir="/tmp")
            long_id = (await fleet.call("SubmitJob", pb.SubmitJobRequest(spec=long_spec))).job_id

            async def states() -> dict[int, str]:
                resp = await fleet.call("GetJobs", pb.GetJobsRequest(job_ids=ids + [long_id]))
                return {j.job_id: j.state for j in resp.jobs}

            async def all_done() -> bool:
                s = await states()
                return all(s.get(i) == "COMPLETED" for i in ids) and s.get(long_id) == "RUNNING"

            await _wait_until(all_done, 30, "60 short jobs COMPLETED and the long one RUNNING")
            await _wait_until(lambda: _true(bool(fleet.jobs_of(long_id))), 10, "the long job launched")

            await fleet.call("CancelJob", pb.CancelJobRequest(job_id=long_id))

            async def long_cancelled() -> bool:
                return (await states()).get(long_id) == "CANCELLED"

            await _wait_until(long_cancelled, 15, "the long job CANCELLED via SignalJob")
            assert fleet.stats.cancelled == 1

            # Let more than node_timeout pass with every node beating; none may be declared DOWN.
            rounds = NODE_TIMEOUT + 2
            await _wait_until(
                lambda: _true(fleet.stats.heartbeats >= rounds * NODES),
                2 * rounds,
                f"{rounds} heartbeat rounds",
            )
            nodes = (await fleet.call("GetNodes", pb.GetNodesRequest())).nodes
            down = [n.name for n in nodes if "down" in n.state.lower()]
            assert down == [], f"nodes falsely DOWN: {down}"
            assert fleet.stats.heartbeat_failures == 0
            assert fleet.stats.report_failures == 0
            assert fleet.stats.completed == len(ids)
            nursery.cancel_scope.cancel()


async def _true(value: bool) -> bool:
    return value
