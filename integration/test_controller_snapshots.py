"""A real spurctld taking Raft snapshots in a forked child (spur.raft.forked): the snapshots are saved,
no child is left behind, and a restarted controller comes back with every job from them."""

from __future__ import annotations

import re
import signal
import subprocess
from pathlib import Path

from integration.harness import Cluster, wait_for


def _children(pid: int) -> list[str]:
    out = subprocess.run(["ps", "-o", "pid=,stat=", "--ppid", str(pid)], capture_output=True, text=True)
    return out.stdout.split("\n") if out.stdout.strip() else []


def test_forked_snapshots_are_saved_and_restored(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, controller_extra="snapshot_every = 5\n")
    cluster.start_controller()
    try:
        ids = [
            cluster.submit_spec(name=f"snap{i}", script="#!/bin/sh\ntrue\n", cpus_per_task=1) for i in range(30)
        ]
        ctl = cluster.controller
        assert ctl is not None
        wait_for(lambda: "snapshot at index" in ctl.log() and "saved" in ctl.log(), timeout=20, what="a snapshot")
        assert "failed" not in ctl.log(), ctl.log()
        # Every snapshot child has exited and was reaped (no zombie under the controller).
        wait_for(lambda: not _children(ctl.popen.pid), timeout=10, what="snapshot children to be reaped")

        ctl.kill(signal.SIGTERM)
        restarted = cluster.start_controller()  # same state_dir: the newest snapshot, then the log after it
        assert re.search(r"recovered: term \d+, snapshot at [1-9]", restarted.log()), restarted.log()
        jobs = cluster.jobs(*ids)
        assert sorted(jobs) == ids
        assert {j.spec.name for j in jobs.values()} == {f"snap{i}" for i in range(30)}
        assert all(j.state == "PENDING" for j in jobs.values())
        # A job submitted after the restart gets the next id: next_job_id came back with the snapshot.
        assert cluster.submit_spec(name="after", script="#!/bin/sh\ntrue\n") == max(ids) + 1
    finally:
        cluster.stop()
