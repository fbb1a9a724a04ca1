"""PMI fence latency for 4, 16 and 64 ranks.

1. Protocol only: simulated ranks in one process, no sockets. Each rank puts its business card and
   enters the fence; the launcher merges the puts and releases every rank; then each rank reads a
   peer's card. This measures the encode, decode and merge work of spur.core.pmi.
2. A real fence across two nodes: the direct-launch code itself. srun's fence server
   (spur.cli.srun_pmi.PmiServer) runs here. Each node is its own process running
   spur.agent.pmi_node.NodePmi, which serves half of the ranks over socketpairs, as the shim does.
   The simulated ranks speak PMI-2 on those sockets: kvs-put, then kvs-fence. The figure is the time
   from a node's first put to the last of its ranks leaving the fence. Nodes are two network namespaces
   on a bridge (like the MPI integration tests) when run as root, or else two processes on loopback.

Run: .venv/bin/python -m bench.pmi_fence [--fences 50]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from spur.core.pmi import Fence, RankInfo, RankSession, decode_pmi2, encode_pmi2

SIZES = (4, 16, 64)


def one_fence(size: int) -> float:
    sessions = [RankSession(RankInfo(rank, size, "1.0"), version=2) for rank in range(size)]
    start = time.perf_counter()
    merged: dict[str, str] = {}
    for s in sessions:
        s.receive(encode_pmi2([("cmd", "kvs-put"), ("key", f"bc-{s.info.rank}"), ("value", "x" * 64)]))
        [fence] = s.receive(encode_pmi2([("cmd", "kvs-fence")]))
        assert isinstance(fence, Fence)
        merged.update(fence.puts)
    for s in sessions:
        s.fence_done(merged)
        s.receive(encode_pmi2([("cmd", "kvs-get"), ("key", f"bc-{(s.info.rank + 1) % size}")]))
    return time.perf_counter() - start


# ------------------------------------------------------------------ one node (a child process)


def _read_frame(f) -> dict[str, str]:  # f: a binary file over a rank's socket
    size = int(f.read(6))
    return dict(decode_pmi2(b"%06d" % size + f.read(size))[0][0])


def node_main(server: str, token: str, first: int, count: int, size: int, fences: int) -> None:
    """One node: serve ``count`` simulated ranks from ``first``; print the fence times as JSON."""
    from spur.agent.pmi_node import NodePmi

    ranks = list(range(first, first + count))
    node = NodePmi(
        ranks=ranks, size=size, jobid="1.0", tasks_per_node=[count, size - count], server=server, token=token
    )
    files = {}
    for rank in ranks:
        _env, fd = node.task_environment(rank)
        files[rank] = socket.socket(fileno=os.dup(fd)).makefile("rwb", buffering=0)
    node.started({})
    for f in files.values():
        f.write(b"cmd=init pmi_version=2 pmi_subversion=0\n")
        f.readline()
    times = []
    for n in range(fences + 1):  # fence 0 is the warm-up: it lines the nodes up
        start = time.perf_counter()
        for rank, f in files.items():
            f.write(encode_pmi2([("cmd", "kvs-put"), ("key", f"bc-{n}-{rank}"), ("value", "x" * 64)]))
            f.write(encode_pmi2([("cmd", "kvs-fence")]))
        for f in files.values():
            assert _read_frame(f)["cmd"] == "kvs-put-response"
            assert _read_frame(f)["cmd"] == "kvs-fence-response"
        times.append(time.perf_counter() - start)
    print(json.dumps(times[1:]))


# ------------------------------------------------------------------ two nodes and srun's server


def real_fences(size: int, fences: int, host: str, prefixes: list[list[str]]) -> list[float]:
    """Fence times seen by the first node, with srun's server on ``host`` and the two nodes started
    under ``prefixes`` (e.g. ``ip netns exec NS``)."""
    import trio

    from spur.cli.srun_pmi import PmiServer

    result: list[float] = []

    async def run() -> None:
        server = PmiServer(size, lambda *_a: None)
        async with trio.open_nursery() as nursery:
            await nursery.start(server.serve, host)
            half = size // 2
            procs = []
            for i, prefix in enumerate(prefixes):
                argv = [
                    *prefix,
                    sys.executable,
                    "-m",
                    "bench.pmi_fence",
                    "--node",
                    server.address,
                    server.token,
                ]
                argv += [str(i * half), str(half), str(size), str(fences)]
                procs.append(subprocess.Popen(argv, stdout=subprocess.PIPE, text=True))
            outs = [await trio.to_thread.run_sync(p.communicate) for p in procs]
            for p in procs:
                if p.returncode:
                    raise SystemExit(f"a node process failed ({p.returncode})")
            result.extend(json.loads(outs[0][0]))
            nursery.cancel_scope.cancel()

    trio.run(run)
    return result


def _netns_pair():  # -> (Hosts, prefixes) or None
    if os.geteuid() != 0 or not shutil.which("ip"):
        return None
    from integration.mesh_hosts import Hosts

    hosts = Hosts(Path(tempfile.mkdtemp(prefix="pmi-bench-")))
    try:
        hosts.create(2)
    except Exception:
        hosts.cleanup()
        return None
    return hosts, [["ip", "netns", "exec", h.ns] for h in hosts.hosts]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fences", type=int, default=50)
    parser.add_argument("--node", nargs=6, metavar="ARG", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.node:
        server, token, first, count, size, fences = args.node
        node_main(server, token, int(first), int(count), int(size), int(fences))
        return
    for size in SIZES:
        runs = sorted(one_fence(size) for _ in range(200))
        print(
            f"protocol only, {size:3d} simulated ranks:          "
            f"median {runs[100] * 1e6:8.1f} us, p95 {runs[190] * 1e6:8.1f} us"
        )
    pair = _netns_pair()
    if pair is None:
        where, host, prefixes = "2 processes on loopback", "127.0.0.1", [[], []]
    else:
        where, host, prefixes = "2 netns hosts on a bridge", pair[0].bridge_ip, pair[1]
    try:
        for size in SIZES:
            times = sorted(real_fences(size, args.fences, host, prefixes))
            p95 = times[int(len(times) * 0.95) - 1]
            print(
                f"real fence, {size:3d} ranks ({size // 2} per node), {where}: "
                f"median {statistics.median(times) * 1e3:6.2f} ms, p95 {p95 * 1e3:6.2f} ms"
            )
    finally:
        if pair is not None:
            pair[0].cleanup()


if __name__ == "__main__":
    main()
