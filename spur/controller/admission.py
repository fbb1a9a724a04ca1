"""spurctld's side of node admission: the Admission service and the checks on agent calls.

``[admission] mode = "open"`` (the default) admits every node, as before. In ``"token"`` mode:

- ``RegisterNode`` needs either the node's credential (metadata ``x-spur-node-credential``, minted
  at an earlier admitted registration; no token use is consumed) or a valid join token in the
  request. A token admits the node: the leader mints a random credential, proposes only its hash
  (``AdmitNode``, which consumes one use) and returns the credential once in the response.
- ``Heartbeat`` and ``ReportJobStatus`` need the node's credential.
- Every refusal is one PERMISSION_DENIED whose message says what was wrong and what to do, and one
  warning line in the controller log. Secrets (tokens, credentials) are never logged or echoed.

The Admission service (CreateToken, ListTokens, RevokeToken) is admin only and served by the
leader; followers forward it with the caller's metadata.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from spur.config.model import AdmissionMode
from spur.core.admission import (
    CREDENTIAL_METADATA_KEY,
    TokenFormatError,
    hash_secret,
    new_credential,
    new_token,
    parse_token,
)
from spur.rpc.forwarding import served_by_leader
from spur.rpc.proto import admission_pb2 as apb
from spur.rpc.server import CallContext
from spur.rpc.status import RpcError, StatusCode
from spur.state.admission import (
    AdmissionDomain,
    AdmissionToken,
    AdmitNode,
    CreateAdmissionToken,
    RevokeAdmissionToken,
    token_state,
)

if TYPE_CHECKING:
    from spur.controller.host import ControllerHost

log = logging.getLogger("spur.controller.admission")

_HOW_TO_JOIN = (
    '[admission] mode is "token": an administrator creates a join token with `spur token create` '
    "and spurd presents it with --join-token (or [agent] join_token_file)"
)


def _domain(ctl: ControllerHost) -> AdmissionDomain:
    domain = ctl.state.domains["admission"]
    assert isinstance(domain, AdmissionDomain)
    return domain


def token_mode(ctl: ControllerHost) -> bool:
    return ctl.cfg.admission.mode is AdmissionMode.TOKEN


def _refuse(node: str, peer: str, message: str) -> RpcError:
    log.warning("refused node %s (from %s): %s", node, peer, message.split("; ", 1)[0])
    return RpcError(StatusCode.PERMISSION_DENIED, message)


async def admit_registration(ctl: ControllerHost, name: str, join_token: str, context: CallContext) -> str:
    """Check a RegisterNode call (leader only); returns a new credential to hand out, or "".

    Raises RpcError(PERMISSION_DENIED) when the node may not register (see the module docstring).
    """
    if not token_mode(ctl):
        return ""
    domain = _domain(ctl)
    presented = context.metadata.get(CREDENTIAL_METADATA_KEY, "")
    if presented and domain.credential_ok(name, hash_secret(presented)):
        return ""  # re-registration of an admitted node: it keeps its credential
    if not join_token:
        why = (
            "its node credential is not valid in this cluster" if presented else "it presented no join token"
        )
        raise _refuse(name, context.peer, f"node {name} refused: {why}; {_HOW_TO_JOIN}")
    try:
        token_id, secret = parse_token(join_token)
    except TokenFormatError as exc:
        raise _refuse(name, context.peer, f"node {name} refused: {exc}") from None
    credential = new_credential()
    cmd = AdmitNode(name, token_id, hash_secret(secret), hash_secret(credential), ctl.clock.wall())
    try:
        await ctl.propose(cmd)
    except RpcError as exc:
        if exc.code is StatusCode.PERMISSION_DENIED:
            raise _refuse(name, context.peer, exc.message) from None
        raise
    log.info("node %s admitted with join token %s", name, token_id)
    return credential


def check_node_credential(ctl: ControllerHost, node: str, context: CallContext, what: str) -> None:
    """In token mode, refuse ``what`` (a heartbeat, a job report) from a node without a valid credential."""
    if not token_mode(ctl):
        return
    presented = context.metadata.get(CREDENTIAL_METADATA_KEY, "")
    if presented and _domain(ctl).credential_ok(node, hash_secret(presented)):
        return
    why = "its node credential is not valid in this cluster" if presented else "it sent no node credential"
    raise _refuse(
        node,
        context.peer,
        f"{what} from node {node} refused: {why}; the node must register again ({_HOW_TO_JOIN})",
    )


def token_info(token: AdmissionToken, now: float) -> apb.TokenInfo:
    info = apb.TokenInfo(
        id=token.token_id,
        created=token.created,
        expires=token.expires,
        used=token.used,
        revoked=token.revoked,
        creator=token.creator,
        state=token_state(token, now),
        description=token.description,
    )
    if token.uses_left is not None:
        info.uses_left = token.uses_left
    return info


_leader_only = served_by_leader(apb.DESCRIPTOR.services_by_name["Admission"])


MAX_TTL_SECS = 10 * 365 * 86400.0


class AdmissionService:
    """``spur.admission.v1.Admission``: join tokens for ``[admission] mode = "token"`` (admin only)."""

    def __init__(self, ctl: ControllerHost) -> None:
        self.ctl = ctl

    def _admin(self, context: CallContext, what: str = "managing node join tokens") -> Any:
        from spur.auth.callers import require_admin as _require_admin

        return _require_admin(context, what, self.ctl.state)

    @_leader_only
    async def CreateToken(
        self, request: apb.CreateTokenRequest, context: CallContext
    ) -> apb.CreateTokenResponse:
        ident = self._admin(context)
        if not 0 <= request.ttl_secs <= MAX_TTL_SECS:
            raise RpcError(StatusCode.INVALID_ARGUMENT, "ttl must be 0 (never expires) up to 10 years")
        if request.HasField("uses") and request.uses < 1:
            raise RpcError(StatusCode.INVALID_ARGUMENT, "--uses must be at least 1")
        now = self.ctl.clock.wall()
        for _ in range(8):  # a taken id (1 in 16M per token) is retried with a fresh one
            token_id, secret = new_token()
            cmd = CreateAdmissionToken(
                token_id=token_id,
                secret_hash=hash_secret(secret),
                created=now,
                expires=now + request.ttl_secs if request.ttl_secs else 0.0,
                uses_left=request.uses if request.HasField("uses") else None,
                creator=ident.user,
                description=request.description,
            )
            try:
                token = await self.ctl.propose(cmd)
            except RpcError as exc:
                if exc.code is StatusCode.ALREADY_EXISTS:
                    continue
                raise
            log.info("join token %s created by %s", token_id, ident.user)
            return apb.CreateTokenResponse(token=f"{token_id}.{secret}", info=token_info(token, now))
        raise RpcError(StatusCode.UNAVAILABLE, "could not pick an unused token id; retry")

    @_leader_only
    async def ListTokens(
        self, request: apb.ListTokensRequest, context: CallContext
    ) -> apb.ListTokensResponse:
        self._admin(context)
        await self.ctl.read_barrier()
        now = self.ctl.clock.wall()
        return apb.ListTokensResponse(tokens=[token_info(t, now) for t in _domain(self.ctl).list_tokens()])

    @_leader_only
    async def RevokeToken(self, request: apb.RevokeTokenRequest, context: CallContext) -> apb.TokenInfo:
        ident = self._admin(context)
        token_id = request.id.strip().lower().split(".", 1)[0]  # a whole token pasted: use its id only
        if not token_id:
            raise RpcError(StatusCode.INVALID_ARGUMENT, "revoke needs a token id (see spur token list)")
        token = await self.ctl.propose(RevokeAdmissionToken(token_id, self.ctl.clock.wall()))
        log.info("join token %s revoked by %s", token_id, ident.user)
        return token_info(token, self.ctl.clock.wall())
