"""Client side of one HTTP/2 connection (RFC 9113) for sequential unary gRPC calls; sans-I/O.

What :class:`spur.rpc.blocking.BlockingChannel` speaks instead of the ``h2`` package: a CLI process
makes one or two calls and exits, and importing h2 (with hpack, logging and dataclasses) was a
quarter of a query command's start-up. Only what a client of unary calls needs is here; everything
else a server may send is handled as RFC 9113 requires (SETTINGS acknowledged, PING answered,
PRIORITY and unknown frames ignored, PUSH_PROMISE refused since we disable push).

Contracts:

- ``H2Connection()`` queues the preface, our SETTINGS (push off, large windows and frames) and a
  connection WINDOW_UPDATE; :meth:`data_to_send` hands out (and clears) every byte queued so far.
- :meth:`start_request` opens the next stream with a header block (:func:`spur.rpc.hpack_codec.
  encode_block`); :meth:`send_data` queues as much of a body as the peer's flow-control windows and
  frame size allow and returns what is left (call it again after :meth:`receive_data`).
- :meth:`receive_data` parses whatever bytes arrived (any split) and returns the events of complete
  frames: :class:`Headers` (a decoded block; ``end_stream`` set on trailers), :class:`Data`,
  :class:`Reset` and :class:`GoAway`. Received DATA is credited back to the peer as it arrives.
- A peer that breaks the protocol raises :class:`H2Error`; the connection is then unusable.
"""

from __future__ import annotations

import struct
from collections import namedtuple

from spur.rpc.hpack_codec import Decoder, HpackError, encode_block

__all__ = ["Data", "GoAway", "H2Connection", "H2Error", "Headers", "Reset"]

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
_FRAME = struct.Struct(">I B I")  # length (24 bits, packed with the type), flags, stream id
DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = range(10)
END_STREAM, ACK, END_HEADERS, PADDED, PRIORITY_FLAG = 0x1, 0x1, 0x4, 0x8, 0x20
SETTINGS_ENABLE_PUSH, SETTINGS_INITIAL_WINDOW_SIZE, SETTINGS_MAX_FRAME_SIZE = 0x2, 0x4, 0x5
DEFAULT_WINDOW = 65_535
DEFAULT_FRAME = 16_384
MAX_WINDOW = 2**31 - 1
# What we let the server send in one frame: big DATA frames mean fewer frames for a large reply.
OUR_MAX_FRAME = 1 << 20


class H2Error(Exception):
    """The peer broke the HTTP/2 protocol (or its header compression)."""


# Events (collections.namedtuple rather than typing.NamedTuple: importing typing is a CLI start-up cost).
class Headers(namedtuple("Headers", "stream_id headers end_stream")):
    """HEADERS on ``stream_id`` (int): ``headers`` a list of (name, value) bytes pairs; ``end_stream`` bool."""

    __slots__ = ()


class Data(namedtuple("Data", "stream_id data end_stream")):
    """DATA on ``stream_id`` (int): ``data`` bytes; ``end_stream`` bool."""

    __slots__ = ()


class Reset(namedtuple("Reset", "stream_id error_code")):
    """RST_STREAM of ``stream_id`` with ``error_code`` (ints)."""

    __slots__ = ()


class GoAway(namedtuple("GoAway", "last_stream_id error_code")):
    """GOAWAY: ``last_stream_id`` and ``error_code`` (ints)."""

    __slots__ = ()


Event = Headers | Data | Reset | GoAway


def _frame(kind: int, flags: int, stream_id: int, payload: bytes = b"") -> bytes:
    return _FRAME.pack((len(payload) << 8) | kind, flags, stream_id) + payload


