"""Listing pending jobs (``squeue -t PD``, GetJobs with a PENDING filter) is answered from the
scheduler's pending index rather than a scan of every job held; it must list exactly what a full
listing filtered to PENDING shows, whatever made each job pending or stop pending."""

from __future__ import annotations

from pathlib import Path

from integration.harness import Cluster, wait_for
from spur.rpc.proto import spur_pb2 as pb


def _ids(cluster: Cluster, states: list[str]) -> list[int]:
    return [j.job_id for j in cluster.call("GetJobs", pb.GetJobsRequest(states=states)).jobs]


def test_pending_listing_matches_the_full_listing(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path)
    cluster.start_controller()
    try:
        cluster.start_agent("n1", cpus=1)
        cluster.wait_nodes("n1")
        sleeper = "#!/bin/sh\nsleep 30\n"
        running = cluster.submit_spec(name="run", script=sleeper)
        cluster.wait_job(running, "RUNNING")
        quick = cluster.submit_spec(name="quick", script="#!/bin/sh\ntrue\n")  # waits behind `running`
        waiting = [cluster.submit_spec(name=f"wait{i}", script=sleeper) for i in range(3)]
        held = cluster.submit_spec(name="held", script=sleeper, hold=True)
        array = cluster.submit_spec(name="arr", script=sleeper, array="1-4%1")
        cancelled = cluster.submit_spec(name="gone", script=sleeper)
        cluster.call("CancelJob", pb.CancelJobRequest(job_id=cancelled))

        def full_pending() -> list[int]:
            everything = cluster.call("GetJobs", pb.GetJobsRequest(include_finished=True)).jobs
            return sorted(j.job_id for j in everything if j.state == "PENDING")

        expected = full_pending()
        assert {quick, *waiting, held} <= set(expected) and cancelled not in expected and running not in expected
        assert len(expected) > len({quick, *waiting, held})  # and the array's pending tasks
        for states in (["PENDING"], ["PD"], ["pd", "PENDING"]):
            assert sorted(_ids(cluster, states)) == expected, states

        # A job leaving PENDING leaves the listing: cancel one, release the held one.
        cluster.call("CancelJob", pb.CancelJobRequest(job_id=waiting[0]))
        cluster.call("UpdateJob", pb.UpdateJobRequest(job_id=held, action="release"))
        wait_for(lambda: sorted(_ids(cluster, ["PD"])) == full_pending(), timeout=10, what="listings to agree")
        assert waiting[0] not in _ids(cluster, ["PD"])
        # squeue -t PD prints the lines a full squeue prints for pending jobs, array compaction included.
        pd_lines = cluster.cli("squeue", "-h", "-t", "PD", "-o", "%i").stdout.split()
        every = cluster.cli("squeue", "-h", "-t", "all", "-o", "%i %T").stdout.splitlines()
        assert pd_lines == [line.split()[0] for line in every if line.split()[1] == "PENDING"]
        assert any(line.startswith(f"{array}_") for line in pd_lines)
    finally:
        cluster.stop()
