"""What both roles of an HTTP/2 connection (RFC 9113) share: frames, settings, flow control; sans-I/O.

:class:`H2Engine` is the base of :class:`spur.rpc.h2_server.ServerH2Connection` and
:class:`spur.rpc.h2_client.ClientH2Connection`, the engines :class:`spur.rpc.transport.H2Transport` runs
on instead of ``h2.connection.H2Connection``. It parses frames straight from the bytes read and keeps a
dict of small stream records; a subclass adds what differs by role (the preface, how a stream opens, what
a header block on a stream means, how header blocks are encoded).

Contracts (both roles):

- The part of h2's ``H2Connection`` interface the transport uses, with the same names, arguments and
  exceptions: :attr:`local_settings` (set then ``acknowledge()`` before ``initiate_connection``),
  :attr:`remote_settings` (the peer's values in force, read as attributes: ``max_concurrent_streams``,
  ``initial_window_size``, ...), :meth:`update_settings`, :meth:`increment_flow_control_window`,
  :meth:`receive_data`, :meth:`data_to_send`, :meth:`send_headers`, :meth:`send_data`,
  :meth:`reset_stream`, :meth:`ping`, :meth:`close_connection`, :meth:`local_flow_control_window`,
  :attr:`max_outbound_frame_size` and :attr:`streams` (the open streams only: a closed stream is
  removed at once).
- :meth:`receive_data` returns ``h2.events`` objects. Common to both roles: DataReceived, StreamEnded,
  StreamReset, WindowUpdated, RemoteSettingsChanged, PingAckReceived, ConnectionTerminated,
  TrailersReceived; the subclass adds the events that open or answer a stream. A PING from the peer is
  answered with its ACK (no event).
- A peer that breaks the protocol gets a GOAWAY (queued) and :meth:`receive_data` raises the role's
  :class:`PeerProtocolError` (an ``h2.exceptions.ProtocolError`` carrying the GOAWAY's code); stream
  errors queue RST_STREAM and report ``StreamReset`` (``remote_reset`` False). Methods called on a
  stream that is not open raise ``h2.exceptions.StreamClosedError``; sending more DATA than the peer's
  windows allow raises ``h2.exceptions.FlowControlError``; anything sent after our GOAWAY raises
  ``ProtocolError``.
- Memory a peer can make us hold is bounded: unparsed bytes by one frame (our max frame size) plus one
  read, a header block being continued by the max header list size, remembered reset streams by
  ``_RESET_MEMORY``, the peer's settings by the settings we know (others are ignored), and the control
  frames its frames make us queue (acknowledgements, resets, window updates) by ``MAX_QUEUED_CONTROL``
  while the transport has not taken them: past that, the connection ends with ENHANCE_YOUR_CALM. h2
  has no such bound.
- Our settings take effect as soon as they are sent when they loosen a limit, and when acknowledged
  when they tighten one. The peer's take effect when received (and are acknowledged at once).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

import h2.errors
import h2.events
import h2.exceptions
import h2.settings

from spur.rpc.hpack_codec import Decoder, HpackError

__all__ = [
    "H2Engine",
    "LocalSettings",
    "PeerProtocolError",
    "ProtocolFault",
    "RemoteSettings",
    "Stream",
    "PREFACE",
]

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
_HEAD = struct.Struct(">IBI")  # length (24 bits) packed with the type, flags, stream id
_U32 = struct.Struct(">I")
_SETTING = struct.Struct(">HI")
_GOAWAY = struct.Struct(">II")
DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = (
    range(10)
)
END_STREAM, ACK, END_HEADERS, PADDED, PRIORITY_FLAG = 0x1, 0x1, 0x4, 0x8, 0x20
HEADER_TABLE_SIZE, ENABLE_PUSH, MAX_CONCURRENT_STREAMS = 0x1, 0x2, 0x3
INITIAL_WINDOW_SIZE, MAX_FRAME_SIZE, MAX_HEADER_LIST_SIZE = 0x4, 0x5, 0x6
NO_ERROR, PROTOCOL_ERROR, FLOW_CONTROL_ERROR, STREAM_CLOSED, FRAME_SIZE_ERROR = 0x0, 0x1, 0x3, 0x5, 0x6
REFUSED_STREAM, CANCEL, COMPRESSION_ERROR, ENHANCE_YOUR_CALM = 0x7, 0x8, 0x9, 0xB
DEFAULT_WINDOW = 65_535
DEFAULT_FRAME = 16_384
MAX_WINDOW = 2**31 - 1
MAX_STREAM_ID = 2**31 - 1
_MAX_FRAME_LIMIT = 2**24 - 1
# Streams we reset whose in-flight frames are still ignored (the oldest are forgotten past this).
_RESET_MEMORY = 4096
# Control frames (PING and SETTINGS acknowledgements, RST_STREAM, WINDOW_UPDATE) that may wait in the
# output queue, not yet taken by data_to_send: a peer that keeps sending frames that call for one and
# never reads what we send would grow the queue without bound (the "ping flood" and "settings flood"
# of CVE-2019-9512 and CVE-2019-9515). Past this the connection ends with ENHANCE_YOUR_CALM.
MAX_QUEUED_CONTROL = 10_000
_DEFAULTS = {
    HEADER_TABLE_SIZE: 4096,
    ENABLE_PUSH: 1,
    MAX_CONCURRENT_STREAMS: 2**31 - 1,
    INITIAL_WINDOW_SIZE: DEFAULT_WINDOW,
    MAX_FRAME_SIZE: DEFAULT_FRAME,
    MAX_HEADER_LIST_SIZE: 2**31 - 1,
}


class PeerProtocolError(h2.exceptions.ProtocolError):
    """The peer broke the protocol; a GOAWAY with :attr:`error_code` is queued. The connection is over."""

    def __init__(self, message: str, error_code: int) -> None:
        super().__init__(message)
        self.error_code = _error_code(error_code)  # type: ignore[assignment]


class ProtocolFault(Exception):
    """Internal: a connection error found while parsing (code, message)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


