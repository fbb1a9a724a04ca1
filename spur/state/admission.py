"""State domain ``admission``: node join tokens and node credentials, stored hashed.

Join tokens (``spur token create``) let a node register when ``[admission] mode = "token"``. The
leader generates every secret outside the state machine and proposes only ``sha256(secret)``;
a presented secret is hashed by the leader too, so no secret ever reaches the Raft log, a snapshot
or a log line. Checks compare hashes in constant time (:func:`spur.core.admission.secret_matches`).

Expiry and remaining uses are evaluated with the time stamped into the command by the leader, so
applying the log is deterministic. A successful :class:`AdmitNode` consumes one use of the token
and records the hash of the node credential the leader minted for that node (replacing an older
one). Revoking a token stops new registrations with it and invalidates every node credential it
issued (each credential records the token that admitted it): such a node's heartbeats and reports
are refused until it joins again with a valid token.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from spur.core.admission import secret_matches
from spur.core.serde import from_plain, to_plain
from spur.state.domain import Rejected, StateDomain, StateQueries

__all__ = [
    "AdmissionDomain",
    "AdmissionToken",
    "AdmitNode",
    "CreateAdmissionToken",
    "NodeCredential",
    "RevokeAdmissionToken",
    "token_state",
]

ACTIVE, EXPIRED, EXHAUSTED, REVOKED = "active", "expired", "exhausted", "revoked"


@dataclass
class AdmissionToken:
    token_id: str
    secret_hash: str
    created: float
    expires: float  # unix time; 0 = never
    uses_left: int | None  # None = unlimited
    creator: str
    description: str = ""
    used: int = 0
    revoked: bool = False
    revoked_time: float = 0.0


@dataclass
class NodeCredential:
    node: str
    secret_hash: str
    token_id: str
    issued: float


@dataclass
class CreateAdmissionToken:
    """Store a new join token (its secret only as a hash). Rejected if the id is taken."""

    token_id: str
    secret_hash: str
    created: float
    expires: float
    uses_left: int | None
    creator: str
    description: str = ""


@dataclass
class RevokeAdmissionToken:
    token_id: str
    time: float


@dataclass
class AdmitNode:
    """Admit ``node`` with the presented token (hash of its secret) and record its new credential."""

    node: str
    token_id: str
    presented_hash: str
    credential_hash: str
    time: float


def token_state(token: AdmissionToken, now: float) -> str:
    """active | revoked | expired | exhausted at time ``now`` (revoked wins, then expired)."""
    if token.revoked:
        return REVOKED
    if token.expires and now >= token.expires:
        return EXPIRED
    if token.uses_left is not None and token.uses_left <= 0:
        return EXHAUSTED
    return ACTIVE


_REFUSALS = {
    REVOKED: "join token {id} was revoked",
    EXPIRED: "join token {id} has expired",
    EXHAUSTED: "join token {id} has no uses left",
}
_WHAT_TO_DO = "ask an administrator for a new one (spur token create) and restart spurd with --join-token"


class AdmissionDomain(StateDomain):
    """Join tokens by id and node credentials by node name (see the module docstring)."""

    name = "admission"
    commands = (CreateAdmissionToken, RevokeAdmissionToken, AdmitNode)

    def __init__(self, state: StateQueries) -> None:
        super().__init__(state)
        self.tokens: dict[str, AdmissionToken] = {}
        self.credentials: dict[str, NodeCredential] = {}

    # ------------------------------------------------------------------ queries

    def token(self, token_id: str) -> AdmissionToken | None:
        return self.tokens.get(token_id)

    def list_tokens(self) -> list[AdmissionToken]:
        """Every token, oldest first."""
        return sorted(self.tokens.values(), key=lambda t: (t.created, t.token_id))

    def credential_ok(self, node: str, presented_hash: str) -> bool:
        """True when ``presented_hash`` is the hash of ``node``'s current credential (constant time)
        and the join token that issued it is not revoked."""
        cred = self.credentials.get(node)
        matches = secret_matches(cred.secret_hash if cred else "", presented_hash)
        if not matches or cred is None:
            return False
        token = self.tokens.get(cred.token_id)
        return token is None or not token.revoked

    # ------------------------------------------------------------------ commands

    def _apply_CreateAdmissionToken(self, cmd: CreateAdmissionToken) -> Any:
        if len(cmd.token_id) != 6 or len(cmd.secret_hash) != 64:
            return Rejected("INVALID_ARGUMENT", "a join token needs a 6-digit id and a sha256 secret hash")
        if cmd.token_id in self.tokens:
            return Rejected("ALREADY_EXISTS", f"join token id {cmd.token_id} is taken")
        if cmd.uses_left is not None and cmd.uses_left < 1:
            return Rejected("INVALID_ARGUMENT", "a join token needs at least 1 use (or unlimited)")
        if cmd.expires and cmd.expires <= cmd.created:
            return Rejected("INVALID_ARGUMENT", "a join token must expire after it is created")
        token = AdmissionToken(
            token_id=cmd.token_id,
            secret_hash=cmd.secret_hash,
            created=cmd.created,
            expires=cmd.expires,
            uses_left=cmd.uses_left,
            creator=cmd.creator,
            description=cmd.description,
        )
        self.tokens[token.token_id] = token
        return token

    def _apply_RevokeAdmissionToken(self, cmd: RevokeAdmissionToken) -> Any:
        token = self.tokens.get(cmd.token_id)
        if token is None:
            return Rejected("NOT_FOUND", f"join token {cmd.token_id} does not exist (see spur token list)")
        if not token.revoked:
            token.revoked = True
            token.revoked_time = cmd.time
        return token

    def _apply_AdmitNode(self, cmd: AdmitNode) -> Any:
        token = self.tokens.get(cmd.token_id)
        # An unknown id and a wrong secret get the same answer: the id alone proves nothing.
        if token is None or not secret_matches(token.secret_hash, cmd.presented_hash):
            return Rejected(
                "PERMISSION_DENIED",
                f"node {cmd.node} refused: join token {cmd.token_id} is not valid for this cluster; "
                + _WHAT_TO_DO,
            )
        state = token_state(token, cmd.time)
        if state != ACTIVE:
            return Rejected(
                "PERMISSION_DENIED",
                f"node {cmd.node} refused: {_REFUSALS[state].format(id=token.token_id)}; {_WHAT_TO_DO}",
            )
        if len(cmd.credential_hash) != 64:
            return Rejected("INVALID_ARGUMENT", "a node credential needs a sha256 hash")
        if token.uses_left is not None:
            token.uses_left -= 1
        token.used += 1
        self.credentials[cmd.node] = NodeCredential(cmd.node, cmd.credential_hash, token.token_id, cmd.time)
        return True

    # ------------------------------------------------------------------ snapshots

    def snapshot(self) -> Any:
        return {
            "tokens": [to_plain(t) for t in self.list_tokens()],
            "credentials": [to_plain(self.credentials[n]) for n in sorted(self.credentials)],
        }

    def restore(self, body: Any | None) -> None:
        body = body or {}
        self.tokens = {t["token_id"]: from_plain(AdmissionToken, t) for t in body.get("tokens", [])}
        self.credentials = {
            cred["node"]: from_plain(NodeCredential, cred) for cred in body.get("credentials", [])
        }
