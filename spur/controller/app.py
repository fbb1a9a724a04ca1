"""spurctld wiring: Raft node + state machine + gRPC server + leader duties.

One Trio run; the root nursery supervises the Raft node, the gRPC server and the leadership
watcher. Leader-only duties live in a nursery inside a cancel scope that exists only while this
node leads; losing leadership cancels it so nothing leader-only survives a step-down.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any

import trio

from spur.config import SpurConfig
from spur.core.clock import Clock
from spur.core.job import Partition, PartitionState
from spur.raft.node import RaftNode, Role
from spur.raft.storage import RaftStorage
from spur.rpc.proto import spur_pb2
from spur.rpc.server import Server
from spur.rpc.status import RpcError, StatusCode
from spur.state import commands as c
from spur.state.machine import ClusterState, Rejected

log = logging.getLogger("spur.controller")


class _NotifyingStateMachine:
    """Adapts ClusterState to Raft's StateMachine protocol and signals every applied entry."""

    def __init__(self, state: ClusterState, on_apply: Any) -> None:
        self.state = state
        self._on_apply = on_apply

    def apply(self, index: int, data: bytes) -> Any:
        result = self.state.apply(index, data)
        self._on_apply()
        return result

    def snapshot(self) -> bytes:
        return self.state.snapshot()

    def restore(self, data: bytes) -> None:
        self.state.restore(data)
        self._on_apply()


class Controller:
    """A spurctld instance. ``run`` serves until cancelled."""

    def __init__(
        self,
        cfg: SpurConfig,
        *,
        state_dir: str | Path | None = None,
        listen: tuple[str, int] | None = None,
        node_id: int = 1,
        clock: Clock | None = None,
    ) -> None:
        self.cfg = cfg
        self.clock = clock or Clock()
        self.state_dir = Path(state_dir or cfg.controller.state_dir)
        self.listen = listen
        self.state = ClusterState(history_max_jobs=cfg.accounting.history_max_jobs)
        self._changed = trio.Event()
        self.scheduler_kick = trio.Event()
        self.machine = _NotifyingStateMachine(self.state, self._signal_change)
        self.storage = RaftStorage(self.state_dir / "raft", fsync=cfg.controller.wal_fsync)
        self.raft = RaftNode(
            node_id=node_id,
            storage=self.storage,
            state_machine=self.machine,
            peers=list(cfg.controller.peers),
            snapshot_every=cfg.controller.snapshot_every,
        )
        # Leader-only, not replicated: when each node last talked to us (trio clock).
        self.last_seen: dict[str, float] = {}
        self.bound_port: int | None = None
        self.plugin_manager: Any = None

    # ------------------------------------------------------------------ change signalling

    def _signal_change(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def wait_change(self) -> None:
        """Return after the next applied log entry."""
        await self._changed.wait()

    def kick_scheduler(self) -> None:
        self.scheduler_kick.set()

    # ------------------------------------------------------------------ proposals

    async def propose(self, cmd: Any) -> Any:
        """Replicate ``cmd`` and return its result; a Rejected result becomes an RpcError."""
        from spur.raft.node import NotLeader
        from spur.raft.storage import StorageError

        try:
            result = await self.raft.propose(c.encode(cmd))
        except NotLeader as exc:
            raise RpcError(StatusCode.UNAVAILABLE, f"not the leader (leader: {exc.leader_hint})") from None
        except StorageError as exc:
            raise RpcError(StatusCode.UNAVAILABLE, f"state could not be made durable: {exc}") from None
        if isinstance(result, Rejected):
            raise RpcError(StatusCode[result.code], result.message)
        return result

    async def raft_propose_quiet(self, cmd: Any) -> Any:
        """Like ``propose`` for leader tasks: a refusal is logged and returned, not raised."""
        try:
            return await self.propose(cmd)
        except RpcError as exc:
            log.info("%s not applied: %s", type(cmd).__name__, exc)
            return exc

    # ------------------------------------------------------------------ running

    def configured_partitions(self) -> list[Partition]:
        parts = []
        for p in self.cfg.partitions:
            parts.append(
                Partition(
                    name=p.name,
                    state=PartitionState(p.state),
                    is_default=p.default,
                    nodes_expr=p.nodes,
                    max_time_secs=p.max_time_secs,
                    default_time_secs=p.default_time_secs,
                )
            )
        return parts

    async def run(self, *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
        from spur.controller.service import ControllerService
        from spur.plugins import load_plugin_manager

        if self.plugin_manager is None:
            self.plugin_manager = load_plugin_manager("scheduler", self.cfg.scheduler.plugin)
        host, port = self.listen or _split(self.cfg.controller.listen_addr, 6817)
        server = Server()
        server.add_service(spur_pb2.DESCRIPTOR.services_by_name["Controller"], ControllerService(self))
        async with trio.open_nursery() as nursery:
            await nursery.start(self.raft.run)
            self.bound_port = await nursery.start(server.serve, host, port)
            nursery.start_soon(self._leadership_watch, name="leadership-watch")
            log.info("spurctld listening on %s:%s (state in %s)", host, self.bound_port, self.state_dir)
            task_status.started(self.bound_port)

    async def _leadership_watch(self) -> None:
        role = self.raft.role
        while True:
            if role is Role.LEADER:
                async with trio.open_nursery() as duties:
                    duties.start_soon(self._lead, duties, name="leader-duties")
                    role = await self.raft.wait_role_change(Role.LEADER)
                    duties.cancel_scope.cancel()
                log.info("stepped down (term %s); leader duties cancelled", self.raft.term)
            else:
                role = await self.raft.wait_role_change(role)

    async def _lead(self, duties: trio.Nursery) -> None:
        from spur.controller.duties import Dispatcher, HealthSweep, SchedulerLoop

        log.info("leader for term %s", self.raft.term)
        wanted = self.configured_partitions()
        if [p for p in self.state.partitions.values()] != wanted:
            await self.propose(c.ConfigurePartitions(wanted))
        now = trio.current_time()
        for name in self.state.nodes:
            self.last_seen.setdefault(name, now)
        await duties.start(SchedulerLoop(self).run)
        await duties.start(Dispatcher(self).run)
        await duties.start(HealthSweep(self).run)


def _split(addr: str, default_port: int) -> tuple[str, int]:
    from spur.config import parse_addr

    return parse_addr(addr, default_port)


def interval_or_inf(secs: float) -> float:
    return math.inf if secs <= 0 else secs
