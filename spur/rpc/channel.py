"""gRPC client channel on Trio (HTTP/2 by :mod:`spur.rpc.h2_client`): one lazily opened, self-healing HTTP/2 connection per target.

Contracts:

- ``open_channel(target)`` yields a :class:`Channel`; nothing connects until the first call. A dropped
  connection is replaced on the next call. Leaving the ``async with`` closes the connection and fails
  calls still in flight with UNAVAILABLE.
- Every failure is an :class:`RpcError`: UNAVAILABLE when the target cannot be reached (``"cannot connect
  to host:port: <why>"``) or the connection is lost mid-call (including a keepalive PING that got no ACK
  within ``keepalive_timeout``); DEADLINE_EXCEEDED when ``timeout`` passes (the timeout is also sent as
  ``grpc-timeout`` so the server gives up too); otherwise the status the server sent.
- Calls refused before the server processed them (GOAWAY naming a lower stream, REFUSED_STREAM) are
  retried once, transparently, on a fresh connection.
- ``metadata_provider()`` is called for every call; its headers are sent with the call's own
  ``metadata`` on top (the call's keys win).
- ``tls`` (spur.rpc.tls.ClientTLS): every connection is TLS, the server verified against the cluster CA
  (and, for a daemon, the node certificate presented); a failed handshake is UNAVAILABLE
  (``"cannot connect to host:port: TLS handshake failed: <why>"``). A reconnection offers the previous
  connection's session (an abbreviated handshake).

Imports only trio, h2 and protobuf (``ssl`` only with ``tls``): the CLI loads this module on every command.
"""

from __future__ import annotations

import logging
import math
import os
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, TypeVar

import h2.errors
import h2.events
import h2.exceptions
import trio
from google.protobuf.message import DecodeError, Message

from spur.core.nurseries import helper_nursery
from spur.rpc.h2_client import ClientH2Connection
from spur.rpc.status import RpcError, StatusCode
from spur.rpc.transport import STREAM_WINDOW, H2Transport, StreamGone, client_engine, deadline_after
from spur.rpc.wire import (
    ACCEPT_ENCODING,
    CONTENT_TYPE,
    InvalidTarget,
    MessageDecoder,
    decode_headers,
    encode_timeout,
    frame_message,
    parse_target,
    response_status,
    validate_metadata,
)

if TYPE_CHECKING:
    from spur.rpc.tls import ClientTLS

__all__ = ["Channel", "open_channel", "parse_target", "InvalidTarget"]

log = logging.getLogger("spur.rpc.channel")

M = TypeVar("M", bound=Message)
MetadataProvider = Callable[[], dict[str, str]]
USER_AGENT = "spur-rpc/0.1"
_DEFAULT_MAX_MESSAGE = 64 * 1024 * 1024
# Complete-but-unconsumed response bytes a call may hold before it stops re-opening its stream window.
_HIGH_WATER = 1024 * 1024

# Indirection so tests can simulate a peer that never answers the TCP handshake.
_open_tcp_stream = trio.open_tcp_stream


class _Refused(RpcError):
    """UNAVAILABLE for a call the server certainly did not process: safe to retry once."""


@asynccontextmanager
async def open_channel(
    target: str,
    *,
    connect_timeout: float = 5.0,
    keepalive_interval: float | None = 30.0,
    keepalive_timeout: float = 10.0,
    metadata_provider: MetadataProvider | None = None,
    max_message_bytes: int = _DEFAULT_MAX_MESSAGE,
    tls: ClientTLS | None = None,
) -> AsyncIterator[Channel]:
    """A channel to ``target`` for the duration of the block (see the module docstring); ``tls``: connect
    with TLS (None: plaintext)."""
    host, port = parse_target(target)
    async with helper_nursery() as nursery:
        channel = Channel(
            host,
            port,
            nursery,
            connect_timeout=connect_timeout,
            keepalive_interval=keepalive_interval,
            keepalive_timeout=keepalive_timeout,
            metadata_provider=metadata_provider,
            max_message_bytes=max_message_bytes,
            tls=tls,
        )
        try:
            yield channel
        finally:
            channel.closed = True
            nursery.cancel_scope.cancel()


