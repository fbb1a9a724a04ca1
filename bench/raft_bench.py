"""Raft on loopback: 3-member commit latency, throughput, and time to elect a new leader after a kill.

Run: ``.venv/bin/python -m bench.raft_bench [--fsync] [--proposals N] [--kills K]``. Uses real time and
the default timing (election timeout 1-2 s, heartbeat 200 ms). Prints a table; not a pass/fail test.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import trio

from spur.raft.testing import open_cluster


def _cmd(i: int) -> bytes:
    return json.dumps({"add": ["n", 1], "id": str(i)}).encode()


async def _latency(directory: Path, fsync: bool, count: int) -> list[float]:
    async with open_cluster(directory, 3, fsync=fsync, snapshot_every=100_000) as cluster:
        leader = await cluster.wait_leader()
        samples = []
        for i in range(count):
            start = time.perf_counter()
            await leader.propose(_cmd(i))
            samples.append(time.perf_counter() - start)
        return samples


async def _throughput(directory: Path, fsync: bool, count: int, clients: int) -> float:
    async with open_cluster(directory, 3, fsync=fsync, snapshot_every=100_000) as cluster:
        leader = await cluster.wait_leader()
        per_client = count // clients

        async def client(c: int) -> None:
            for i in range(per_client):
                await leader.propose(_cmd(c * per_client + i))

        start = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for c in range(clients):
                nursery.start_soon(client, c)
        return per_client * clients / (time.perf_counter() - start)


async def _failover(directory: Path, fsync: bool, kills: int) -> list[float]:
    times = []
    async with open_cluster(directory, 3, fsync=fsync) as cluster:
        for _ in range(kills):
            leader = await cluster.wait_leader()
            await leader.propose(_cmd(0))
            victim = leader.node_id
            start = time.perf_counter()
            await cluster.stop(victim)
            await cluster.wait_leader()  # elected and its no-op committed: writable again
            times.append(time.perf_counter() - start)
            await cluster.start(victim)
    return times


def _pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        lat = await _latency(base / "lat", args.fsync, args.proposals)
        tput1 = await _throughput(base / "tp1", args.fsync, args.proposals * 4, 16)
        tput2 = await _throughput(base / "tp2", args.fsync, args.proposals * 8, 256)
        fail = await _failover(base / "fo", args.fsync, args.kills)
    rows = [
        ("commit latency p50 (1 client)", f"{_pct(lat, 0.50) * 1000:.2f} ms"),
        ("commit latency p99 (1 client)", f"{_pct(lat, 0.99) * 1000:.2f} ms"),
        ("throughput, 16 clients", f"{tput1:,.0f} commits/s"),
        ("throughput, 256 clients", f"{tput2:,.0f} commits/s"),
        (f"time to new writable leader (median of {len(fail)})", f"{statistics.median(fail) * 1000:.0f} ms"),
        ("  min / max", f"{min(fail) * 1000:.0f} / {max(fail) * 1000:.0f} ms"),
    ]
    print(f"3-member Raft on loopback, fsync={'on' if args.fsync else 'off'}, default timeouts")
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"  {name:<{width}}  {value}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--fsync", action="store_true", help="fsync the WAL (default: page cache only)")
    parser.add_argument("--proposals", type=int, default=1000)
    parser.add_argument("--kills", type=int, default=5)
    trio.run(main, parser.parse_args())
