"""One HTTP/2 connection over a Trio stream, shared by server and client: the engine is
:class:`spur.rpc.h2_client.ClientH2Connection` or :class:`spur.rpc.h2_server.ServerH2Connection`
(both :class:`spur.rpc.h2_engine.H2Engine`, with h2's ``H2Connection`` interface and events).

Design: every engine state change is synchronous and followed by :meth:`H2Transport.flush_soon`; a single
writer task drains ``h2.data_to_send()`` onto the socket. So any task (including a cancelled one in its
cleanup) can queue frames without awaiting, and frames leave in the order they were produced.
:meth:`H2Transport.flush_now` is the same hand-over done at once, for an owner that has just queued the
last frame of a burst (a call's trailers): while the writer is idle with nothing left over, the bytes go
to a plain socket in one non-blocking write, sparing the writer's wake-up and a pass of the run loop
(a unary call at low rates costs the server several run-loop passes and system calls, which on a
virtual machine outweigh the HTTP/2 work); what the socket does not take is left to the writer.

Flow control: outbound DATA waits for window (:meth:`send_data`); inbound DATA is acknowledged at the
connection level as soon as it is read, and at the stream level when the owner calls
:meth:`release_stream_window` (so a slow consumer pushes back on its own stream only).

Reads: at most :attr:`H2Transport.read_size` bytes at a time (an owner may lower it, e.g. for a peer
that has not authenticated yet); :meth:`H2Transport.on_received` sees the size of every read before
the engine parses it, so an owner can bound what a peer may send.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable
from typing import Generic, TypeVar

import h2.events
import h2.exceptions
import h2.settings
import trio

from spur.rpc.h2_client import ClientH2Connection
from spur.rpc.h2_engine import H2Engine
from spur.rpc.h2_server import ServerH2Connection

__all__ = ["H2Transport", "StreamGone", "client_engine", "server_engine", "STREAM_WINDOW", "CONNECTION_WINDOW", "READ_SIZE"]

STREAM_WINDOW = 4 * 1024 * 1024
CONNECTION_WINDOW = 16 * 1024 * 1024
_DEFAULT_WINDOW = 65535
READ_SIZE = 256 * 1024
_MAX_HEADER_LIST = 64 * 1024
_DRAIN_SECS = 1.0
# The HTTP/2 engine under a transport (client or server role).
EngineT = TypeVar("EngineT", bound=H2Engine)


class StreamGone(Exception):
    """The stream (or the whole connection) closed while we were sending on it."""


class H2Transport(Generic[EngineT]):
    """HTTP/2 engine + Trio stream plumbing. Subclasses implement :meth:`handle_event`."""

    def __init__(self, stream: trio.abc.Stream, engine: EngineT) -> None:
        """``engine``: a fresh :func:`client_engine` or :func:`server_engine` (nothing sent yet)."""
        self.stream = stream
        self.h2: EngineT = engine
        self.closed = False
        self.close_reason = ""
        self._wake_writer = trio.Event()
        self._writer_idle = False
        self._unsent = b""  # taken from the engine by flush_now, not yet accepted by the socket
        self._fd = stream.socket.fileno() if isinstance(stream, trio.SocketStream) else None
        self._window_lot = trio.lowlevel.ParkingLot()
        self._conn_unacked = 0
        self._cancel_scope: trio.CancelScope | None = None
        self.read_size = READ_SIZE
        self._windows_open = True

    # ------------------------------------------------------------------ lifecycle

    def start(self, *, open_windows: bool = True) -> None:
        """Queue the connection preface and open the receive windows (``STREAM_WINDOW`` per stream,
        ``CONNECTION_WINDOW`` in all). With ``open_windows=False`` both stay at HTTP/2's default
        (64 KiB) until :meth:`open_receive_windows`."""
        if not open_windows:
            self.h2.local_settings[h2.settings.SettingCodes.INITIAL_WINDOW_SIZE] = _DEFAULT_WINDOW
            self.h2.local_settings.acknowledge()
        self.h2.initiate_connection()
        self._windows_open = open_windows
        if open_windows:
            self.h2.increment_flow_control_window(CONNECTION_WINDOW - _DEFAULT_WINDOW)
        self.flush_soon()

    def open_receive_windows(self) -> None:
        """Raise the receive windows to their full size (after ``start(open_windows=False)``)."""
        if self._windows_open:
            return
        self._windows_open = True
        try:
            self.h2.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: STREAM_WINDOW})
            self.h2.increment_flow_control_window(CONNECTION_WINDOW - _DEFAULT_WINDOW)
        except h2.exceptions.ProtocolError:  # the connection is closing
            return
        self.flush_soon()

    async def run_io(self) -> None:
        """Read and write until the connection closes (peer EOF, error, or :meth:`close`). :meth:`close`
        stops the reader at once; the writer then sends what is already queued (for at most
        ``_DRAIN_SECS``), so frames queued just before a close (answers, GOAWAY) are not dropped."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._writer)
            with trio.CancelScope() as scope:
                self._cancel_scope = scope
                if self.closed:
                    scope.cancel()
                await self._reader()
            self.close(self.close_reason or "reader stopped")
            self._wake_writer.set()
            nursery.cancel_scope.deadline = trio.current_time() + _DRAIN_SECS

    def close(self, reason: str) -> None:
        """Mark the connection dead (first reason wins) and stop its I/O tasks."""
        if not self.closed:
            self.closed = True
            self.close_reason = reason
            self.on_closed(reason)
        self._window_lot.unpark_all()
        self._wake_writer.set()
        if self._cancel_scope is not None:
            self._cancel_scope.cancel()

    async def final_flush(self, goaway: bool, timeout: float = 1.0, *, linger_bytes: int = 0) -> None:
        """Best effort, shielded: send what is queued (plus GOAWAY if asked) and close the socket.

        With ``linger_bytes``, half-close first and read (and drop) at most that many bytes until the
        peer closes or ``timeout`` passes: closing with unread bytes would reset the connection and
        the peer could lose the frames just sent (its refusals and the GOAWAY)."""
        with trio.CancelScope(shield=True) as scope:
            scope.deadline = trio.current_time() + timeout
            try:
                if goaway:
                    self.h2.close_connection()
                data = self.h2.data_to_send()
                if data:
                    await self.stream.send_all(data)
                send_eof = getattr(self.stream, "send_eof", None)
                if linger_bytes > 0 and send_eof is not None:
                    await send_eof()
                    while linger_bytes > 0:
                        chunk = await self.stream.receive_some(min(linger_bytes, 65536))
                        if not chunk:
                            break
                        linger_bytes -= len(chunk)
            except (h2.exceptions.ProtocolError, trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                pass
            except trio.BusyResourceError:
                pass
            await self.stream.aclose()

    def on_closed(self, reason: str) -> None:
        """Hook: the connection just died; fail or cancel what depends on it."""

    def handle_event(self, event: h2.events.Event) -> None:
        """Hook: one h2 event (called synchronously from the reader)."""
        raise NotImplementedError

    def on_received(self, nbytes: int) -> None:
        """Hook: ``nbytes`` were just read from the peer (before the engine parses them); may :meth:`close`."""

    # ------------------------------------------------------------------ I/O tasks

    async def _receive(self) -> bytes | bytearray:
        """The next bytes from the peer (b"" at EOF). On a plain socket this is Trio's
        ``SocketStream.receive_some`` without its per-read context managers (a few percent of a small
        call): the same checkpoints, a read tried first, the wait for readability only when it would block."""
        fd = self._fd
        if fd is None:
            return await self.stream.receive_some(self.read_size)
        await trio.lowlevel.checkpoint_if_cancelled()
        while True:
            try:
                data = os.read(fd, self.read_size)
            except BlockingIOError:
                await trio.lowlevel.wait_readable(fd)
                continue
            await trio.lowlevel.cancel_shielded_checkpoint()
            return data

    async def _reader(self) -> None:
        while not self.closed:
            try:
                data = await self._receive()
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                self.close(f"connection lost: {exc or type(exc).__name__}")
                return
            if not data:
                self.close("connection closed by peer")
                return
            self.on_received(len(data))
            if self.closed:
                return
            try:
                events = self.h2.receive_data(data)
            except h2.exceptions.ProtocolError as exc:
                # the engine has queued a GOAWAY already; let the final flush carry it.
                self.close(f"HTTP/2 protocol error: {exc}")
                return
            for event in events:
                self._dispatch(event)
            self.flush_soon()

    def _dispatch(self, event: h2.events.Event) -> None:
        if isinstance(event, h2.events.DataReceived):
            self._conn_unacked += event.flow_controlled_length
            if self._conn_unacked >= CONNECTION_WINDOW // 4:
                self.h2.increment_flow_control_window(self._conn_unacked)
                self._conn_unacked = 0
        elif isinstance(event, h2.events.WindowUpdated | h2.events.RemoteSettingsChanged):
            self._window_lot.unpark_all()
        self.handle_event(event)
        if isinstance(event, h2.events.StreamReset | h2.events.StreamEnded):
            self._window_lot.unpark_all()

    async def _writer(self) -> None:
        while True:
            self._wake_writer = trio.Event()
            data = self._unsent + self.h2.data_to_send() if self._unsent else self.h2.data_to_send()
            self._unsent = b""
            if data:
                try:
                    await self.stream.send_all(data)
                except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                    self.close(f"connection lost: {exc or type(exc).__name__}")
                    return
                continue
            if self.closed:
                return
            self._writer_idle = True
            try:
                await self._wake_writer.wait()
            finally:
                self._writer_idle = False

    # ------------------------------------------------------------------ helpers for owners

    def flush_soon(self) -> None:
        """Ask the writer to send whatever the engine has queued."""
        self._wake_writer.set()

    def flush_now(self) -> None:
        """Send what the engine has queued with one non-blocking write when that keeps frame order
        (the writer is idle and nothing taken earlier is still unsent, on a plain socket); otherwise,
        and for whatever the socket does not take, :meth:`flush_soon`."""
        if not self._writer_idle or self._unsent or self._fd is None or self.closed:
            self.flush_soon()
            return
        data = self.h2.data_to_send()
        if not data:
            return
        try:
            sent = os.write(self._fd, data)
        except BlockingIOError:
            sent = 0
        except OSError:  # let the writer meet the error and close the connection as it always does
            sent = 0
        if sent < len(data):
            self._unsent = data[sent:]
            self.flush_soon()

    async def send_data(self, stream_id: int, payload: bytes, *, end_stream: bool = False) -> None:
        """Send ``payload`` on a stream, waiting for flow-control window as needed.

        Raises :class:`StreamGone` if the stream or connection closes first.
        """
        view = memoryview(payload)
        offset = 0
        while True:
            size = await self._wait_window(stream_id, len(view) - offset)
            chunk = view[offset : offset + size]
            offset += size
            last = offset >= len(view)
            try:
                self.h2.send_data(stream_id, bytes(chunk), end_stream=end_stream and last)
            except (h2.exceptions.StreamClosedError, h2.exceptions.ProtocolError) as exc:
                raise StreamGone(str(exc)) from None
            self.flush_soon()
            if last:
                return

    async def _wait_window(self, stream_id: int, wanted: int) -> int:
        await trio.lowlevel.checkpoint_if_cancelled()
        while True:
            if self.closed:
                raise StreamGone(self.close_reason)
            if wanted == 0:
                return 0
            if not self.stream_is_open(stream_id):  # reset by the peer: its window will never open
                raise StreamGone(f"stream {stream_id} closed")
            try:
                window = self.h2.local_flow_control_window(stream_id)
            except (h2.exceptions.StreamClosedError, h2.exceptions.ProtocolError, KeyError) as exc:
                raise StreamGone(f"stream {stream_id} closed: {exc}") from None
            if window > 0:
                return min(window, self.h2.max_outbound_frame_size, wanted)
            await self._window_lot.park()

    def release_stream_window(self, stream_id: int, nbytes: int) -> None:
        """Re-open ``nbytes`` of the peer's send window on one stream (data has been consumed)."""
        if nbytes <= 0:
            return
        try:
            self.h2.increment_flow_control_window(nbytes, stream_id=stream_id)
        except (h2.exceptions.StreamClosedError, h2.exceptions.ProtocolError, KeyError):
            return
        self.flush_soon()

    def send_headers(
        self, stream_id: int, headers: Iterable[tuple[str, str]], *, end_stream: bool, flush: bool = True
    ) -> bool:
        """Queue a header block; False if the stream is already gone. ``flush=False``: the caller
        flushes (it is about to queue more of the same burst)."""
        try:
            self.h2.send_headers(stream_id, list(headers), end_stream=end_stream)
        except (h2.exceptions.StreamClosedError, h2.exceptions.ProtocolError):
            return False
        if flush:
            self.flush_soon()
        return True

    def queue_data(self, stream_id: int, payload: bytes, *, end_stream: bool = False) -> bool:
        """Queue all of ``payload`` on an open stream without waiting or flushing, if the flow-control
        windows hold it now; False (nothing queued) otherwise: then :meth:`send_data` waits for window."""
        if self.closed or not self.stream_is_open(stream_id):
            return False
        try:
            if self.h2.local_flow_control_window(stream_id) < len(payload):
                return False
            self.h2.send_data(stream_id, payload, end_stream=end_stream)
        except (h2.exceptions.StreamClosedError, h2.exceptions.ProtocolError, KeyError):
            return False
        return True

    def reset_stream(self, stream_id: int, error_code: int) -> None:
        """Queue RST_STREAM unless the stream is already closed."""
        try:
            self.h2.reset_stream(stream_id, error_code)
        except (h2.exceptions.StreamClosedError, h2.exceptions.ProtocolError, KeyError):
            return
        self.flush_soon()

    def stream_is_open(self, stream_id: int) -> bool:
        stream = self.h2.streams.get(stream_id)
        return stream is not None and not stream.closed


def _settings(max_concurrent_streams: int) -> dict[int, int]:
    return {
        h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: max_concurrent_streams,
        h2.settings.SettingCodes.MAX_HEADER_LIST_SIZE: _MAX_HEADER_LIST,
        h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: STREAM_WINDOW,
    }


def server_engine(max_concurrent_streams: int) -> ServerH2Connection:
    """The server side's engine (spur.rpc.h2_server: h2 cost ~0.25 ms of CPU per call), our settings
    in force from the first frame."""
    return ServerH2Connection(_settings(max_concurrent_streams))


def client_engine(max_concurrent_streams: int) -> ClientH2Connection:
    """The client side's engine (spur.rpc.h2_client), our settings in force from the first frame.

    Its HPACK encoder indexes the headers it sends (``grpc-timeout`` aside), ``authorization`` included
    (h2 would make it never-indexed): a connection carries one caller's calls, so its credential is sent
    and decoded once, not on every call (a JWT costs the server ~60 us of Huffman decoding per call
    otherwise). Headers are neither validated nor normalised, in either direction: what we send is
    built by this package (client metadata validated by spur.rpc.wire.validate_metadata), and what we
    receive is only looked up by name and decoded with errors="replace" (spur.rpc.wire.decode_headers),
    so a malformed header from a peer changes no decision."""
    return ClientH2Connection(_settings(max_concurrent_streams))


def deadline_after(timeout: float | None) -> float:
    """Absolute trio deadline for a relative timeout (``inf`` for None)."""
    return math.inf if timeout is None else trio.current_time() + timeout