class H2Connection:
    """One client connection (see the module docstring). The CLI uses its streams one after another;
    a pipelining client may have several open (the peer's MAX_CONCURRENT_STREAMS is its to respect)
    and tells the connection when each ends (:meth:`forget`)."""

    def __init__(self) -> None:
        settings = struct.pack(
            ">HIHIHI",
            SETTINGS_ENABLE_PUSH, 0,
            SETTINGS_INITIAL_WINDOW_SIZE, MAX_WINDOW,
            SETTINGS_MAX_FRAME_SIZE, OUR_MAX_FRAME,
        )  # fmt: skip
        self._out = bytearray(PREFACE)
        self._out += _frame(SETTINGS, 0, 0, settings)
        self._out += _frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", MAX_WINDOW - DEFAULT_WINDOW))
        self._in = bytearray()
        self._next_stream = 1
        self._decoder = Decoder()
        self._block: tuple[int, int, bytearray] | None = None  # (stream, flags, payload) awaiting CONTINUATION
        self._recv_unacked = 0  # DATA bytes received and not yet credited back on the connection
        self.send_window = DEFAULT_WINDOW  # the peer's connection window for what we send
        self.peer_initial_window = DEFAULT_WINDOW
        self.peer_max_frame = DEFAULT_FRAME
        self.stream_windows: dict[int, int] = {}

    def data_to_send(self) -> bytes:
        out = bytes(self._out)
        self._out.clear()
        return out

    def start_request(self, headers: list[tuple[str, str]], *, end_stream: bool = False) -> int:
        """Queue HEADERS (+ CONTINUATION when the block is larger than a frame) on a new stream; its id."""
        return self.start_encoded(encode_block(headers), end_stream=end_stream)

    def start_encoded(self, block: bytes, *, end_stream: bool = False) -> int:
        """:meth:`start_request` with the header block already encoded (:func:`encode_block` never
        uses the dynamic table, so one block may open any number of streams)."""
        stream_id = self._next_stream
        self._next_stream += 2
        self.stream_windows[stream_id] = self.peer_initial_window
        first, rest = block[: self.peer_max_frame], block[self.peer_max_frame :]
        flags = (END_STREAM if end_stream else 0) | (0 if rest else END_HEADERS)
        self._out += _frame(HEADERS, flags, stream_id, first)
        while rest:
            chunk, rest = rest[: self.peer_max_frame], rest[self.peer_max_frame :]
            self._out += _frame(CONTINUATION, 0 if rest else END_HEADERS, stream_id, chunk)
        return stream_id

    def send_data(self, stream_id: int, data: memoryview | bytes, *, end_stream: bool = True) -> memoryview:
        """Queue DATA frames as far as the windows allow (END_STREAM on the last one when ``end_stream``
        and everything fit); the part of ``data`` not yet queued."""
        view = memoryview(data)
        while True:
            room = min(self.send_window, self.stream_windows.get(stream_id, 0), self.peer_max_frame)
            if view and room <= 0:
                return view
            chunk, view = view[:room], view[room:]
            last = not view
            self._out += _frame(DATA, END_STREAM if (last and end_stream) else 0, stream_id, bytes(chunk))
            self.send_window -= len(chunk)
            self.stream_windows[stream_id] -= len(chunk)
            if last:
                return view

    def forget(self, stream_id: int) -> None:
        """Drop a finished stream's bookkeeping (a client with many streams calls it as each ends)."""
        self.stream_windows.pop(stream_id, None)

    def close(self) -> None:
        """Queue GOAWAY (NO_ERROR)."""
        last_stream = max(0, self._next_stream - 2)
        self._out += _frame(GOAWAY, 0, 0, struct.pack(">II", last_stream, 0))

    # ------------------------------------------------------------------ receiving

    def receive_data(self, data: bytes) -> list[Event]:
        self._in += data
        events: list[Event] = []
        while len(self._in) >= 9:
            head, flags, stream_id = _FRAME.unpack_from(self._in)
            length, kind = head >> 8, head & 0xFF
            stream_id &= 0x7FFFFFFF
            if length > OUR_MAX_FRAME:
                raise H2Error(f"frame of {length} bytes exceeds our maximum frame size")
            if len(self._in) < 9 + length:
                break
            payload = bytes(self._in[9 : 9 + length])
            del self._in[: 9 + length]
            if self._block is not None and kind != CONTINUATION:
                raise H2Error("header block interrupted by another frame")
            self._on_frame(kind, flags, stream_id, payload, events)
        return events

    def _on_frame(self, kind: int, flags: int, stream_id: int, payload: bytes, events: list[Event]) -> None:
        if kind == DATA:
            self._credit(len(payload), stream_id)
            body = _unpad(payload, flags)
            events.append(Data(stream_id, body, bool(flags & END_STREAM)))
        elif kind == HEADERS:
            body = _unpad(payload, flags)
            if flags & PRIORITY_FLAG:
                body = body[5:]
            if flags & END_HEADERS:
                events.append(self._headers(stream_id, body, flags))
            else:
                self._block = (stream_id, flags, bytearray(body))
        elif kind == CONTINUATION:
            if self._block is None or self._block[0] != stream_id:
                raise H2Error("CONTINUATION without a header block in progress")
            self._block[2].extend(payload)
            if flags & END_HEADERS:
                sid, first_flags, block = self._block
                self._block = None
                events.append(self._headers(sid, bytes(block), first_flags))
        elif kind == RST_STREAM:
            if len(payload) != 4:
                raise H2Error("RST_STREAM frame of the wrong size")
            events.append(Reset(stream_id, struct.unpack(">I", payload)[0]))
        elif kind == SETTINGS:
            if flags & ACK:
                return
            if len(payload) % 6:
                raise H2Error("SETTINGS frame of the wrong size")
            for i in range(0, len(payload), 6):
                key, value = struct.unpack_from(">HI", payload, i)
                if key == SETTINGS_INITIAL_WINDOW_SIZE:
                    if value > MAX_WINDOW:
                        raise H2Error("initial window size too large")
                    delta = value - self.peer_initial_window
                    self.peer_initial_window = value
                    for sid in self.stream_windows:
                        self.stream_windows[sid] += delta
                elif key == SETTINGS_MAX_FRAME_SIZE:
                    if not DEFAULT_FRAME <= value <= 2**24 - 1:
                        raise H2Error("invalid max frame size")
                    self.peer_max_frame = value
            self._out += _frame(SETTINGS, ACK, 0)
        elif kind == PING:
            if len(payload) != 8:
                raise H2Error("PING frame of the wrong size")
            if not flags & ACK:
                self._out += _frame(PING, ACK, 0, payload)
        elif kind == GOAWAY:
            if len(payload) < 8:
                raise H2Error("GOAWAY frame too short")
            last, code = struct.unpack_from(">II", payload)
            events.append(GoAway(last & 0x7FFFFFFF, code))
        elif kind == WINDOW_UPDATE:
            if len(payload) != 4:
                raise H2Error("WINDOW_UPDATE frame of the wrong size")
            increment = struct.unpack(">I", payload)[0] & 0x7FFFFFFF
            if stream_id == 0:
                self.send_window += increment
            elif stream_id in self.stream_windows:
                self.stream_windows[stream_id] += increment
        elif kind == PUSH_PROMISE:
            raise H2Error("PUSH_PROMISE received although push is disabled")
        # PRIORITY and unknown frame types are ignored (RFC 9113 sections 5.5, 6.3).

    def _headers(self, stream_id: int, block: bytes, flags: int) -> Headers:
        try:
            headers = self._decoder.decode(block)
        except (HpackError, IndexError) as exc:
            raise H2Error(f"undecodable header block: {exc}") from None
        return Headers(stream_id, headers, bool(flags & END_STREAM))

    def _credit(self, length: int, stream_id: int) -> None:
        """Give back received DATA: the connection window in large steps (our stream windows start at
        2^31-1, more than one reply may carry)."""
        self._recv_unacked += length
        if self._recv_unacked >= MAX_WINDOW // 2:
            self._out += _frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", self._recv_unacked))
            self._recv_unacked = 0


def _unpad(payload: bytes, flags: int) -> bytes:
    if not flags & PADDED:
        return payload
    if not payload or payload[0] >= len(payload):
        raise H2Error("invalid padding")
    return payload[1 : len(payload) - payload[0]]
