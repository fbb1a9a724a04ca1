"""The K0sAgent gRPC service (spur/rpc/proto/k0s.proto) over :class:`spur.agent.k0s.K0sManager`.

Daemon-only (METHOD_PRIVILEGE): called by the leader's k8s reconcile task. A failure the caller
should see (no root, a foreign unit, a failed install or k0s command) -> FAILED_PRECONDITION with
the reason; a malformed request -> INVALID_ARGUMENT. Tokens and kubeconfigs are never logged.
"""

from __future__ import annotations

from spur.agent.k0s import K0sError, K0sManager, Status
from spur.k8s.cluster.render import ROLES
from spur.rpc.proto import k0s_pb2
from spur.rpc.server import CallContext
from spur.rpc.status import RpcError, StatusCode

__all__ = ["K0sServicer"]


def _status_pb(s: Status) -> k0s_pb2.K0sStatus:
    return k0s_pb2.K0sStatus(
        installed=s.installed,
        unit_present=s.unit_present,
        spur_owned=s.spur_owned,
        active_state=s.active_state,
        enabled=s.enabled,
        role=s.role,
        component_state=s.component_state,
        main_pid=s.main_pid,
        detail=s.detail,
        running=s.running,
        running_role=s.running_role,
        claimed=s.claimed,
        running_unit=s.running_unit,
    )


class K0sServicer:
    def __init__(self, manager: K0sManager, node_name: str) -> None:
        self.manager = manager
        self.node_name = node_name

    def _fail(self, exc: K0sError) -> RpcError:
        return RpcError(StatusCode.FAILED_PRECONDITION, f"node {self.node_name}: {exc}")

    async def Apply(self, request: k0s_pb2.K0sApplyRequest, context: CallContext) -> k0s_pb2.K0sStatus:
        if request.role not in ROLES:
            raise RpcError(StatusCode.INVALID_ARGUMENT, f"unknown k0s role {request.role!r}")
        if request.control_plane_count < 1:
            raise RpcError(StatusCode.INVALID_ARGUMENT, "control_plane_count must be at least 1")
        try:
            status = await self.manager.apply(
                role=request.role,
                control_plane_count=request.control_plane_count,
                pod_cidr=request.pod_cidr,
                service_cidr=request.service_cidr,
                advertise_address=request.advertise_address or None,
                control_plane_addresses=list(request.control_plane_addresses),
                join_token=request.join_token,
            )
        except K0sError as exc:
            raise self._fail(exc) from None
        return _status_pb(status)

    async def Status(self, request: k0s_pb2.K0sStatusRequest, context: CallContext) -> k0s_pb2.K0sStatus:
        try:
            return _status_pb(await self.manager.status())
        except K0sError as exc:
            raise self._fail(exc) from None

    async def Stop(self, request: k0s_pb2.K0sStopRequest, context: CallContext) -> k0s_pb2.K0sStatus:
        try:
            return _status_pb(await self.manager.stop())
        except K0sError as exc:
            raise self._fail(exc) from None

    async def Reset(self, request: k0s_pb2.K0sResetRequest, context: CallContext) -> k0s_pb2.K0sStatus:
        try:
            return _status_pb(await self.manager.reset())
        except K0sError as exc:
            raise self._fail(exc) from None

    async def CreateToken(
        self, request: k0s_pb2.K0sTokenRequest, context: CallContext
    ) -> k0s_pb2.K0sTokenResponse:
        try:
            return k0s_pb2.K0sTokenResponse(token=await self.manager.create_token(request.role))
        except K0sError as exc:
            raise self._fail(exc) from None

    async def AdminKubeconfig(
        self, request: k0s_pb2.K0sKubeconfigRequest, context: CallContext
    ) -> k0s_pb2.K0sKubeconfigResponse:
        try:
            return k0s_pb2.K0sKubeconfigResponse(kubeconfig=await self.manager.admin_kubeconfig())
        except K0sError as exc:
            raise self._fail(exc) from None