class Channel:
    """Issues calls over one HTTP/2 connection (made by :func:`open_channel`, not directly)."""

    def __init__(
        self,
        host: str,
        port: int,
        nursery: trio.Nursery,
        *,
        connect_timeout: float,
        keepalive_interval: float | None,
        keepalive_timeout: float,
        metadata_provider: MetadataProvider | None,
        max_message_bytes: int,
        tls: ClientTLS | None = None,
    ) -> None:
        self.host = host
        self.tls = tls
        self.port = port
        self.authority = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        self.connect_timeout = connect_timeout
        self.keepalive_interval = keepalive_interval
        self.keepalive_timeout = keepalive_timeout
        self.metadata_provider = metadata_provider
        self.max_message_bytes = max_message_bytes
        self.closed = False
        self._nursery = nursery
        self._conn: _Connection | None = None
        self._connect_lock = trio.Lock()

    # ------------------------------------------------------------------ calls

    async def unary(
        self,
        method: str,
        request: Message,
        response_type: type[M],
        *,
        timeout: float | None = None,
        metadata: dict[str, str] | None = None,
    ) -> M:
        """One request, one response. Raises :class:`RpcError` on any non-OK outcome."""
        deadline = deadline_after(timeout)
        payload = frame_message(request.SerializeToString())
        with trio.move_on_at(deadline):
            for attempt in range(2):
                try:
                    call = await self._start(method, payload, deadline, metadata)
                except _Refused:
                    if attempt == 0:
                        continue
                    raise
                try:
                    first = await call.next_message()
                    extra = None if first is None else await call.next_message()
                finally:
                    call.cancel()
                if isinstance(call.status, _Refused) and attempt == 0:
                    continue
                if call.status is not None:
                    raise call.status
                if first is None or extra is not None:
                    raise RpcError(StatusCode.INTERNAL, f"{method}: expected exactly one response message")
                return _decode(method, response_type, first)
        raise _deadline_error(method, timeout)

    async def stream(
        self,
        method: str,
        request: Message,
        response_type: type[M],
        *,
        timeout: float | None = None,
        metadata: dict[str, str] | None = None,
    ) -> AsyncIterator[M]:
        """Server-streaming call: yields responses, raises :class:`RpcError` on a non-OK end.

        Leaving the iteration early (break, exception, ``aclose()``) resets the stream, which cancels
        the server's handler.
        """
        deadline = deadline_after(timeout)
        payload = frame_message(request.SerializeToString())
        call: _ClientCall | None = None
        retries_left = 1
        yielded = False
        try:
            while True:
                data: bytes | None = None
                with trio.move_on_at(deadline) as scope:
                    if call is None:
                        try:
                            call = await self._start(method, payload, deadline, metadata)
                        except _Refused:
                            if retries_left == 0:
                                raise
                            retries_left -= 1
                            continue
                    data = await call.next_message()
                if scope.cancelled_caught:
                    raise _deadline_error(method, timeout)
                assert call is not None
                if data is None:
                    if isinstance(call.status, _Refused) and not yielded and retries_left > 0:
                        retries_left -= 1
                        call = None
                        continue
                    if call.status is not None:
                        raise call.status
                    return
                message = _decode(method, response_type, data)
                yielded = True
                yield message
        finally:
            if call is not None:
                call.cancel()

    def drop(self, reason: str = "dropped by the client") -> None:
        """Close the current connection (calls on it fail UNAVAILABLE); the next call opens a new one.

        For callers that treat a transport error (including a call that reached its deadline) as the
        end of the connection rather than of one call."""
        conn = self._conn
        self._conn = None
        if conn is not None and not conn.closed:
            conn.close(reason)

    @property
    def connected(self) -> bool:
        """Whether a usable connection is open now."""
        return self._conn is not None and self._conn.usable

    # ------------------------------------------------------------------ plumbing

    async def _start(
        self, method: str, payload: bytes, deadline: float, metadata: dict[str, str] | None
    ) -> _ClientCall:
        headers = self._headers(method, deadline, metadata)
        conn = await self._connection(deadline)
        return await conn.open_call(headers, payload)

    def _headers(
        self, method: str, deadline: float, metadata: dict[str, str] | None
    ) -> list[tuple[str, str]]:
        merged: dict[str, str] = {}
        for source in (self.metadata_provider() if self.metadata_provider else None, metadata):
            for key, value in (source or {}).items():
                merged[str(key).lower()] = value
        headers = [
            (":method", "POST"),
            (":scheme", "http"),
            (":path", method),
            (":authority", self.authority),
            ("content-type", CONTENT_TYPE),
            ("te", "trailers"),
            ("user-agent", USER_AGENT),
            ("grpc-accept-encoding", ACCEPT_ENCODING),
        ]
        if self.tls is not None:
            headers[1] = (":scheme", "https")
        if math.isfinite(deadline):
            headers.append(("grpc-timeout", encode_timeout(deadline - trio.current_time())))
        headers += validate_metadata(merged)
        return headers

    async def _connection(self, deadline: float) -> _Connection:
        conn = self._conn
        if conn is not None and conn.usable:
            return conn
        async with self._connect_lock:
            conn = self._conn
            if conn is not None and conn.usable:
                return conn
            self._conn = await self._connect(deadline)
            return self._conn

    async def _connect(self, deadline: float) -> _Connection:
        if self.closed:
            raise RpcError(StatusCode.UNAVAILABLE, f"channel to {self.authority} is closed")
        give_up = trio.current_time() + self.connect_timeout
        with trio.move_on_at(min(give_up, deadline)):
            try:
                stream: trio.abc.Stream = await _open_tcp_stream(self.host, self.port)
            except OSError as exc:
                raise RpcError(
                    StatusCode.UNAVAILABLE, f"cannot connect to {self.authority}: {_why(exc)}"
                ) from None
            if self.tls is not None:
                from spur.rpc.tls import client_handshake

                try:
                    stream = await client_handshake(stream, self.tls, self.host, self.authority)  # type: ignore[arg-type]
                except OSError as exc:
                    if not self.tls.plaintext_fallback:
                        raise RpcError(
                            StatusCode.UNAVAILABLE, f"cannot connect to {self.authority}: {exc}"
                        ) from None
                    log.info("%s: %s; [tls] mode is optional: connecting in plaintext", self.authority, exc)
                    try:
                        stream = await _open_tcp_stream(self.host, self.port)
                    except OSError as again:
                        raise RpcError(
                            StatusCode.UNAVAILABLE, f"cannot connect to {self.authority}: {_why(again)}"
                        ) from None
            conn = _Connection(stream, self.authority, self.max_message_bytes)
            await self._nursery.start(conn.run, self.keepalive_interval, self.keepalive_timeout)
            return conn
        if deadline < give_up:
            raise RpcError(
                StatusCode.DEADLINE_EXCEEDED, f"deadline exceeded while connecting to {self.authority}"
            )
        raise RpcError(
            StatusCode.UNAVAILABLE,
            f"cannot connect to {self.authority}: timed out after {self.connect_timeout:g}s",
        )


