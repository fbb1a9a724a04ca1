"""Client side of one HTTP/2 connection (RFC 9113) for the gRPC channel; sans-I/O.

What :class:`spur.rpc.channel._Connection` speaks instead of ``h2.connection.H2Connection`` (h2's
``receive_data`` and ``send_headers`` were ~7% of a loaded controller, which calls its agents). Frames,
settings, flow control and errors are :class:`spur.rpc.h2_engine.H2Engine`'s (see its contracts); this
module adds what is the client's.

Contracts:

- :meth:`ClientH2Connection.initiate_connection` queues the client preface: the preface string, then our
  SETTINGS (:attr:`local_settings`, with ENABLE_PUSH 0). The peer's first frame must be SETTINGS.
- Streams open in order with :meth:`send_headers` on :meth:`get_next_available_stream_id` (odd ids;
  ``NoAvailableStreamIDError`` once they run out). Opening one more than the server's
  SETTINGS_MAX_CONCURRENT_STREAMS (``remote_settings.max_concurrent_streams``) raises
  ``TooManyStreamsError``; :attr:`open_outbound_streams` counts the streams open now. After the
  server's GOAWAY no stream opens (``ProtocolError``); those already open go on.
- On a stream: the server's first header block is ``ResponseReceived`` (1xx blocks before it are
  ``InformationalResponseReceived``); a second one must end the stream (``TrailersReceived``). DATA
  before the response headers, or a second block without END_STREAM, resets the stream
  (PROTOCOL_ERROR). HEADERS or PUSH_PROMISE opening a stream of the server's is a connection error
  (PROTOCOL_ERROR), as is any frame on a stream we never opened.
- A connection error raises :class:`ClientProtocolError`.
- Header blocks we send come from one :class:`spur.rpc.hpack_codec.Encoder`: headers repeated from call
  to call (the authority, a caller's ``authorization`` token, the method) are sent once and then
  referred to by index, so the server decodes each credential once per connection, not per call;
  ``grpc-timeout`` (new on every call) is never indexed. Its table follows the server's
  SETTINGS_HEADER_TABLE_SIZE, capped at 64 KiB.
"""

from __future__ import annotations

from collections.abc import Iterable

import h2.events
import h2.exceptions

from spur.rpc.h2_engine import (
    ENABLE_PUSH,
    END_STREAM,
    HEADER_TABLE_SIZE,
    MAX_STREAM_ID,
    PREFACE,
    PROTOCOL_ERROR,
    H2Engine,
    PeerProtocolError,
    ProtocolFault,
    Stream,
)
from spur.rpc.hpack_codec import Encoder

__all__ = ["ClientH2Connection", "ClientProtocolError"]

# Header values that differ on every call: indexing them would only push the others out of the table.
_UNINDEXED = frozenset({"grpc-timeout"})


class ClientProtocolError(PeerProtocolError):
    """The server broke the protocol; a GOAWAY with :attr:`error_code` is queued. The connection is over."""


class ClientH2Connection(H2Engine):
    """One client connection (see the module docstring)."""

    _error_class = ClientProtocolError
    _expects_preface = False

    def __init__(self, local_settings: dict[int, int] | None = None) -> None:
        """``local_settings``: our SETTINGS (code -> value) beyond HTTP/2's defaults."""
        super().__init__(local_settings)
        self._encoder = Encoder(unindexed=_UNINDEXED)

    def initiate_connection(self) -> None:
        """Queue the client preface: the preface string and our SETTINGS (push disabled)."""
        self._out += PREFACE
        values = dict(self.local_settings.values)
        values[ENABLE_PUSH] = 0
        self._queue_settings(values)

    @property
    def open_outbound_streams(self) -> int:
        """Streams open now (every stream of a client is outbound)."""
        return len(self.streams)

    def get_next_available_stream_id(self) -> int:
        """The id :meth:`send_headers` opens next (unchanged until it does)."""
        stream_id = self._last_stream_id + 2 if self._last_stream_id else 1
        if stream_id > MAX_STREAM_ID:
            raise h2.exceptions.NoAvailableStreamIDError("no stream ids left on this connection")
        return stream_id

    def _goaway_last_stream_id(self) -> int:
        return 0  # the server opens no streams

    def _encode(self, headers: Iterable[tuple[str, str]]) -> bytes:
        return self._encoder.encode(headers)

    def _new_outbound_stream(self, stream_id: int) -> Stream:
        if stream_id <= self._last_stream_id:
            raise h2.exceptions.StreamClosedError(stream_id)
        if not stream_id & 1 or stream_id > MAX_STREAM_ID:
            raise h2.exceptions.ProtocolError(f"a client cannot open stream {stream_id}")
        if self._goaway_received:
            raise h2.exceptions.ProtocolError("the server sent GOAWAY: no new streams")
        limit = self.remote_settings.max_concurrent_streams
        if len(self.streams) >= limit:
            raise h2.exceptions.TooManyStreamsError(f"the server allows {limit} concurrent streams")
        return self._new_stream(stream_id, headers_received=False)

    def _apply_remote_setting(self, code: int, value: int) -> int | None:
        old = super()._apply_remote_setting(code, value)
        if code == HEADER_TABLE_SIZE:
            self._encoder.set_max_table_size(value)
        return old

    def _on_idle_block(self, stream_id: int, flags: int, block: bytes, events: list[h2.events.Event]) -> None:
        raise ProtocolFault(PROTOCOL_ERROR, f"HEADERS on stream {stream_id}, which we never opened")

    def _on_stream_block(
        self, stream: Stream, flags: int, headers: list[tuple[bytes, bytes]], events: list[h2.events.Event]
    ) -> None:
        if stream.headers_received:
            self._on_trailers(stream, flags, headers, events)
            return
        if _informational(headers):
            if flags & END_STREAM:
                self._stream_error(stream.stream_id, PROTOCOL_ERROR, events)
                return
            events.append(
                h2.events.InformationalResponseReceived(stream_id=stream.stream_id, headers=headers)
            )
            return
        stream.headers_received = True
        response = h2.events.ResponseReceived(stream_id=stream.stream_id, headers=headers)
        events.append(response)
        if flags & END_STREAM:
            response.stream_ended = self._end_remote(stream, events)


def _informational(headers: list[tuple[bytes, bytes]]) -> bool:
    """Whether the block's ``:status`` (among the leading pseudo-headers) is 1xx."""
    for name, value in headers:
        if name == b":status":
            return value[:1] == b"1"
        if name[:1] != b":":
            return False
    return False
