"""Long-lived gRPC channels to other daemons (agents, peer controllers), one per address."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import trio

from spur.core.nurseries import helper_nursery

if TYPE_CHECKING:
    from spur.rpc.channel import Channel
    from spur.rpc.stub import Stub
    from spur.rpc.tls import ClientTLS


class ChannelPool:
    """One lazily connected channel per address, closed with the pool.

    Each channel lives in a task of the pool's own nursery, so callers in any task may ask for a
    stub while the channel's nursery stays correctly nested.
    """

    def __init__(
        self,
        make_stub: Callable[[Channel], Stub],
        *,
        connect_timeout: float = 3.0,
        metadata_provider: Callable[[], dict[str, str]] | None = None,
        tls: ClientTLS | None = None,
    ) -> None:
        """``tls``: spur.rpc.tls.ClientTLS for every channel (None: plaintext)."""
        self._make_stub = make_stub
        self._tls = tls
        self._metadata_provider = metadata_provider
        self._connect_timeout = connect_timeout
        self._stubs: dict[str, Stub] = {}
        self._lock = trio.Lock()
        self._nursery: trio.Nursery | None = None
        self._cm = helper_nursery()

    async def __aenter__(self) -> ChannelPool:
        self._nursery = await self._cm.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> bool | None:
        assert self._nursery is not None
        self._nursery.cancel_scope.cancel()
        return await self._cm.__aexit__(*exc)

    async def _hold(
        self, target: str, *, task_status: trio.TaskStatus[Stub] = trio.TASK_STATUS_IGNORED
    ) -> None:
        from spur.rpc.channel import open_channel

        async with open_channel(
            target,
            connect_timeout=self._connect_timeout,
            metadata_provider=self._metadata_provider,
            tls=self._tls,
        ) as channel:
            task_status.started(self._make_stub(channel))
            await trio.sleep_forever()

    async def stub(self, address: str, port: int | None = None) -> Stub:
        key = address if port is None else f"{address}:{port}"
        async with self._lock:
            if key not in self._stubs:
                assert self._nursery is not None
                self._stubs[key] = await self._nursery.start(self._hold, key)
        return self._stubs[key]


def agent_pool(
    metadata_provider: Callable[[], dict[str, str]] | None = None, *, tls: ClientTLS | None = None
) -> ChannelPool:
    """Channels to agents; ``metadata_provider`` signs every call (the controller's daemon token),
    ``tls`` (spur.rpc.tls.ClientTLS) presents the node certificate."""
    from spur.rpc.stub import agent_stub

    return ChannelPool(agent_stub, metadata_provider=metadata_provider, tls=tls)


def controller_pool(*, tls: ClientTLS | None = None) -> ChannelPool:
    from spur.rpc.stub import controller_stub

    return ChannelPool(controller_stub, tls=tls)
