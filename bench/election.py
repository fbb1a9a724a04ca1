"""Failover time of 3 real spurctld processes: kill -9 of the leader -> a new leader accepts a write.

Run: ``.venv/bin/python -m bench.election [--runs 7] [--size 3]``. Uses the daemon's default timing
(election timeout 1000-2000 ms, heartbeat 200 ms) and WAL fsync on, on loopback. Each run starts a fresh
group, waits for a leader, then kill -9s it while a client submits in a loop against every address
(next address on UNAVAILABLE/DEADLINE_EXCEEDED); the figure is from the kill to the first acknowledged
submit. Also reported: kill -> a surviving member reports itself leader (GetControllerStatus polled
every 20 ms). Prints a table; not a pass/fail test.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from pathlib import Path

import trio

from bench.common import print_table
from integration.ha_harness import HACluster

DEFAULT_TIMEOUTS = {"election_timeout_min_ms": 1000, "election_timeout_max_ms": 2000, "heartbeat_ms": 200}


async def _first_ack_after(addresses: list[str], start: float) -> float:
    """Submit in a loop (every address in turn on failure) until one is acknowledged; its time."""
    from spur.auth.identity import identity_metadata
    from spur.rpc.channel import open_channel
    from spur.rpc.proto import spur_pb2 as pb
    from spur.rpc.status import RpcError
    from spur.rpc.stub import controller_stub

    md = identity_metadata()
    request = pb.SubmitJobRequest(
        spec=pb.JobSpec(name="bench", script="#!/bin/sh\n", work_dir="/tmp", hold=True)
    )
    index = 0
    while True:
        async with open_channel(addresses[index], connect_timeout=0.5, metadata_provider=lambda: md) as ch:
            try:
                with trio.fail_after(1.5):
                    await controller_stub(ch).SubmitJob(request, timeout=1.0)
                return time.monotonic() - start
            except (RpcError, trio.TooSlowError):
                index = (index + 1) % len(addresses)
                await trio.sleep(0.01)


def _one_run(root: Path, size: int) -> tuple[float, float, int]:
    c = HACluster(root, size=size, timeouts=dict(DEFAULT_TIMEOUTS))
    c.start()
    try:
        leader = c.wait_leader()
        c.call_member(leader, "SubmitJob", _warm_request())  # the write path is warm before the kill
        others = [m.node_id for m in c.members if m.node_id != leader]
        elected: list[float] = []

        def watch(start: float) -> None:
            while True:
                for i in others:
                    st = c.status(i, timeout=0.2)
                    if st is not None and st.role == "leader":
                        elected.append(time.monotonic() - start)
                        return
                time.sleep(0.02)

        survivors = [c.member(i).address for i in others]
        start = time.monotonic()
        c.kill(leader)
        watcher = threading.Thread(target=watch, args=(start,), daemon=True)
        watcher.start()
        ack = trio.run(_first_ack_after, survivors, start)
        watcher.join(timeout=30)
        return ack, (elected[0] if elected else float("nan")), leader
    finally:
        c.stop()


def _warm_request():
    from spur.rpc.proto import spur_pb2 as pb

    return pb.SubmitJobRequest(spec=pb.JobSpec(name="warm", script="#!/bin/sh\n", work_dir="/tmp", hold=True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--size", type=int, default=3)
    args = parser.parse_args()
    rows = []
    acks, elections = [], []
    for run in range(1, args.runs + 1):
        with tempfile.TemporaryDirectory(prefix="spur-election-") as tmp:
            ack, elected, killed = _one_run(Path(tmp), args.size)
        acks.append(ack)
        elections.append(elected)
        rows.append([run, killed, elected, ack])
        print(f"run {run}: killed {killed}, leader after {elected:.2f}s, write accepted after {ack:.2f}s")
    rows.append(["median", "", statistics.median(elections), statistics.median(acks)])
    rows.append(["max", "", max(elections), max(acks)])
    print_table(
        ["run", "killed", "kill->leader (s)", "kill->write acked (s)"],
        rows,
        title=f"Leader failover, {args.size} spurctld, default timeouts (election 1-2 s, heartbeat 200 ms)",
    )


if __name__ == "__main__":
    main()
