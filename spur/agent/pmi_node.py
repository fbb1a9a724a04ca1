"""The node side of PMI direct launch (``srun --mpi=pmi2``), run by the shim in a thread.

Each local rank gets one end of a socketpair as ``PMI_FD``; :class:`NodePmi` serves the PMI-1/PMI-2
protocol (:class:`spur.core.pmi.RankSession`) on the other ends. When every local rank has entered a
fence, the node sends their puts to srun's fence server (one TCP connection, JSON lines, the first
carrying the step's token) and releases the ranks with the merged KVS srun answers once every node
arrived. An abort (PMI-1 ``abort``, PMI-2 ``abort``) is told to srun, which ends the step on the
other nodes; on this node every other rank is killed at once (Slurm kills the step with SIGKILL) and
the aborting rank exits by itself with its code.

Standard library only (the shim imports it): a selector loop in one daemon thread.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import socket
import sys
import threading

from spur.core.pmi import (
    Abort,
    Fence,
    PmiError,
    RankInfo,
    RankSession,
    Reply,
    decode_node_message,
    encode_node_message,
    process_mapping,
)

__all__ = ["NodePmi"]

# Connecting to srun's fence server: srun listens before it launches, so this is only a lost network.
CONNECT_TIMEOUT_SECS = 30.0


class NodePmi:
    """PMI for this node's ranks ``ranks`` of a step of ``size`` ranks (see the module docstring)."""

    def __init__(
        self,
        *,
        ranks: list[int],
        size: int,
        jobid: str,
        tasks_per_node: list[int],
        server: str,
        token: str,
    ) -> None:
        attrs = (("PMI_process_mapping", process_mapping(tasks_per_node)),)
        self.sessions = {r: RankSession(RankInfo(r, size, jobid, attrs=attrs)) for r in ranks}
        self.server = server
        self.token = token
        self._pairs = {r: socket.socketpair() for r in ranks}
        self._pids: dict[int, int] = {}
        self._fence = 0
        self._entered: dict[int, dict[str, str]] = {}
        self._link: socket.socket | None = None
        self._link_buffer = b""
        self.error = ""

    def task_environment(self, rank: int) -> tuple[dict[str, str], int]:
        """The variables of ``rank``'s PMI client and the descriptor the task must inherit."""
        fd = self._pairs[rank][1].fileno()
        info = self.sessions[rank].info
        env = {
            "PMI_FD": str(fd),
            "PMI_RANK": str(rank),
            "PMI_SIZE": str(info.size),
            "PMI_JOBID": info.jobid,
            "PMI_SPAWNED": "0",
        }
        return env, fd

    def started(self, pids: dict[int, int]) -> None:
        """The tasks are running (``rank -> pid``): close their ends here, serve the ours in a thread."""
        self._pids = dict(pids)
        for _ours, theirs in self._pairs.values():
            theirs.close()
        threading.Thread(target=self._serve, name="pmi", daemon=True).start()

    # ------------------------------------------------------------------ the thread

    def _serve(self) -> None:
        try:
            host, _, port = self.server.rpartition(":")
            self._link = socket.create_connection((host.strip("[]"), int(port)), CONNECT_TIMEOUT_SECS)
            self._link.settimeout(None)
            self._link.sendall(encode_node_message({"token": self.token, "ranks": len(self.sessions)}))
        except (OSError, ValueError) as e:
            self._fail(f"cannot reach srun's PMI server at {self.server}: {e}")
            return
        sel = selectors.DefaultSelector()
        for rank, (ours, _theirs) in self._pairs.items():
            sel.register(ours, selectors.EVENT_READ, rank)
        sel.register(self._link, selectors.EVENT_READ, None)
        open_ranks = len(self._pairs)
        while open_ranks:
            for key, _ in sel.select():
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                try:
                    data = sock.recv(65536)
                except OSError:
                    data = b""
                if key.data is None:
                    if not data:
                        self._fail("srun's PMI server closed the connection")
                        return
                    self._from_server(data)
                    continue
                if not data:
                    sel.unregister(sock)
                    sock.close()
                    open_ranks -= 1
                    continue
                self._from_rank(key.data, data)
        sel.close()
        self._link.close()

    def _from_rank(self, rank: int, data: bytes) -> None:
        session = self.sessions[rank]
        ours = self._pairs[rank][0]
        try:
            actions = session.receive(data)
        except PmiError as e:
            print(f"spur: error: task {rank}: {e}", file=sys.stderr)
            with contextlib.suppress(OSError):
                ours.shutdown(socket.SHUT_RDWR)
            return
        for action in actions:
            if isinstance(action, Reply):
                with contextlib.suppress(OSError):
                    ours.sendall(action.data)
            elif isinstance(action, Fence):
                self._entered[rank] = action.puts
                if len(self._entered) == len(self.sessions):
                    puts: dict[str, str] = {}
                    for rank_puts in self._entered.values():
                        puts.update(rank_puts)
                    self._send({"fence": self._fence, "ranks": len(self.sessions), "puts": puts})
            elif isinstance(action, Abort):
                # MPICH's aborting rank waits to be killed, as Slurm does to the whole step.
                self._send({"abort": action.code, "rank": rank, "message": action.message})
                self._kill_all()

    def _from_server(self, data: bytes) -> None:
        self._link_buffer += data
        while b"\n" in self._link_buffer:
            line, self._link_buffer = self._link_buffer.split(b"\n", 1)
            try:
                message = decode_node_message(line)
            except PmiError as e:
                self._fail(str(e))
                return
            kvs = message.get("kvs")
            if message.get("fence") != self._fence or not isinstance(kvs, dict):
                self._fail(f"srun's PMI server answered {line[:80]!r} to fence {self._fence}")
                return
            self._fence += 1
            entered, self._entered = self._entered, {}
            for rank in entered:
                reply = self.sessions[rank].fence_done({str(k): str(v) for k, v in kvs.items()})
                with contextlib.suppress(OSError):
                    self._pairs[rank][0].sendall(reply.data)

    def _send(self, message: dict[str, object]) -> None:
        if self._link is not None:
            with contextlib.suppress(OSError):
                self._link.sendall(encode_node_message(message))

    def _fail(self, message: str) -> None:
        """The step cannot go on without its fence server: end this node's ranks and say why."""
        self.error = message
        print(f"spur: error: {message}", file=sys.stderr)
        self._kill_all()

    def _kill_all(self) -> None:
        for pid in self._pids.values():
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)

