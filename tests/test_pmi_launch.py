"""PMI direct launch without MPI: two nodes' launchers (spur.agent.pmi_node.NodePmi, as the shim runs
them) serve simulated ranks over real socketpairs and meet at srun's fence server
(spur.cli.srun_pmi.PmiServer) on a loopback TCP socket."""

from __future__ import annotations

import os
import socket

import trio

from spur.agent.pmi_node import NodePmi
from spur.cli.srun_pmi import PmiServer, local_address_towards
from spur.core.pmi import decode_pmi2, encode_pmi2


def launch(
    server: PmiServer, ranks: list[int], token: str | None = None
) -> tuple[NodePmi, dict[int, socket.socket]]:
    """One node of a 2x2 step; returns its launcher and each rank's end of PMI_FD (as a task gets it)."""
    node = NodePmi(
        ranks=ranks,
        size=4,
        jobid="7.0",
        tasks_per_node=[2, 2],
        server=server.address,
        token=server.token if token is None else token,
    )
    ends = {}
    for rank in ranks:
        env, fd = node.task_environment(rank)
        assert env["PMI_RANK"] == str(rank) and env["PMI_SIZE"] == "4" and env["PMI_JOBID"] == "7.0"
        assert env["PMI_FD"] == str(fd)
        ends[rank] = socket.socket(fileno=os.dup(fd))
    node.started({})
    return node, ends


def pmi1_rank(sock: socket.socket, rank: int) -> str:
    """MPICH's simple PMI client, in short: put a card, barrier, read the next rank's card."""
    f = sock.makefile("rwb", buffering=0)

    def ask(line: str) -> str:
        f.write(line.encode() + b"\n")
        return f.readline().decode()

    assert "rc=0" in ask("cmd=init pmi_version=1 pmi_subversion=1")
    assert "(vector,(0,2,2))" in ask("cmd=get kvsname=7.0 key=PMI_process_mapping")
    assert "rc=0" in ask(f"cmd=put kvsname=7.0 key=card-{rank} value=addr-{rank}")
    assert ask("cmd=barrier_in") == "cmd=barrier_out rc=0\n"
    return ask(f"cmd=get kvsname=7.0 key=card-{(rank + 1) % 4}").split("value=")[1].strip()


def pmi2_rank(sock: socket.socket, rank: int) -> str:
    f = sock.makefile("rwb", buffering=0)

    def ask(pairs: list[tuple[str, str]]) -> dict[str, str]:
        f.write(encode_pmi2(pairs))
        size = int(f.read(6))
        return dict(decode_pmi2(b"%06d" % size + f.read(size))[0][0])

    f.write(b"cmd=init pmi_version=2 pmi_subversion=0\n")
    assert b"rc=0" in f.readline()
    assert ask([("cmd", "fullinit"), ("pmirank", str(rank))])["rank"] == str(rank)
    ask([("cmd", "kvs-put"), ("key", f"card-{rank}"), ("value", f"addr-{rank}")])
    assert ask([("cmd", "kvs-fence")])["cmd"] == "kvs-fence-response"
    return ask([("cmd", "kvs-get"), ("key", f"card-{(rank + 1) % 4}")])["value"]


async def test_two_nodes_exchange_their_ranks_puts_through_the_fence_server():
    aborts: list[tuple[int, int, str]] = []
    aborted = trio.Event()

    def on_abort(rank: int, code: int, message: str) -> None:
        aborts.append((rank, code, message))
        aborted.set()

    server = PmiServer(4, on_abort)
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve, local_address_towards("127.0.0.1"))
        _a, ends_a = launch(server, [0, 1])
        _b, ends_b = launch(server, [2, 3])
        ends = {**ends_a, **ends_b}
        got: dict[int, str] = {}

        async def rank(r: int) -> None:
            client = pmi2_rank if r == 3 else pmi1_rank  # MPICH clients of both versions
            got[r] = await trio.to_thread.run_sync(client, ends[r], r)

        with trio.fail_after(20):
            async with trio.open_nursery() as ranks:
                for r in range(4):
                    ranks.start_soon(rank, r)
        assert got == {r: f"addr-{(r + 1) % 4}" for r in range(4)}

        # An abort reaches srun with the rank's code.
        f = ends[1].makefile("wb", buffering=0)
        f.write(b"cmd=abort exitcode=9\n")
        with trio.fail_after(10):
            await aborted.wait()
        assert aborts == [(1, 9, "")]
        for s in ends.values():
            s.close()
        nursery.cancel_scope.cancel()


async def test_a_node_with_the_wrong_token_is_refused():
    server = PmiServer(2, lambda *a: None)
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve, "127.0.0.1")
        node, ends = launch(server, [0], token="not-the-token")
        with trio.fail_after(10):
            while not node.error:
                await trio.sleep(0.01)
        assert node.error == "srun's PMI server closed the connection"
        for s in ends.values():
            s.close()
        nursery.cancel_scope.cancel()
