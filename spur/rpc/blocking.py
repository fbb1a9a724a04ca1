"""Blocking unary gRPC calls without Trio, for short-lived CLI processes.

Importing Trio costs a CLI command about 120 ms of its ~380 ms cold start; a query command makes one
or two unary calls and needs no event loop. This module speaks the same wire protocol as
:mod:`spur.rpc.channel` over a plain blocking socket and imports only ``socket``, protobuf and its own HTTP/2 client
(:mod:`spur.rpc.h2_unary`: the ``h2`` package's import alone was a quarter of a query's start-up).

Contracts (the same as the Trio channel's for unary calls):

- ``BlockingChannel(target)`` connects lazily, on the first call; ``close()`` (or leaving ``with``)
  closes the connection. Calls are sequential: one in flight at a time.
- Every failure is an :class:`RpcError`: UNAVAILABLE when the target cannot be reached (``"cannot
  connect to host:port: <why>"``) or the connection drops; DEADLINE_EXCEEDED when ``timeout`` passes
  (also sent as ``grpc-timeout``); otherwise the status the server sent.
- ``tls`` (spur.rpc.tls.ClientTLS): the connection is TLS, the server verified against the CA; ``ssl`` is
  imported only then. A failed handshake is UNAVAILABLE (``"cannot connect to host:port: TLS handshake
  failed: <why>"``).
- :meth:`BlockingChannel.stream` starts a server-streaming call; its :class:`BlockingStream` hands out
  messages as they arrive, and :func:`wait_readable` follows several streams (and other file
  descriptors: a signal wake-up pipe, a child's pidfd) at once, so a command that follows a job needs
  no event loop either.
- :func:`blocking_controller_stub` has one method per Controller RPC: a unary one returns an awaitable
  that has already completed, a server-streaming one its stream, whose ``async for`` steps have already
  completed too; so ``async def body(stub)`` code written for the Trio stub runs unchanged under
  :func:`drive` (which raises :class:`NeedsEventLoop` if the body awaits anything else).
"""

from __future__ import annotations

import _socket  # the C module: ``socket``'s import (enums, selectors) costs a CLI call ~3 ms
import os
import time
from collections.abc import Callable, Coroutine, Generator, Iterable, Iterator

from spur.rpc.h2_unary import Data, GoAway, H2Connection, H2Error, Headers, Reset
from spur.rpc.status import RpcError, StatusCode
from spur.rpc.wire import (
    ACCEPT_ENCODING,
    CONTENT_TYPE,
    MessageDecoder,
    decode_headers,
    encode_timeout,
    frame_message,
    parse_target,
    response_status,
    validate_metadata,
)

__all__ = ["BlockingChannel", "BlockingStub", "NeedsEventLoop", "blocking_controller_stub", "drive"]

TYPE_CHECKING = False  # typing itself is not imported at run time (a CLI start-up cost)
if TYPE_CHECKING:
    from typing import Any, Generic, Protocol, TypeVar

    from google.protobuf.descriptor import ServiceDescriptor

    from spur.rpc.tls import ClientTLS

    M_co = TypeVar("M_co", covariant=True)
    T = TypeVar("T")

    class _Named(Protocol):
        @property
        def full_name(self) -> str: ...

    class Message(Protocol):
        """A request: a protobuf message or a :mod:`spur.rpc.lite` one."""

        @property
        def DESCRIPTOR(self) -> _Named: ...  # noqa: N802 - protobuf's name

        def SerializeToString(self) -> bytes: ...  # noqa: N802 - protobuf's name

    class ResponseType(Protocol[M_co]):
        """What decodes a response: a protobuf message class, a lite one or a ``lite.Adaptive``
        (each has a ``DESCRIPTOR`` too, used to name it in errors; types-protobuf declares that an
        instance attribute, which a Protocol cannot ask of a class)."""

        def FromString(self, data: bytes, /) -> M_co: ...  # noqa: N802 - protobuf's name

    # A stub's method: (path, request class, response type, client streaming, server streaming).
    _Method = tuple[str, type[Message], ResponseType[object], bool, bool]
if TYPE_CHECKING:
    M = TypeVar("M")

    class _Generic(Generic[M]):
        """``Generic`` for the type checker."""

