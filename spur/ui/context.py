"""What a page reads through: the signed-in user's service calls (the CLI's rules) and a few facts."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from spur.ui.samples import Sample, SampleRing
from spur.ui.sessions import Session

__all__ = ["Caller", "ViewContext"]


class Caller(Protocol):
    """Calls a service method as ``session``'s user: the auth interceptor, then the method (RestError)."""

    async def call(self, session: Session, service: str, method: str, request: Any) -> Any: ...


@dataclass
class ViewContext:
    """One page load: who asks, with which query, through what."""

    caller: Caller
    session: Session
    args: Mapping[str, str]
    cluster_name: str
    now: float
    ring: SampleRing
    current_sample: Sample

    async def call(self, method: str, request: Any) -> Any:
        """A ControllerService call as the signed-in user."""
        return await self.caller.call(self.session, "controller", method, request)

    async def acct_call(self, method: str, request: Any) -> Any:
        """An Accounting service call (sshare, sacctmgr show) as the signed-in user."""
        return await self.caller.call(self.session, "accounting", method, request)
