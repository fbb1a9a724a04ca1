"""spurd learns the token deny-list from the controllers, so it refuses revoked tokens too.

Every heartbeat answer carries the deny-list's version (``HeartbeatResponse.revocation_version``, the
replicated ``revocation`` domain's count of revocations). The agent fetches the list
(``Auth/ListRevoked`` with the version it holds) once at start and then only when a heartbeat names a
version other than its own, so a cluster without revocations pays nothing beyond the heartbeats it
already sends. A revoked token is therefore refused by an agent at most one heartbeat interval
(``controller.heartbeat_interval_secs``, 30 s by default) after ``scontrol token revoke``, plus one
retry interval when the fetch fails. A failed fetch is logged once per failure streak and retried
every ``retry`` seconds; the copy in force is kept meanwhile.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from spur.auth.denylist import LearntDenyList
from spur.rpc.proto import auth_pb2
from spur.rpc.status import RpcError

__all__ = ["DEFAULT_RETRY_SECS", "VersionHint", "follow_revocations", "poll_once"]

log = logging.getLogger("spur.agent.revocations")

DEFAULT_RETRY_SECS = 10.0
AUTH_SERVICE = auth_pb2.DESCRIPTOR.services_by_name["Auth"]

Call = Callable[..., Awaitable[Any]]


class VersionHint:
    """The deny-list version the controllers last announced (from heartbeat answers)."""

    def __init__(self) -> None:
        self.version = 0
        self._changed = trio.Event()

    def announce(self, version: int) -> None:
        """Record a version a controller named (synchronous: called from the heartbeat loop)."""
        if version != self.version:
            self.version = version
            self._changed.set()
            self._changed = trio.Event()

    async def wait_other_than(self, *held: int) -> None:
        """Return once the announced version is none of ``held``."""
        while self.version in held:
            await self._changed.wait()


async def poll_once(call: Call, denylist: LearntDenyList) -> bool:
    """Ask once; True when the list changed. Raises RpcError/OSError when no controller answers."""
    answer = await call(
        "ListRevoked", auth_pb2.ListRevokedRequest(since_version=denylist.version), service=AUTH_SERVICE
    )
    if not answer.changed:
        return False
    denylist.replace(answer.version, {t.token_id: t.expires_at for t in answer.tokens})
    log.info("token deny-list updated to version %d (%d revoked tokens)", answer.version, len(denylist))
    return True


async def follow_revocations(
    call: Call,
    denylist: LearntDenyList,
    hint: VersionHint,
    *,
    retry: float = DEFAULT_RETRY_SECS,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Fetch at start, then whenever ``hint`` names another version (see the module docstring)."""
    task_status.started()
    failing = False
    fetched = False
    acted_on = 0  # the announced version the last successful fetch answered
    while True:
        if fetched:
            # A heartbeat from before the fetch may name an older version: not a reason to ask again.
            await hint.wait_other_than(denylist.version, acted_on)
        announced = hint.version
        try:
            await poll_once(call, denylist)
            fetched = True
            acted_on = announced
            failing = False
        except (RpcError, OSError) as exc:
            if not failing:
                log.warning("cannot fetch the token deny-list from the controllers (%s); retrying", exc)
            failing = True
            await trio.sleep(retry)