else:  # typing is not imported at run time (a query command's start-up cost): a stand-in base

    M = "M"

    class _Generic:
        def __class_getitem__(cls, item: object) -> type:
            return cls


USER_AGENT = "spur-rpc-blocking/0.1"
# The last TLS session per target, offered again by the next connection in this process.
_SESSIONS: dict[tuple[str, Any], Any] = {}
_READ = 256 * 1024


class NeedsEventLoop(RuntimeError):
    """A coroutine run by :func:`drive` awaited something that needs a real event loop."""


class BlockingChannel:
    """One blocking HTTP/2 connection to ``target`` (``host:port``, ``http://host:port``, ``[v6]:port``)."""

    def __init__(
        self,
        target: str,
        *,
        connect_timeout: float = 5.0,
        metadata: dict[str, str] | None = None,
        max_message_bytes: int = 64 * 1024 * 1024,
        tls: ClientTLS | None = None,
    ) -> None:
        self.host, self.port = parse_target(target)
        self.tls = tls
        self.authority = f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"
        self.connect_timeout = connect_timeout
        self.metadata = dict(metadata or {})
        self.max_message_bytes = max_message_bytes
        self._sock: _socket.socket | None = None
        self._h2: H2Connection | None = None

    def __enter__(self) -> BlockingChannel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection (GOAWAY, best effort). Idempotent."""
        sock, conn = self._sock, self._h2
        self._sock = self._h2 = None
        if sock is None:
            return
        try:
            if conn is not None:
                conn.close()
                sock.sendall(conn.data_to_send())
        except OSError:
            pass
        sock.close()

    # ------------------------------------------------------------------ calls

    def unary(
        self,
        method: str,
        request: Message,
        response_type: ResponseType[M],
        *,
        timeout: float | None = None,
        metadata: dict[str, str] | None = None,
    ) -> M:
        """One request, one response; raises :class:`RpcError` on any non-OK outcome."""
        deadline = None if timeout is None else time.monotonic() + timeout
        return self._guarded(
            method, timeout, lambda: self._unary(method, request, response_type, deadline, metadata)
        )

    def _unary(
        self,
        method: str,
        request: Message,
        response_type: ResponseType[M],
        deadline: float | None,
        metadata: dict[str, str] | None,
    ) -> M:
        exchange = _Exchange(self, method, request, deadline, metadata)
        while not exchange.ended:
            exchange.receive(deadline)
        exchange.finish()
        messages = exchange.messages
        if len(messages) != 1:
            raise RpcError(StatusCode.INTERNAL, f"{method}: expected exactly one response message")
        return _decode(method, response_type, messages[0])

    def stream(
        self,
        method: str,
        request: Message,
        response_type: ResponseType[M],
        *,
        timeout: float | None = None,
        metadata: dict[str, str] | None = None,
    ) -> BlockingStream[M]:
        """Start a server-streaming call; its messages are read through the returned stream. One call at
        a time per channel: the stream owns the connection until it ends or is closed."""
        deadline = None if timeout is None else time.monotonic() + timeout
        exchange = self._guarded(
            method, timeout, lambda: _Exchange(self, method, request, deadline, metadata)
        )
        return BlockingStream(self, exchange, method, response_type, deadline, timeout)

    def _guarded(self, method: str, timeout: float | None, step: Callable[[], T]) -> T:
        """``step()`` with socket trouble turned into the RpcError a call reports (closing the channel)."""
        try:
            return step()
        except TimeoutError:
            self.close()
            raise RpcError(StatusCode.DEADLINE_EXCEEDED, _deadline_text(method, timeout)) from None
        except (OSError, H2Error) as exc:
            self.close()
            raise RpcError(StatusCode.UNAVAILABLE, f"connection to {self.authority} lost: {exc}") from None

    # ------------------------------------------------------------------ plumbing

    def _connect(self, deadline: float | None) -> tuple[_socket.socket, H2Connection]:
        if self._sock is not None and self._h2 is not None:
            return self._sock, self._h2
        limit = self.connect_timeout if deadline is None else min(self.connect_timeout, _left(deadline))
        try:
            # An ASCII host goes to getaddrinfo as bytes: a str host loads the idna codec (~1 ms).
            host: str | bytes = self.host.encode() if self.host.isascii() else self.host
            sock = _create_connection(host, self.port, limit)
        except TimeoutError:
            if deadline is not None and _left(deadline) <= limit:
                raise RpcError(
                    StatusCode.DEADLINE_EXCEEDED, f"deadline exceeded while connecting to {self.authority}"
                ) from None
            raise RpcError(
                StatusCode.UNAVAILABLE,
                f"cannot connect to {self.authority}: timed out after {self.connect_timeout:g}s",
            ) from None
        except OSError as exc:
            why = os.strerror(exc.errno) if isinstance(exc.errno, int) and exc.errno > 0 else str(exc)
            raise RpcError(StatusCode.UNAVAILABLE, f"cannot connect to {self.authority}: {why}") from None
        sock.setsockopt(_socket.IPPROTO_TCP, _socket.TCP_NODELAY, 1)
        if self.tls is not None:
            sock = self._handshake(sock, limit)
        conn = H2Connection()
        self._sock, self._h2 = sock, conn
        return sock, conn

    def _handshake(self, sock: _socket.socket, limit: float | None) -> _socket.socket:
        """TLS over the connected socket (offering this target's last session); closes it on failure."""
        import socket as socket_module
        import ssl

        assert self.tls is not None
        plain = socket_module.socket(sock.family, sock.type, sock.proto, fileno=sock.detach())
        context = self.tls.context()
        key = (self.authority, context)  # a session is only valid with the context that made it
        tls_sock = context.wrap_socket(
            plain,
            server_hostname=self.tls.server_hostname or self.host,
            do_handshake_on_connect=False,
            session=_SESSIONS.get(key),
        )
        try:
            tls_sock.settimeout(limit)
            tls_sock.do_handshake()
        except TimeoutError:
            tls_sock.close()
            raise RpcError(
                StatusCode.UNAVAILABLE, f"cannot connect to {self.authority}: TLS handshake timed out"
            ) from None
        except (ssl.SSLError, OSError) as exc:
            tls_sock.close()
            from spur.rpc.tls import describe_ssl_error

            why = describe_ssl_error(exc)
            raise RpcError(
                StatusCode.UNAVAILABLE, f"cannot connect to {self.authority}: TLS handshake failed: {why}"
            ) from None
        _SESSIONS[key] = tls_sock.session
        return tls_sock

    def _headers(
        self, method: str, deadline: float | None, metadata: dict[str, str] | None
    ) -> list[tuple[str, str]]:
        merged = {str(k).lower(): v for k, v in self.metadata.items()}
        merged.update({str(k).lower(): v for k, v in (metadata or {}).items()})
        headers = [
            (":method", "POST"),
            (":scheme", "http" if self.tls is None else "https"),
            (":path", method),
            (":authority", self.authority),
            ("content-type", CONTENT_TYPE),
            ("te", "trailers"),
            ("user-agent", USER_AGENT),
            ("grpc-accept-encoding", ACCEPT_ENCODING),
        ]
        if deadline is not None:
            headers.append(("grpc-timeout", encode_timeout(deadline - time.monotonic())))
        return headers + validate_metadata(merged)


class _Exchange:
    """One call on a channel's connection: the request sent (as far as flow control allows), then the
    response's headers, messages and trailers gathered as :meth:`receive` reads them."""

    def __init__(
        self,
        channel: BlockingChannel,
        method: str,
        request: Message,
        deadline: float | None,
        metadata: dict[str, str] | None,
    ) -> None:
        self.channel = channel
        self.sock, self.conn = channel._connect(deadline)
        self.stream_id = self.conn.start_request(channel._headers(method, deadline, metadata))
        self._payload = memoryview(frame_message(request.SerializeToString()))
        self._sent = False
        self.headers: dict[str, str] | None = None
        self.trailers: dict[str, str] | None = None
        self._decoder = MessageDecoder(channel.max_message_bytes)
        self.messages: list[bytes] = []
        self.ended = False
        self._draining = False  # a graceful GOAWAY that still covers this stream: finish it, then reconnect
        self._flush()

    def _flush(self) -> None:
        if not self._sent and not self.ended:  # as much of the request as the peer's windows allow
            self._payload = self.conn.send_data(self.stream_id, self._payload)
            self._sent = not self._payload
        out = self.conn.data_to_send()
        if out:
            self.sock.sendall(out)

    def buffered(self) -> bool:
        """True when the TLS layer holds decrypted bytes that a select() on the socket would not see."""
        pending = getattr(self.sock, "pending", None)
        return bool(pending and pending())

    def receive(self, deadline: float | None) -> None:
        """One read from the socket (waiting until ``deadline``) and the events it completes."""
        self.sock.settimeout(_remaining(deadline))
        data = self.sock.recv(_READ)
        if not data:
            raise OSError("connection closed by peer")
        stream_id = self.stream_id
        for event in self.conn.receive_data(data):
            if isinstance(event, Headers) and event.stream_id == stream_id:
                if self.headers is None:
                    self.headers = decode_headers(event.headers)
                    self._decoder.encoding = self.headers.get("grpc-encoding", "identity")
                    if "grpc-status" in self.headers:
                        self.trailers = self.headers
                else:
                    self.trailers = decode_headers(event.headers)
                self.ended = self.ended or event.end_stream
            elif isinstance(event, Data) and event.stream_id == stream_id:
                self.messages.extend(self._decoder.feed(event.data))
                self.ended = self.ended or event.end_stream
            elif isinstance(event, Reset) and event.stream_id == stream_id:
                self.channel.close()
                reason = _error_name(event.error_code)
                raise RpcError(StatusCode.UNAVAILABLE, f"stream reset by server ({reason})")
            elif isinstance(event, GoAway) and (event.error_code or event.last_stream_id < stream_id):
                self.channel.close()
                raise RpcError(
                    StatusCode.UNAVAILABLE,
                    f"server closed the connection (GOAWAY {_error_name(event.error_code)})",
                )
            elif isinstance(event, GoAway):
                self._draining = True
        self._flush()

    def finish(self) -> None:
        """After the end of the stream: raise the call's status unless it is OK."""
        self.conn.forget(self.stream_id)
        if self._draining:
            self.channel.close()
        status = response_status(self.headers, self.trailers, self.channel.authority)
        if status is not None:
            raise status


class BlockingStream(_Generic[M]):
    """The responses of one server-streaming call (:meth:`BlockingChannel.stream`).

    Iterate it (``for``, or ``async for`` under :func:`drive`: each step has already completed) to read
    messages as they arrive; the iteration ends when the server ends the stream with OK and raises
    :class:`RpcError` otherwise. To follow several streams at once, :func:`wait_readable` tells which
    have something to read and :meth:`read_available` takes it without waiting. :meth:`close` drops the
    call (and its channel's connection)."""

    def __init__(
        self,
        channel: BlockingChannel,
        exchange: _Exchange,
        method: str,
        response_type: ResponseType[M],
        deadline: float | None,
        timeout: float | None,
    ) -> None:
        self.channel, self._exchange, self.method = channel, exchange, method
        self._response_type, self._deadline, self._timeout = response_type, deadline, timeout
        self._pending: list[M] = []  # decoded for ``async for`` and not handed out yet
        self.done = False  # every message handed out and the status checked

    def fileno(self) -> int:
        return self._exchange.sock.fileno()

    def ready(self) -> bool:
        """True when :meth:`read_available` has something without waiting on the socket."""
        ex = self._exchange
        return bool(ex.messages) or ex.ended or ex.buffered()

    def read_available(self) -> list[M]:
        """Messages that arrived; reads the socket once unless messages are already waiting (so call it
        when :func:`wait_readable` named this stream, or to wait for the next messages). Raises RpcError
        for a failed call; after the end of the stream it returns [] and sets :attr:`done`."""
        ex = self._exchange
        if self.done:
            return []
        if not ex.messages and not ex.ended:
            self.channel._guarded(self.method, self._timeout, lambda: ex.receive(self._deadline))
        raw = ex.messages[:]
        ex.messages.clear()
        out = [_decode(self.method, self._response_type, data) for data in raw]
        if not out and ex.ended:
            self.done = True
            ex.finish()
        return out

    def __iter__(self) -> Iterator[M]:
        try:
            while not self.done:
                yield from self.read_available()
        finally:
            if not self.done:
                self.close()

    def __aiter__(self) -> BlockingStream[M]:
        return self

    def __anext__(self) -> _Done:
        """The next message as an already-completed awaitable (StopAsyncIteration at the end)."""
        try:
            while not self._pending and not self.done:
                self._pending.extend(self.read_available())
        except RpcError as exc:
            return _Done(error=exc)
        if self._pending:
            return _Done(self._pending.pop(0))
        return _Done(error=StopAsyncIteration())

    def close(self) -> None:
        """Stop following the call: the channel's connection is closed (the server sees it cancelled)."""
        self.done = True
        self.channel.close()


def wait_readable(
    streams: Iterable[BlockingStream[Any]], fds: Iterable[int] = (), timeout: float | None = None
) -> tuple[list[BlockingStream[Any]], list[int]]:
    """Wait (up to ``timeout`` seconds; None: no limit) until one of ``streams`` has something to read or
    one of ``fds`` is readable; returns those streams and fds (both empty when the time ran out).
    Streams with messages already taken from the socket count at once."""
    import select

    streams, fds = [s for s in streams if not s.done], list(fds)
    ready = [s for s in streams if s.ready()]
    if ready:
        return ready, []
    by_fd = {s.fileno(): s for s in streams}
    readable, _, _ = select.select([*by_fd, *fds], [], [], timeout)
    return [by_fd[fd] for fd in readable if fd in by_fd], [fd for fd in readable if fd not in by_fd]


def _type_name(response_type: ResponseType[object]) -> str:
    descriptor = getattr(response_type, "DESCRIPTOR", None)
    return str(getattr(descriptor, "full_name", type(response_type).__name__))


def _decode(method: str, response_type: ResponseType[M], data: bytes) -> M:
    try:
        return response_type.FromString(data)
    except _decode_errors(response_type) as exc:
        raise RpcError(
            StatusCode.INTERNAL,
            f"{method}: cannot decode response as {_type_name(response_type)}: {exc}",
        ) from None


def _create_connection(host: str | bytes, port: int, timeout: float | None) -> _socket.socket:
    """``socket.create_connection((host, port), timeout)`` on the C socket type: each address
    getaddrinfo gives, in order, until one connects; the last error otherwise."""
    error: OSError | None = None
    for family, kind, proto, _name, address in _socket.getaddrinfo(host, port, 0, _socket.SOCK_STREAM):
        sock = _socket.socket(family, kind, proto)
        try:
            sock.settimeout(timeout)
            sock.connect(address)
            return sock
        except OSError as exc:
            sock.close()
            error = exc
    raise error if error is not None else OSError(f"getaddrinfo returned no address for {host!r}")


def _decode_errors(response_type: ResponseType[object]) -> tuple[type[Exception], ...]:
    """What ``response_type.FromString`` raises on bad input: a :mod:`spur.rpc.lite` class names its
    own; for a protobuf class it is protobuf's (imported here, so lite-only processes never load it)."""
    own = getattr(response_type, "DecodeError", None)
    if isinstance(own, type) and issubclass(own, Exception):
        return (own,)
    from google.protobuf.message import DecodeError

    return (DecodeError,)


_H2_ERRORS = (
    "NO_ERROR", "PROTOCOL_ERROR", "INTERNAL_ERROR", "FLOW_CONTROL_ERROR", "SETTINGS_TIMEOUT",
    "STREAM_CLOSED", "FRAME_SIZE_ERROR", "REFUSED_STREAM", "CANCEL", "COMPRESSION_ERROR",
    "CONNECT_ERROR", "ENHANCE_YOUR_CALM", "INADEQUATE_SECURITY", "HTTP_1_1_REQUIRED",
)  # fmt: skip


def _error_name(code: int) -> str:
    """An HTTP/2 error code's name (``CANCEL``, as the Trio channel words it), or its number."""
    return _H2_ERRORS[code] if 0 <= code < len(_H2_ERRORS) else str(code)


def _remaining(deadline: float | None) -> float | None:
    return None if deadline is None else _left(deadline)


def _left(deadline: float) -> float:
    """Seconds to ``deadline``; TimeoutError once it has passed."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError
    return left


def _deadline_text(method: str, timeout: float | None) -> str:
    limit = "the deadline" if timeout is None else f"deadline of {timeout:g}s"
    return f"{method}: {limit} exceeded"


# ---------------------------------------------------------------------- stub + driver


class _Done:
    """An awaitable that is already complete (its value, or the error to raise)."""

    def __init__(self, value: Any = None, error: BaseException | None = None) -> None:
        self.value, self.error = value, error

    def __await__(self) -> Generator[Any, None, Any]:
        if self.error is not None:
            raise self.error
        return self.value
        yield  # pragma: no cover - makes this a generator


class BlockingStub:
    """RPCs of a service on a :class:`BlockingChannel`. A unary call runs at once and returns an
    already-completed awaitable; a server-streaming call returns its :class:`BlockingStream` (which
    ``async for`` reads under :func:`drive` too). Client-streaming RPCs raise :class:`NeedsEventLoop`."""

    def __init__(self, channel: BlockingChannel, service: ServiceDescriptor) -> None:
        from google.protobuf import message_factory

        self.channel = channel
        self.service: _Named = service
        self._methods: dict[str, _Method] = {}
        for m in service.methods:
            response_type: ResponseType[object] = message_factory.GetMessageClass(m.output_type)
            self._methods[m.name] = (
                f"/{service.full_name}/{m.name}",
                message_factory.GetMessageClass(m.input_type),
                response_type,
                m.client_streaming,
                m.server_streaming,
            )

    def __getattr__(self, name: str) -> Any:
        methods = self.__dict__.get("_methods", {})
        if name not in methods:
            raise AttributeError(f"service {self.service.full_name} has no RPC named {name!r}")
        path, request_type, response_type, client_streaming, server_streaming = methods[name]

        def call(
            request: Message, *, timeout: float | None = None, metadata: dict[str, str] | None = None
        ) -> _Done | BlockingStream[object]:
            if client_streaming:
                raise NeedsEventLoop(f"{path} is a client-streaming RPC: use spur.rpc.channel")
            if not isinstance(request, request_type):
                raise TypeError(
                    f"{path} takes {request_type.DESCRIPTOR.full_name}, got {type(request).__name__}"
                )
            if server_streaming:
                return self.channel.stream(path, request, response_type, timeout=timeout, metadata=metadata)
            try:
                value = self.channel.unary(path, request, response_type, timeout=timeout, metadata=metadata)
            except RpcError as exc:
                return _Done(error=exc)
            return _Done(value)

        return call


def lite_controller_stub(channel: BlockingChannel) -> BlockingStub:
    """Blocking stub for the ``spur.v1.Controller`` RPCs :mod:`spur.rpc.lite` covers (GetJobs,
    SubmitJob), taking lite messages and returning lite ones (protobuf ones for responses larger
    than ``lite.PROTOBUF_ABOVE``, where protobuf is the faster decoder: :class:`spur.rpc.lite.Adaptive`).
    Other RPCs raise AttributeError."""
    from spur.rpc import lite

    stub = BlockingStub.__new__(BlockingStub)
    stub.channel = channel
    stub.service = lite.SERVICE_DESCRIPTOR
    stub._methods = {
        name: (f"/{lite.SERVICE}/{name}", lite.message_class(req), lite.Adaptive(resp), False, False)
        for name, (req, resp) in lite.METHODS.items()
    }
    return stub


def blocking_controller_stub(channel: BlockingChannel) -> BlockingStub:
    """Blocking stub for ``spur.v1.Controller``."""
    from spur.rpc.proto import spur_pb2

    return BlockingStub(channel, spur_pb2.DESCRIPTOR.services_by_name["Controller"])


def drive(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine that only awaits :class:`BlockingStub` calls, without an event loop.

    Raises :class:`NeedsEventLoop` (after closing the coroutine) if it awaits anything that suspends,
    e.g. a Trio sleep or a streaming call: run such bodies with ``trio.run`` instead.
    """
    try:
        coro.send(None)
    except StopIteration as stop:
        value: T = stop.value
        return value
    coro.close()
    raise NeedsEventLoop("the coroutine awaited something that needs an event loop")
