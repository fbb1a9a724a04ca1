"""What the REST surface needs of the process that serves it (spurctld's ``Controller``).

The REST modules type their controller as :class:`RestHost`, so they depend on these two members
only, not on spur/controller; optional parts (``accounting_backend``, ``metrics``, ``grpc_server``)
are looked up with ``getattr`` where they are used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from spur.config import SpurConfig
    from spur.core.clock import Clock

__all__ = ["RestHost"]


class RestHost(Protocol):
    @property
    def cfg(self) -> SpurConfig: ...

    @property
    def clock(self) -> Clock: ...
