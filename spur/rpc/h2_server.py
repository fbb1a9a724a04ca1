"""Server side of one HTTP/2 connection (RFC 9113) for the gRPC server; sans-I/O.

What :class:`spur.rpc.server._ServerConnection` speaks instead of ``h2.connection.H2Connection``: under
load the pure-Python h2 stack (hyperframe objects, stream state machines, hpack) was the largest
per-call CPU cost of the controller. Frames, settings, flow control and errors are
:class:`spur.rpc.h2_engine.H2Engine`'s (see its contracts); this module adds what is the server's.

Contracts:

- :meth:`ServerH2Connection.initiate_connection` queues our SETTINGS (the server's preface); the peer's
  bytes must begin with the client preface string, then SETTINGS.
- A client's HEADERS on a new odd stream is ``RequestReceived`` (with ``stream_ended`` when it carries
  END_STREAM); a second block must end the stream (``TrailersReceived``). A stream beyond our
  SETTINGS_MAX_CONCURRENT_STREAMS is refused (RST_STREAM REFUSED_STREAM, no event). An even stream, or a
  stream id lower than one already used, is a connection error.
- :meth:`send_headers` only answers open streams (a server opens none: no push).
- A connection error raises :class:`ServerProtocolError`.
- Header blocks we send are HPACK literals (:func:`encode_block`, stateless; small ones are cached by
  value), so the peer's SETTINGS_HEADER_TABLE_SIZE never matters to us.
"""

from __future__ import annotations

from collections.abc import Iterable

import h2.events
import h2.exceptions

from spur.rpc.h2_engine import (
    ENABLE_PUSH,
    END_STREAM,
    PROTOCOL_ERROR,
    REFUSED_STREAM,
    H2Engine,
    PeerProtocolError,
    ProtocolFault,
    Stream,
)
from spur.rpc.hpack_codec import encode_block

__all__ = ["ServerH2Connection", "ServerProtocolError"]


class ServerProtocolError(PeerProtocolError):
    """The client broke the protocol; a GOAWAY with :attr:`error_code` is queued. The connection is over."""


# Header blocks already encoded (a server sends the same few: response headers, "grpc-status: 0");
# cleared when full, so unusual blocks (error messages) cannot grow it.
_BLOCKS: dict[tuple[tuple[str, str], ...], bytes] = {}
_BLOCKS_MAX = 256
_BLOCK_CACHED_MAX = 512  # bytes: larger blocks are encoded every time


def _encoded(headers: tuple[tuple[str, str], ...]) -> bytes:
    """``encode_block(headers)``, from the cache when it was encoded before."""
    block = _BLOCKS.get(headers)
    if block is None:
        block = encode_block(list(headers))
        if len(block) <= _BLOCK_CACHED_MAX:
            if len(_BLOCKS) >= _BLOCKS_MAX:
                _BLOCKS.clear()
            _BLOCKS[headers] = block
    return block


class ServerH2Connection(H2Engine):
    """One server connection (see the module docstring)."""

    _error_class = ServerProtocolError
    _expects_preface = True

    def initiate_connection(self) -> None:
        """Queue our SETTINGS (the server's connection preface) with :attr:`local_settings`."""
        values = dict(self.local_settings.values)
        values.pop(ENABLE_PUSH, None)  # a server must not send it
        self._queue_settings(values)

    def _encode(self, headers: Iterable[tuple[str, str]]) -> bytes:
        return _encoded(tuple(headers))

    def _new_outbound_stream(self, stream_id: int) -> Stream:
        raise h2.exceptions.StreamClosedError(stream_id)

    def _on_idle_block(self, stream_id: int, flags: int, block: bytes, events: list[h2.events.Event]) -> None:
        """A new request (or a protocol error)."""
        if not stream_id & 1:
            raise ProtocolFault(PROTOCOL_ERROR, f"client opened even stream {stream_id}")
        headers = self._decode(block)
        if len(self.streams) >= self._max_streams:
            self._last_stream_id = stream_id
            self._queue_reset(stream_id, REFUSED_STREAM)
            return
        stream = self._new_stream(stream_id, headers_received=True)
        request = h2.events.RequestReceived(stream_id=stream_id, headers=headers)
        events.append(request)
        if flags & END_STREAM:
            request.stream_ended = self._end_remote(stream, events)

    def _on_stream_block(
        self, stream: Stream, flags: int, headers: list[tuple[bytes, bytes]], events: list[h2.events.Event]
    ) -> None:
        self._on_trailers(stream, flags, headers, events)