class LocalSettings:
    """Our SETTINGS values, with h2's interface: ``settings[code] = value`` is pending until
    :meth:`acknowledge`; reading gives the value in force. The engine reads them when
    ``initiate_connection`` sends them; later changes go through :meth:`H2Engine.update_settings`."""

    __slots__ = ("values", "_pending")

    def __init__(self, initial_values: dict[int, int] | None = None) -> None:
        self.values: dict[int, int] = dict(initial_values or {})
        self._pending: dict[int, int] = {}

    def __getitem__(self, code: int) -> int:
        return self.values.get(code, _DEFAULTS.get(code, 0))

    def __setitem__(self, code: int, value: int) -> None:
        self._pending[code] = value

    def acknowledge(self) -> dict[int, int]:
        """Put the pending values in force; returns them."""
        applied, self._pending = self._pending, {}
        self.values.update(applied)
        return applied


class RemoteSettings:
    """The peer's SETTINGS in force (HTTP/2's defaults until it sends its own), read as h2's
    ``remote_settings`` attributes."""

    __slots__ = (
        "header_table_size",
        "enable_push",
        "max_concurrent_streams",
        "initial_window_size",
        "max_frame_size",
        "max_header_list_size",
    )
    _NAMES = {
        HEADER_TABLE_SIZE: "header_table_size",
        ENABLE_PUSH: "enable_push",
        MAX_CONCURRENT_STREAMS: "max_concurrent_streams",
        INITIAL_WINDOW_SIZE: "initial_window_size",
        MAX_FRAME_SIZE: "max_frame_size",
        MAX_HEADER_LIST_SIZE: "max_header_list_size",
    }

    def __init__(self) -> None:
        self.header_table_size = _DEFAULTS[HEADER_TABLE_SIZE]
        self.enable_push = _DEFAULTS[ENABLE_PUSH]
        self.max_concurrent_streams = _DEFAULTS[MAX_CONCURRENT_STREAMS]
        self.initial_window_size = _DEFAULTS[INITIAL_WINDOW_SIZE]
        self.max_frame_size = _DEFAULTS[MAX_FRAME_SIZE]
        self.max_header_list_size = _DEFAULTS[MAX_HEADER_LIST_SIZE]

    def __getitem__(self, code: int) -> int:
        value: int = getattr(self, self._NAMES[code])
        return value

    def set(self, code: int, value: int) -> int | None:
        """Store one setting; its previous value (None for a setting we do not know: not stored)."""
        name = self._NAMES.get(code)
        if name is None:
            return None
        old: int = getattr(self, name)
        setattr(self, name, value)
        return old


class Stream:
    """One open stream. ``send_window``: what we may still send; ``recv_window``: what the peer may
    still send (what we granted, less what it sent); ``headers_received``: the peer's first header
    block (request or final response) has arrived, so DATA may follow."""

    __slots__ = (
        "stream_id",
        "send_window",
        "recv_window",
        "remote_ended",
        "local_ended",
        "closed",
        "headers_received",
    )

    def __init__(self, stream_id: int, send_window: int, recv_window: int, headers_received: bool) -> None:
        self.stream_id = stream_id
        self.send_window = send_window
        self.recv_window = recv_window
        self.remote_ended = False
        self.local_ended = False
        self.closed = False
        self.headers_received = headers_received


