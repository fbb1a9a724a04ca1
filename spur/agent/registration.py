"""Registering this node with the controller and heartbeating afterwards.

``Registrar.run`` registers (retrying with capped exponential backoff while no controller answers,
one log line per failure), then heartbeats every interval with the running job ids. The interval is
the controller's ``heartbeat_interval_secs`` unless overridden, as the last heartbeat answer states it
(so ``scontrol reconfigure`` of that key reaches running agents). A heartbeat answered ``known=false``
(the controller lost or dropped this node) or refused (PERMISSION_DENIED: no valid node credential in
``[admission] mode = "token"``) triggers a new registration; a failed heartbeat is logged and the next
one is tried on schedule. A refused registration is retried with the same backoff, one line per attempt.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import trio
from google.protobuf.message import Message

from spur.rpc.proto import spur_pb2
from spur.rpc.status import RpcError, StatusCode

__all__ = ["Registrar"]

log = logging.getLogger("spur.agent.registration")

DEFAULT_HEARTBEAT = 30.0


class Registrar:
    def __init__(
        self,
        call: Callable[[str, Message], Awaitable[object]],
        *,
        build_request: Callable[[], Awaitable[spur_pb2.RegisterNodeRequest]],
        running_job_ids: Callable[[], list[int]],
        node_name: str,
        heartbeat_override: float | None = None,
        on_registered: Callable[[spur_pb2.RegisterNodeResponse], None] = lambda r: None,
        on_heartbeat: Callable[[spur_pb2.HeartbeatResponse], None] = lambda r: None,
        unreported_job_ids: Callable[[], list[int]] = list,
        initial_backoff: float = 1.0,
        max_backoff: float = 60.0,
    ) -> None:
        self._call = call
        self._build_request = build_request
        self._running = running_job_ids
        self._name = node_name
        self._override = heartbeat_override
        self._on_registered = on_registered
        self._on_heartbeat = on_heartbeat
        self._unreported = unreported_job_ids
        self._initial_backoff = initial_backoff
        self._max_backoff = max_backoff
        self.registrations = 0
        self.registered = trio.Event()

    async def register(self) -> spur_pb2.RegisterNodeResponse:
        """Register, retrying until a controller accepts."""
        backoff = self._initial_backoff
        while True:
            request = await self._build_request()
            try:
                response = await self._call("RegisterNode", request)
            except (RpcError, OSError) as e:
                log.warning("registering node %s failed (%s); retry in %.1fs", self._name, e, backoff)
                await trio.sleep(backoff)
                backoff = min(backoff * 2, self._max_backoff)
                continue
            assert isinstance(response, spur_pb2.RegisterNodeResponse)
            self.registrations += 1
            log.info(
                "registered node %s (%d cpus, %d MiB, %d gpus, %d running jobs)",
                request.name,
                request.cpus,
                request.memory_mb,
                len(request.gpus),
                len(request.running_job_ids),
            )
            self._on_registered(response)
            self.registered.set()
            return response

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        response = await self.register()
        leader_interval = 0  # the leader's current setting, from its last heartbeat answer
        while True:
            interval = self._override or leader_interval or response.heartbeat_interval_secs or DEFAULT_HEARTBEAT
            await trio.sleep(interval)
            beat = spur_pb2.HeartbeatRequest(
                name=self._name, running_job_ids=self._running(), unreported_job_ids=self._unreported()
            )
            try:
                answer = await self._call("Heartbeat", beat)
            except RpcError as e:
                if e.code in (StatusCode.PERMISSION_DENIED, StatusCode.UNAUTHENTICATED):
                    log.warning(
                        "controller refused the heartbeat of node %s (%s); registering again", self._name, e
                    )
                    response = await self.register()
                else:
                    log.warning("heartbeat of node %s failed (%s)", self._name, e)
                continue
            except OSError as e:
                log.warning("heartbeat of node %s failed (%s)", self._name, e)
                continue
            assert isinstance(answer, spur_pb2.HeartbeatResponse)
            leader_interval = answer.heartbeat_interval_secs  # 0 from a controller that does not say
            self._on_heartbeat(answer)
            if not answer.known:
                log.warning("controller does not know node %s; registering again", self._name)
                response = await self.register()
