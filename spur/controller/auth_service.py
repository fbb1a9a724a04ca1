"""spurctld's Auth service: :class:`spur.auth.service.AuthService` with revocation proposed on the leader.

``MintToken`` and ``ListRevoked`` are answered by any controller (both read only its own key and
replicated state); ``RevokeToken`` is served by the leader, which proposes the ``RevokeToken`` state
command; a follower forwards it with the caller's metadata.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from spur.auth.service import AuthService
from spur.rpc.forwarding import served_by_leader
from spur.rpc.proto import auth_pb2

if TYPE_CHECKING:
    from spur.controller.host import ControllerHost
    from spur.rpc.server import CallContext

__all__ = ["ControllerAuthService"]

_leader_only = served_by_leader(auth_pb2.DESCRIPTOR.services_by_name["Auth"])


class ControllerAuthService(AuthService):
    def __init__(self, ctl: ControllerHost) -> None:
        super().__init__(ctl.auth, state=ctl.state, propose=ctl.propose)
        self.ctl = ctl

    @_leader_only
    async def RevokeToken(
        self, request: auth_pb2.RevokeTokenRequest, context: CallContext
    ) -> auth_pb2.RevokeTokenResponse:
        return await super().RevokeToken(request, context)