class _Connection(H2Transport[ClientH2Connection]):
    """The client side of one HTTP/2 connection; owns its calls by stream id."""

    def __init__(self, stream: trio.abc.Stream, authority: str, max_message_bytes: int) -> None:
        super().__init__(stream, client_engine(100))
        self.authority = authority
        self.max_message_bytes = max_message_bytes
        self.calls: dict[int, _ClientCall] = {}
        self.goaway = False
        self._slot_lot = trio.lowlevel.ParkingLot()
        self._pings: dict[bytes, trio.Event] = {}

    @property
    def usable(self) -> bool:
        return not self.closed and not self.goaway

    async def run(
        self,
        keepalive_interval: float | None,
        keepalive_timeout: float,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        self.start()
        lost_by_peer = False
        try:
            async with trio.open_nursery() as nursery:
                if keepalive_interval:
                    nursery.start_soon(self._keepalive, keepalive_interval, keepalive_timeout)
                task_status.started()
                await self.run_io()
                lost_by_peer = True
                nursery.cancel_scope.cancel()
        except Exception:
            log.exception("connection to %s failed", self.authority)
        finally:
            self.close("channel closed")
            await self.final_flush(goaway=not lost_by_peer)

    async def _keepalive(self, interval: float, timeout: float) -> None:
        count = 0
        while not self.closed:
            await trio.sleep(interval)
            count += 1
            payload = count.to_bytes(8, "big")
            acked = self._pings[payload] = trio.Event()
            try:
                self.h2.ping(payload)
            except h2.exceptions.ProtocolError:
                return
            self.flush_soon()
            with trio.move_on_after(timeout):
                await acked.wait()
            self._pings.pop(payload, None)
            if not acked.is_set():
                self.close(f"keepalive ping not acknowledged within {timeout:g}s")
                return

    async def open_call(self, headers: list[tuple[str, str]], payload: bytes) -> _ClientCall:
        """Open a stream, send headers and the framed request (END_STREAM), return the call."""
        while self.usable and self.h2.open_outbound_streams >= self.h2.remote_settings.max_concurrent_streams:
            await self._slot_lot.park()
        if not self.usable:
            raise _Refused(
                StatusCode.UNAVAILABLE, f"connection to {self.authority} closed: {self.close_reason}"
            )
        stream_id = self.h2.get_next_available_stream_id()
        try:
            self.h2.send_headers(stream_id, headers)
        except h2.exceptions.ProtocolError as exc:
            raise _Refused(
                StatusCode.UNAVAILABLE, f"cannot open a stream to {self.authority}: {exc}"
            ) from None
        call = _ClientCall(self, stream_id)
        self.calls[stream_id] = call
        if self.queue_data(stream_id, payload, end_stream=True):
            self.flush_now()  # the whole request in one write, without waking the writer
            return call
        self.flush_soon()
        try:
            await self.send_data(stream_id, payload, end_stream=True)
        except StreamGone:
            pass  # the outcome reaches the call through events or on_closed
        except BaseException:
            call.cancel()
            raise
        return call

    def on_closed(self, reason: str) -> None:
        for call in list(self.calls.values()):
            call.finish(RpcError(StatusCode.UNAVAILABLE, f"connection to {self.authority} lost: {reason}"))
        self.calls.clear()
        self._slot_lot.unpark_all()
        for event in self._pings.values():
            event.set()

    def handle_event(self, event: h2.events.Event) -> None:
        call = self.calls.get(getattr(event, "stream_id", 0) or 0)
        if isinstance(event, h2.events.ResponseReceived):
            if call is not None:
                call.on_headers(decode_headers(event.headers or []))
        elif isinstance(event, h2.events.TrailersReceived):
            if call is not None:
                call.trailers = decode_headers(event.headers or [])
        elif isinstance(event, h2.events.DataReceived):
            if call is not None:
                call.on_data(event.data or b"", event.flow_controlled_length or 0)
        elif isinstance(event, h2.events.StreamEnded):
            if call is not None:
                call.finish(call.final_status())
            self._slot_lot.unpark_all()
        elif isinstance(event, h2.events.StreamReset):
            if call is not None:
                call.finish(_reset_status(event.error_code))
            self._slot_lot.unpark_all()
        elif isinstance(event, h2.events.RemoteSettingsChanged):
            self._slot_lot.unpark_all()
        elif isinstance(event, h2.events.PingAckReceived):
            waiter = self._pings.get(event.ping_data or b"")
            if waiter is not None:
                waiter.set()
        elif isinstance(event, h2.events.ConnectionTerminated):
            self._on_goaway(event)

    def _on_goaway(self, event: h2.events.ConnectionTerminated) -> None:
        # Every call on the connection ends here (the engine would let those up to last_stream_id
        # finish; we do not wait for them, as when the engine was h2's); those the server never saw
        # (id above last_stream_id) are marked safe to retry.
        self.goaway = True
        last = event.last_stream_id if event.last_stream_id is not None else 2**31 - 1
        why = f"server closed the connection (GOAWAY {event.error_code!r})"
        for stream_id, call in list(self.calls.items()):
            if stream_id > last:
                call.finish(_Refused(StatusCode.UNAVAILABLE, f"{why} before processing the call"))
            else:
                call.finish(RpcError(StatusCode.UNAVAILABLE, why))
        self.close(why)


class _ClientCall:
    """Receive-side state of one call: response headers, queued messages, trailers, final status."""

    def __init__(self, conn: _Connection, stream_id: int) -> None:
        self.conn = conn
        self.stream_id = stream_id
        self.decoder = MessageDecoder(conn.max_message_bytes)
        self.messages: deque[bytes] = deque()
        self.buffered = 0
        self.unacked = 0
        self.headers: dict[str, str] | None = None
        self.trailers: dict[str, str] | None = None
        self.done = False
        self.status: RpcError | None = None
        self._lot = trio.lowlevel.ParkingLot()

    async def next_message(self) -> bytes | None:
        """The next response message, or None once the call has ended (then see ``status``)."""
        while True:
            if self.messages:
                message = self.messages.popleft()
                self.buffered -= len(message)
                self._maybe_release()
                return message
            if self.done:
                return None
            await self._lot.park()

    def on_headers(self, headers: dict[str, str]) -> None:
        self.headers = headers
        self.decoder.encoding = headers.get("grpc-encoding", "identity")
        if "grpc-status" in headers:
            self.trailers = headers  # trailers-only response

    def on_data(self, data: bytes, flow_controlled_length: int) -> None:
        self.unacked += flow_controlled_length
        if self.done:
            return
        try:
            messages = self.decoder.feed(data)
        except RpcError as err:
            self.finish(err)
            self.conn.reset_stream(self.stream_id, h2.errors.ErrorCodes.CANCEL)
            return
        for message in messages:
            self.messages.append(message)
            self.buffered += len(message)
        self._maybe_release()
        self._lot.unpark_all()

    def _maybe_release(self) -> None:
        if self.done or self.buffered >= _HIGH_WATER or self.unacked < STREAM_WINDOW // 4:
            return
        self.conn.release_stream_window(self.stream_id, self.unacked)
        self.unacked = 0

    def final_status(self) -> RpcError | None:
        """The status the server's headers/trailers say (None for OK)."""
        return response_status(self.headers, self.trailers, self.conn.authority)

    def finish(self, status: RpcError | None) -> None:
        if self.done:
            return
        self.done = True
        self.status = status
        self.conn.calls.pop(self.stream_id, None)
        self._lot.unpark_all()

    def cancel(self) -> None:
        """Abandon the call: RST_STREAM(CANCEL) if it is still open. Synchronous, idempotent."""
        if self.done:
            return
        self.finish(RpcError(StatusCode.CANCELLED, "call cancelled by the client"))
        self.conn.reset_stream(self.stream_id, h2.errors.ErrorCodes.CANCEL)


def _reset_status(error_code: int | None) -> RpcError:
    by_reset: dict[int | None, StatusCode] = {
        h2.errors.ErrorCodes.REFUSED_STREAM: StatusCode.UNAVAILABLE,
        h2.errors.ErrorCodes.CANCEL: StatusCode.CANCELLED,
        h2.errors.ErrorCodes.ENHANCE_YOUR_CALM: StatusCode.RESOURCE_EXHAUSTED,
        h2.errors.ErrorCodes.INADEQUATE_SECURITY: StatusCode.PERMISSION_DENIED,
    }
    code = by_reset.get(error_code, StatusCode.INTERNAL)
    name = getattr(error_code, "name", error_code)
    cls = _Refused if error_code == h2.errors.ErrorCodes.REFUSED_STREAM else RpcError
    return cls(code, f"stream reset by server ({name})")


def _decode(method: str, response_type: type[M], data: bytes) -> M:
    try:
        return response_type.FromString(data)
    except DecodeError as exc:
        raise RpcError(
            StatusCode.INTERNAL,
            f"{method}: cannot decode response as {response_type.DESCRIPTOR.full_name}: {exc}",
        ) from None


def _deadline_error(method: str, timeout: float | None) -> RpcError:
    limit = "the deadline" if timeout is None else f"deadline of {timeout:g}s"
    return RpcError(StatusCode.DEADLINE_EXCEEDED, f"{method}: {limit} exceeded")


def _why(exc: BaseException) -> str:
    """The most specific reason inside trio's 'all attempts to connect failed' wrapper."""
    cause: BaseException | None = exc.__cause__
    while isinstance(cause, BaseExceptionGroup) and cause.exceptions:
        cause = cause.exceptions[0]
    leaf = cause if cause is not None else exc
    if isinstance(leaf, OSError) and isinstance(leaf.errno, int) and leaf.errno > 0:
        return os.strerror(leaf.errno)
    return getattr(leaf, "strerror", None) or str(leaf) or type(leaf).__name__