def _frame(kind: int, flags: int, stream_id: int, payload: bytes = b"") -> bytes:
    return _HEAD.pack((len(payload) << 8) | kind, flags, stream_id) + payload


def _error_code(code: int) -> h2.errors.ErrorCodes | int:
    try:
        return h2.errors.ErrorCodes(code)
    except ValueError:
        return code


def _unpad(payload: bytes) -> bytes:
    """The content of a PADDED frame's payload (a padding longer than the frame is PROTOCOL_ERROR)."""
    if not payload or payload[0] >= len(payload):
        raise ProtocolFault(PROTOCOL_ERROR, "invalid padding")
    return payload[1 : len(payload) - payload[0]]


class H2Engine:
    """One HTTP/2 connection, either role (see the module docstring). Subclasses set
    :attr:`_error_class` and :attr:`_expects_preface` and implement :meth:`initiate_connection`,
    :meth:`_encode`, :meth:`_new_outbound_stream`, :meth:`_on_idle_block` and
    :meth:`_on_stream_block`."""

    _error_class: type[PeerProtocolError] = PeerProtocolError
    _expects_preface = False  # whether the peer's bytes begin with the client preface string

    def __init__(self, local_settings: dict[int, int] | None = None) -> None:
        """``local_settings``: our SETTINGS (code -> value) beyond HTTP/2's defaults."""
        self.local_settings = LocalSettings(local_settings)
        self.remote_settings = RemoteSettings()
        self.streams: dict[int, Stream] = {}
        self._out = bytearray()
        self._control_queued = 0  # control frames in _out (see MAX_QUEUED_CONTROL)
        self._in = bytearray()  # bytes of an incomplete frame
        self._preface_left = PREFACE if self._expects_preface else b""
        self._settings_seen = False  # the peer's first frame must be SETTINGS
        self._decoder = Decoder()
        self._block: tuple[int, int, bytearray] | None = None  # (stream, flags, block) awaiting CONTINUATION
        self._last_stream_id = 0  # highest stream opened (by the peer for a server, by us for a client)
        self._reset_ids: dict[int, None] = {}  # streams we reset recently, oldest first
        self._recv_window = DEFAULT_WINDOW  # connection: what the peer may still send
        self._send_window = DEFAULT_WINDOW  # connection: what we may still send
        self._discarded = 0  # DATA bytes dropped (and so to credit back) during one receive_data
        self._goaway_sent = False
        self._goaway_received = False
        self._unacked: list[dict[int, int]] = []  # SETTINGS we sent, oldest first
        # Our limits in force (see _apply_local_settings).
        self._initial_window = DEFAULT_WINDOW
        self._max_streams = _DEFAULTS[MAX_CONCURRENT_STREAMS]
        self._max_header_list = _DEFAULTS[MAX_HEADER_LIST_SIZE]
        self._max_frame = DEFAULT_FRAME
        self._handlers = {
            DATA: self._on_data,
            HEADERS: self._on_headers,
            PRIORITY: self._on_priority,
            RST_STREAM: self._on_rst_stream,
            SETTINGS: self._on_settings,
            PUSH_PROMISE: self._on_push_promise,
            PING: self._on_ping,
            GOAWAY: self._on_goaway,
            WINDOW_UPDATE: self._on_window_update,
            CONTINUATION: self._on_continuation,
        }

    # ------------------------------------------------------------------ role hooks

    def initiate_connection(self) -> None:
        """Queue this role's connection preface."""
        raise NotImplementedError

    def _encode(self, headers: Iterable[tuple[str, str]]) -> bytes:
        """The HPACK block of ``headers`` (called once the block is certain to be sent)."""
        raise NotImplementedError

    def _new_outbound_stream(self, stream_id: int) -> Stream:
        """``send_headers`` on a stream that is not open: open it, or raise."""
        raise NotImplementedError

    def _on_idle_block(self, stream_id: int, flags: int, block: bytes, events: list[h2.events.Event]) -> None:
        """A complete header block on a stream never opened (see :meth:`_is_idle`)."""
        raise NotImplementedError

    def _on_stream_block(
        self, stream: Stream, flags: int, headers: list[tuple[bytes, bytes]], events: list[h2.events.Event]
    ) -> None:
        """A complete header block on an open stream the peer has not ended."""
        raise NotImplementedError

    def _goaway_last_stream_id(self) -> int:
        """The last stream id our GOAWAY names by default: the highest the peer opened."""
        return self._last_stream_id

    # ------------------------------------------------------------------ settings

    @property
    def max_outbound_frame_size(self) -> int:
        """The largest frame payload the peer accepts."""
        return self.remote_settings.max_frame_size

    def update_settings(self, new_settings: dict[int, int]) -> None:
        """Send changed settings (see the module docstring for when they take effect)."""
        self._check_open()
        self._queue_settings({int(code): value for code, value in new_settings.items()})

    def _queue_settings(self, values: dict[int, int]) -> None:
        payload = b"".join(_SETTING.pack(code, value) for code, value in values.items())
        self._out += _frame(SETTINGS, 0, 0, payload)
        self._unacked.append(values)
        self._apply_local_settings()

    def _on_settings_ack(self) -> None:
        if not self._unacked:
            raise ProtocolFault(PROTOCOL_ERROR, "SETTINGS ACK without SETTINGS")
        self.local_settings.values.update(self._unacked.pop(0))
        self._apply_local_settings()

    def _effective(self, code: int) -> int:
        """The value we enforce: the most permissive of the acknowledged one and those in flight."""
        value = self.local_settings[code]
        for sent in self._unacked:
            value = max(value, sent.get(code, value))
        return value

    def _apply_local_settings(self) -> None:
        window = self._effective(INITIAL_WINDOW_SIZE)
        delta = window - self._initial_window
        if delta:
            self._initial_window = window
            for stream in self.streams.values():
                stream.recv_window += delta
        self._max_streams = self._effective(MAX_CONCURRENT_STREAMS)
        self._max_header_list = self._effective(MAX_HEADER_LIST_SIZE)
        self._max_frame = self._effective(MAX_FRAME_SIZE)
        self._decoder.max_allowed = self._effective(HEADER_TABLE_SIZE)

    # ------------------------------------------------------------------ sending

    def data_to_send(self, amount: int | None = None) -> bytes:
        """Every byte queued so far (or its first ``amount``), removed from the queue."""
        if amount is None or amount >= len(self._out):
            out = bytes(self._out)
            self._out.clear()
            self._control_queued = 0
            return out
        out = bytes(self._out[:amount])
        del self._out[:amount]
        return out

    def _queue_control(self, kind: int, flags: int, stream_id: int, payload: bytes = b"") -> None:
        """Queue a control frame, counted against ``MAX_QUEUED_CONTROL`` until the transport takes it."""
        self._out += _frame(kind, flags, stream_id, payload)
        self._control_queued += 1

    def _check_open(self) -> None:
        if self._goaway_sent:
            raise h2.exceptions.ProtocolError("the connection is closed")

    def _open_stream(self, stream_id: int) -> Stream:
        self._check_open()
        stream = self.streams.get(stream_id)
        if stream is None:
            raise h2.exceptions.StreamClosedError(stream_id)
        return stream

    def _new_stream(self, stream_id: int, headers_received: bool) -> Stream:
        """Record a stream opened now (by either side), with the windows in force."""
        stream = Stream(
            stream_id, self.remote_settings.initial_window_size, self._initial_window, headers_received
        )
        self.streams[stream_id] = stream
        self._last_stream_id = stream_id
        return stream

    def send_headers(
        self, stream_id: int, headers: Iterable[tuple[str, str]], end_stream: bool = False
    ) -> None:
        """Queue a header block (HEADERS, plus CONTINUATION past the peer's frame size)."""
        self._check_open()
        stream = self.streams.get(stream_id)
        if stream is None:
            stream = self._new_outbound_stream(stream_id)
        elif stream.local_ended:
            raise h2.exceptions.StreamClosedError(stream_id)
        block = self._encode(headers)
        size = self.remote_settings.max_frame_size
        flags = END_STREAM if end_stream else 0
        if len(block) <= size:
            self._out += _frame(HEADERS, flags | END_HEADERS, stream_id, block)
        else:
            self._out += _frame(HEADERS, flags, stream_id, block[:size])
            for start in range(size, len(block), size):
                last = start + size >= len(block)
                self._out += _frame(
                    CONTINUATION, END_HEADERS if last else 0, stream_id, block[start : start + size]
                )
        if end_stream:
            self._end_local(stream)

    def send_data(self, stream_id: int, data: bytes | memoryview, end_stream: bool = False) -> None:
        """Queue DATA (split at the peer's frame size). Raises FlowControlError past the windows."""
        stream = self._open_stream(stream_id)
        if stream.local_ended:
            raise h2.exceptions.StreamClosedError(stream_id)
        size = len(data)
        if size > self._send_window or size > stream.send_window:
            raise h2.exceptions.FlowControlError(f"{size} bytes exceed the send window of stream {stream_id}")
        self._send_window -= size
        stream.send_window -= size
        frame = self.remote_settings.max_frame_size
        if size <= frame:
            self._out += _HEAD.pack((size << 8) | DATA, END_STREAM if end_stream else 0, stream_id)
            self._out += data
        else:
            view = memoryview(data)
            for start in range(0, size, frame):
                chunk = view[start : start + frame]
                last = start + frame >= size
                self._out += _HEAD.pack(
                    (len(chunk) << 8) | DATA, END_STREAM if end_stream and last else 0, stream_id
                )
                self._out += chunk
        if end_stream:
            self._end_local(stream)

    def _end_local(self, stream: Stream) -> None:
        stream.local_ended = True
        if stream.remote_ended:
            self._forget(stream)

    def _forget(self, stream: Stream) -> None:
        stream.closed = True
        self.streams.pop(stream.stream_id, None)

    def reset_stream(self, stream_id: int, error_code: int = NO_ERROR) -> None:
        """Queue RST_STREAM and close the stream; frames the peer still sends on it are ignored."""
        stream = self._open_stream(stream_id)
        self._forget(stream)
        self._queue_reset(stream_id, int(error_code))

    def _queue_reset(self, stream_id: int, error_code: int) -> None:
        self._queue_control(RST_STREAM, 0, stream_id, _U32.pack(error_code))
        self._reset_ids[stream_id] = None
        if len(self._reset_ids) > _RESET_MEMORY:
            del self._reset_ids[next(iter(self._reset_ids))]

    def increment_flow_control_window(self, increment: int, stream_id: int | None = None) -> None:
        """Grant the peer ``increment`` more bytes on the connection (``stream_id`` None) or a stream."""
        self._check_open()
        if not 1 <= increment <= MAX_WINDOW:
            raise ValueError(f"flow control increment must be between 1 and {MAX_WINDOW}")
        if stream_id is None or stream_id == 0:
            if self._recv_window + increment > MAX_WINDOW:
                raise h2.exceptions.FlowControlError("connection window would exceed 2^31-1")
            self._recv_window += increment
            self._queue_control(WINDOW_UPDATE, 0, 0, _U32.pack(increment))
            return
        stream = self._open_stream(stream_id)
        if stream.recv_window + increment > MAX_WINDOW:
            raise h2.exceptions.FlowControlError(f"window of stream {stream_id} would exceed 2^31-1")
        stream.recv_window += increment
        self._queue_control(WINDOW_UPDATE, 0, stream_id, _U32.pack(increment))

    def local_flow_control_window(self, stream_id: int) -> int:
        """How much DATA we may send on ``stream_id`` now (may be negative after a SETTINGS change)."""
        stream = self.streams.get(stream_id)
        if stream is None:
            raise h2.exceptions.StreamClosedError(stream_id)
        return min(self._send_window, stream.send_window)

    def ping(self, opaque_data: bytes) -> None:
        """Queue a PING carrying 8 bytes; its ACK is reported as ``PingAckReceived``."""
        if len(opaque_data) != 8:
            raise ValueError("a PING carries exactly 8 bytes")
        self._check_open()
        self._out += _frame(PING, 0, 0, bytes(opaque_data))

    def close_connection(
        self,
        error_code: int = NO_ERROR,
        additional_data: bytes | None = None,
        last_stream_id: int | None = None,
    ) -> None:
        """Queue GOAWAY (once; later calls do nothing). Nothing can be sent after it."""
        if self._goaway_sent:
            return
        self._goaway_sent = True
        last = self._goaway_last_stream_id() if last_stream_id is None else last_stream_id
        self._out += _frame(GOAWAY, 0, 0, _GOAWAY.pack(last, int(error_code)) + (additional_data or b""))

    # ------------------------------------------------------------------ receiving

    def receive_data(self, data: bytes | bytearray) -> list[h2.events.Event]:
        """Parse what arrived (any split); the events of the complete frames.

        Raises the role's :class:`PeerProtocolError` (GOAWAY queued) on a connection error."""
        if self._goaway_sent:
            return []
        if not isinstance(data, bytes):
            data = bytes(data)
        events: list[h2.events.Event] = []
        try:
            if self._preface_left:
                data = self._check_preface(data)
            if self._in:
                self._in += data
                if not self._frame_complete(self._in):
                    return events
                buf = bytes(self._in)
                self._in.clear()
            else:
                buf = data
            pos = self._parse(buf, events)
            if pos < len(buf):
                self._in += buf[pos:]
            if self._discarded:
                self._credit_discarded()
            if self._control_queued > MAX_QUEUED_CONTROL:
                raise ProtocolFault(
                    ENHANCE_YOUR_CALM,
                    f"more than {MAX_QUEUED_CONTROL} control frames queued: the peer does not read our answers",
                )
        except ProtocolFault as exc:
            self.close_connection(exc.code, str(exc).encode())
            raise self._error_class(str(exc), exc.code) from None
        return events

    def _check_preface(self, data: bytes) -> bytes:
        want = self._preface_left
        n = min(len(want), len(data))
        if data[:n] != want[:n]:
            raise ProtocolFault(PROTOCOL_ERROR, "invalid connection preface")
        self._preface_left = want[n:]
        return data[n:]

    def _frame_complete(self, buf: bytearray) -> bool:
        if len(buf) < 9:
            return False
        length = int.from_bytes(buf[:3], "big")
        if length > self._max_frame:
            raise ProtocolFault(FRAME_SIZE_ERROR, f"frame of {length} bytes exceeds {self._max_frame}")
        return len(buf) >= 9 + length

    def _parse(self, buf: bytes, events: list[h2.events.Event]) -> int:
        """Handle every complete frame of ``buf``; returns where the first incomplete one starts."""
        pos, end = 0, len(buf)
        unpack = _HEAD.unpack_from
        handlers = self._handlers
        while end - pos >= 9:
            head, flags, stream_id = unpack(buf, pos)
            length = head >> 8
            if length > self._max_frame:
                raise ProtocolFault(FRAME_SIZE_ERROR, f"frame of {length} bytes exceeds {self._max_frame}")
            stop = pos + 9 + length
            if stop > end:
                break
            kind = head & 0xFF
            payload = buf[pos + 9 : stop]
            pos = stop
            if self._block is not None and kind != CONTINUATION:
                raise ProtocolFault(PROTOCOL_ERROR, "header block interrupted by another frame")
            if not self._settings_seen:
                if kind != SETTINGS or flags & ACK:
                    raise ProtocolFault(PROTOCOL_ERROR, "the first frame must be SETTINGS")
                self._settings_seen = True
            handler = handlers.get(kind)
            if handler is not None:  # unknown frame types are ignored (RFC 9113 section 5.5)
                handler(flags, stream_id & 0x7FFFFFFF, payload, events)
        return pos

    def _credit_discarded(self) -> None:
        """DATA we dropped (reset or refused streams) still used connection window: give it back."""
        amount, self._discarded = self._discarded, 0
        self._recv_window += amount
        self._queue_control(WINDOW_UPDATE, 0, 0, _U32.pack(amount))

    def _is_idle(self, stream_id: int) -> bool:
        """Never opened: above the highest opened, or even (only clients open streams: no push)."""
        return stream_id > self._last_stream_id or not stream_id & 1

    def _stream_error(self, stream_id: int, code: int, events: list[h2.events.Event]) -> None:
        """RST_STREAM ``code``; an open stream closes and is reported as reset."""
        self._queue_reset(stream_id, code)
        stream = self.streams.pop(stream_id, None)
        if stream is not None:
            stream.closed = True
            events.append(
                h2.events.StreamReset(stream_id=stream_id, error_code=_error_code(code), remote_reset=False)
            )

    # ------------------------------------------------------------------ frames

    def _on_data(self, flags: int, stream_id: int, payload: bytes, events: list[h2.events.Event]) -> None:
        if stream_id == 0:
            raise ProtocolFault(PROTOCOL_ERROR, "DATA on stream 0")
        length = len(payload)
        self._recv_window -= length
        if self._recv_window < 0:
            raise ProtocolFault(FLOW_CONTROL_ERROR, "DATA beyond the connection window")
        if flags & PADDED:
            payload = _unpad(payload)
        stream = self.streams.get(stream_id)
        if stream is None:
            if self._is_idle(stream_id):
                raise ProtocolFault(PROTOCOL_ERROR, f"DATA on idle stream {stream_id}")
            self._discarded += length
            if stream_id not in self._reset_ids:
                self._stream_error(stream_id, STREAM_CLOSED, events)
            return
        if stream.remote_ended or not stream.headers_received:
            self._discarded += length
            self._stream_error(stream_id, STREAM_CLOSED if stream.remote_ended else PROTOCOL_ERROR, events)
            return
        stream.recv_window -= length
        if stream.recv_window < 0:
            self._discarded += length
            self._stream_error(stream_id, FLOW_CONTROL_ERROR, events)
            return
        event = h2.events.DataReceived(stream_id=stream_id, data=payload, flow_controlled_length=length)
        events.append(event)
        if flags & END_STREAM:
            event.stream_ended = self._end_remote(stream, events)

    def _end_remote(self, stream: Stream, events: list[h2.events.Event]) -> h2.events.StreamEnded:
        stream.remote_ended = True
        ended = h2.events.StreamEnded(stream_id=stream.stream_id)
        events.append(ended)
        if stream.local_ended:
            self._forget(stream)
        return ended

    def _on_headers(self, flags: int, stream_id: int, payload: bytes, events: list[h2.events.Event]) -> None:
        if stream_id == 0:
            raise ProtocolFault(PROTOCOL_ERROR, "HEADERS on stream 0")
        if flags & PADDED:
            payload = _unpad(payload)
        if flags & PRIORITY_FLAG:
            if len(payload) < 5:
                raise ProtocolFault(FRAME_SIZE_ERROR, "HEADERS too short for its priority")
            if _U32.unpack_from(payload)[0] & 0x7FFFFFFF == stream_id:
                raise ProtocolFault(PROTOCOL_ERROR, f"stream {stream_id} depends on itself")
            payload = payload[5:]
        if flags & END_HEADERS:
            self._on_block(stream_id, flags, payload, events)
            return
        if len(payload) > self._max_header_list:
            raise ProtocolFault(ENHANCE_YOUR_CALM, "header block larger than the max header list size")
        self._block = (stream_id, flags, bytearray(payload))

    def _on_continuation(
        self, flags: int, stream_id: int, payload: bytes, events: list[h2.events.Event]
    ) -> None:
        block = self._block
        if block is None or block[0] != stream_id:
            raise ProtocolFault(PROTOCOL_ERROR, "CONTINUATION without a header block in progress")
        block[2].extend(payload)
        if len(block[2]) > self._max_header_list:
            raise ProtocolFault(ENHANCE_YOUR_CALM, "header block larger than the max header list size")
        if flags & END_HEADERS:
            self._block = None
            self._on_block(stream_id, block[1], bytes(block[2]), events)

    def _decode(self, block: bytes) -> list[tuple[bytes, bytes]]:
        try:
            headers = self._decoder.decode(block)
        except (HpackError, IndexError) as exc:
            raise ProtocolFault(COMPRESSION_ERROR, f"undecodable header block: {exc}") from None
        limit = self._max_header_list
        size = 0
        for name, value in headers:
            size += len(name) + len(value) + 32
        if size > limit:
            raise ProtocolFault(ENHANCE_YOUR_CALM, f"header list of {size} bytes exceeds {limit}")
        return headers

    def _on_block(self, stream_id: int, flags: int, block: bytes, events: list[h2.events.Event]) -> None:
        """A complete header block: dispatched by the state of its stream."""
        stream = self.streams.get(stream_id)
        if stream is None:
            if self._is_idle(stream_id):
                self._on_idle_block(stream_id, flags, block, events)
                return
            self._decode(block)  # the HPACK state must follow every block
            if stream_id not in self._reset_ids:
                raise ProtocolFault(STREAM_CLOSED, f"HEADERS on closed stream {stream_id}")
            return
        headers = self._decode(block)
        if stream.remote_ended:
            self._stream_error(stream_id, STREAM_CLOSED, events)
            return
        self._on_stream_block(stream, flags, headers, events)

    def _on_trailers(
        self, stream: Stream, flags: int, headers: list[tuple[bytes, bytes]], events: list[h2.events.Event]
    ) -> None:
        """The peer's last header block on a stream: it must end the stream."""
        if not flags & END_STREAM:
            self._stream_error(stream.stream_id, PROTOCOL_ERROR, events)
            return
        trailers = h2.events.TrailersReceived(stream_id=stream.stream_id, headers=headers)
        events.append(trailers)
        trailers.stream_ended = self._end_remote(stream, events)

    def _on_priority(self, flags: int, stream_id: int, payload: bytes, events: list[h2.events.Event]) -> None:
        if stream_id == 0:
            raise ProtocolFault(PROTOCOL_ERROR, "PRIORITY on stream 0")
        if len(payload) != 5:  # a stream error by RFC 9113 section 6.3; we end the connection
            raise ProtocolFault(FRAME_SIZE_ERROR, "PRIORITY of the wrong size")
        # Otherwise ignored: we do not prioritise.

    def _on_rst_stream(
        self, flags: int, stream_id: int, payload: bytes, events: list[h2.events.Event]
    ) -> None:
        if stream_id == 0:
            raise ProtocolFault(PROTOCOL_ERROR, "RST_STREAM on stream 0")
        if len(payload) != 4:
            raise ProtocolFault(FRAME_SIZE_ERROR, "RST_STREAM of the wrong size")
        stream = self.streams.pop(stream_id, None)
        if stream is None:
            if self._is_idle(stream_id):
                raise ProtocolFault(PROTOCOL_ERROR, f"RST_STREAM on idle stream {stream_id}")
            return
        stream.closed = True
        code = _error_code(_U32.unpack(payload)[0])
        events.append(h2.events.StreamReset(stream_id=stream_id, error_code=code, remote_reset=True))

    def _on_settings(self, flags: int, stream_id: int, payload: bytes, events: list[h2.events.Event]) -> None:
        if stream_id != 0:
            raise ProtocolFault(PROTOCOL_ERROR, "SETTINGS on a stream")
        if flags & ACK:
            if payload:
                raise ProtocolFault(FRAME_SIZE_ERROR, "SETTINGS ACK with a payload")
            self._on_settings_ack()
            return
        if len(payload) % 6:
            raise ProtocolFault(FRAME_SIZE_ERROR, "SETTINGS frame of the wrong size")
        event = h2.events.RemoteSettingsChanged()
        for offset in range(0, len(payload), 6):
            code, value = _SETTING.unpack_from(payload, offset)
            old = self._apply_remote_setting(code, value)
            event.changed_settings[code] = h2.settings.ChangedSetting(code, old, value)
        self._queue_control(SETTINGS, ACK, 0)
        events.append(event)

    def _apply_remote_setting(self, code: int, value: int) -> int | None:
        """Check and apply one of the peer's settings; its previous value (None when we do not know it)."""
        if code == INITIAL_WINDOW_SIZE:
            if value > MAX_WINDOW:
                raise ProtocolFault(FLOW_CONTROL_ERROR, "initial window size above 2^31-1")
            delta = value - self.remote_settings.initial_window_size
            for stream in self.streams.values():
                stream.send_window += delta
                if stream.send_window > MAX_WINDOW:
                    raise ProtocolFault(
                        FLOW_CONTROL_ERROR, f"window of stream {stream.stream_id} above 2^31-1"
                    )
        elif code == MAX_FRAME_SIZE:
            if not DEFAULT_FRAME <= value <= _MAX_FRAME_LIMIT:
                raise ProtocolFault(PROTOCOL_ERROR, f"invalid max frame size {value}")
        elif code == ENABLE_PUSH and value > 1:
            raise ProtocolFault(PROTOCOL_ERROR, f"invalid enable push {value}")
        return self.remote_settings.set(code, value)

    def _on_push_promise(
        self, flags: int, stream_id: int, payload: bytes, events: list[h2.events.Event]
    ) -> None:
        # A client never sends one; we are a client only with ENABLE_PUSH 0.
        raise ProtocolFault(PROTOCOL_ERROR, "PUSH_PROMISE (push is not enabled)")

    def _on_ping(self, flags: int, stream_id: int, payload: bytes, events: list[h2.events.Event]) -> None:
        if stream_id != 0:
            raise ProtocolFault(PROTOCOL_ERROR, "PING on a stream")
        if len(payload) != 8:
            raise ProtocolFault(FRAME_SIZE_ERROR, "PING of the wrong size")
        if flags & ACK:
            events.append(h2.events.PingAckReceived(ping_data=payload))
        else:
            self._queue_control(PING, ACK, 0, payload)

    def _on_goaway(self, flags: int, stream_id: int, payload: bytes, events: list[h2.events.Event]) -> None:
        if stream_id != 0:
            raise ProtocolFault(PROTOCOL_ERROR, "GOAWAY on a stream")
        if len(payload) < 8:
            raise ProtocolFault(FRAME_SIZE_ERROR, "GOAWAY too short")
        last, code = _GOAWAY.unpack_from(payload)
        self._goaway_received = True
        event = h2.events.ConnectionTerminated()
        event.error_code = _error_code(code)
        event.last_stream_id = last & 0x7FFFFFFF
        event.additional_data = payload[8:]
        events.append(event)

    def _on_window_update(
        self, flags: int, stream_id: int, payload: bytes, events: list[h2.events.Event]
    ) -> None:
        if len(payload) != 4:
            raise ProtocolFault(FRAME_SIZE_ERROR, "WINDOW_UPDATE of the wrong size")
        increment = _U32.unpack(payload)[0] & 0x7FFFFFFF
        if stream_id == 0:
            if increment == 0:
                raise ProtocolFault(PROTOCOL_ERROR, "WINDOW_UPDATE of 0 on the connection")
            self._send_window += increment
            if self._send_window > MAX_WINDOW:
                raise ProtocolFault(FLOW_CONTROL_ERROR, "connection window above 2^31-1")
        else:
            stream = self.streams.get(stream_id)
            if stream is None:
                if self._is_idle(stream_id):
                    raise ProtocolFault(PROTOCOL_ERROR, f"WINDOW_UPDATE on idle stream {stream_id}")
                return
            if increment == 0:
                self._stream_error(stream_id, PROTOCOL_ERROR, events)
                return
            stream.send_window += increment
            if stream.send_window > MAX_WINDOW:
                self._stream_error(stream_id, FLOW_CONTROL_ERROR, events)
                return
        events.append(h2.events.WindowUpdated(stream_id=stream_id, delta=increment))
