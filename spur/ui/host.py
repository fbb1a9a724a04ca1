"""What the dashboard needs of the process that serves it (spurctld's ``Controller``): the REST
surface's :class:`~spur.rest.host.RestHost`, plus read access to the replicated state, the token
verifier and the change notification its live pages wait on."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from spur.rest.host import RestHost

if TYPE_CHECKING:
    import trio

    from spur.auth.guard import ServerAuth
    from spur.state.machine import ClusterState

__all__ = ["UiHost"]


class UiHost(RestHost, Protocol):
    @property
    def state(self) -> ClusterState: ...

    @property
    def auth(self) -> ServerAuth: ...

    def change_event(self) -> trio.Event:
        """The event the next change of the state sets (taken before a read, waited on after it)."""
        ...
