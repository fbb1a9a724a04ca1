"""spurd learns the token deny-list from the controllers, so it refuses revoked tokens too.

Every ``interval`` seconds the agent asks a controller for ``Auth/ListRevoked`` with the version it
holds; an unchanged list costs one tiny answer, a changed one replaces the agent's copy
(:class:`spur.auth.denylist.LearntDenyList`). A revoked token is therefore refused by an agent at
most ``interval`` seconds (plus a failed poll's retry) after ``scontrol token revoke``. A failed poll
is logged at most once per failure streak and retried at the next interval; the copy is kept.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from spur.auth.denylist import LearntDenyList
from spur.rpc.proto import auth_pb2
from spur.rpc.status import RpcError

__all__ = ["DEFAULT_POLL_SECS", "follow_revocations", "poll_once"]

log = logging.getLogger("spur.agent.revocations")

DEFAULT_POLL_SECS = 10.0
AUTH_SERVICE = auth_pb2.DESCRIPTOR.services_by_name["Auth"]

Call = Callable[..., Awaitable[Any]]


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
    *,
    interval: float = DEFAULT_POLL_SECS,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Poll forever (see the module docstring)."""
    task_status.started()
    failing = False
    while True:
        try:
            await poll_once(call, denylist)
            failing = False
        except (RpcError, OSError) as exc:
            if not failing:
                log.warning("cannot fetch the token deny-list from the controllers (%s); retrying", exc)
            failing = True
        await trio.sleep(interval)
