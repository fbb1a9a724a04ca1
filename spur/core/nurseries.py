"""A nursery for background helper tasks that hands the body's own exception back unwrapped.

Trio wraps everything leaving a nursery in an ExceptionGroup. Where the nursery only runs helpers
(connection readers, keepalives) and the interesting error is the caller's own, callers should see
``RpcError`` or ``CliError`` itself, not a group of one.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio


@asynccontextmanager
async def helper_nursery() -> AsyncIterator[trio.Nursery]:
    try:
        async with trio.open_nursery() as nursery:
            yield nursery
    except BaseExceptionGroup as group:
        if len(group.exceptions) == 1:
            exc = group.exceptions[0]
            raise exc.with_traceback(exc.__traceback__) from exc.__cause__
        raise
