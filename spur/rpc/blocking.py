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
- :func:`blocking_controller_stub` has one method per unary Controller RPC, returning an awaitable that
  has already completed, so ``async def body(stub)`` code written for the Trio stub runs unchanged
  under :func:`drive` (which raises :class:`NeedsEventLoop` if the body awaits anything else).
"""

from __future__ import annotations

import _socket  # the C module: ``socket``'s import (enums, selectors) costs a CLI call ~3 ms
import os
import time
from collections.abc import Coroutine, Generator

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
    from typing import Any, Protocol, TypeVar

    from google.protobuf.descriptor import ServiceDescriptor

    from spur.rpc.tls import ClientTLS

    M = TypeVar("M")
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
        """What decodes a response: a protobuf message class, a lite one or a ``lite.Adaptive``."""

        @property
        def DESCRIPTOR(self) -> _Named: ...  # noqa: N802 - protobuf's name

        def FromString(self, data: bytes, /) -> M_co: ...  # noqa: N802 - protobuf's name

    # A stub's method: (path, request class, response type, streaming).
    _Method = tuple[str, type[Message], ResponseType[object], bool]
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
        try:
            return self._unary(method, request, response_type, deadline, timeout, metadata)
        except TimeoutError:
            self.close()
            raise RpcError(StatusCode.DEADLINE_EXCEEDED, _deadline_text(method, timeout)) from None
        except (OSError, H2Error) as exc:
            self.close()
            raise RpcError(StatusCode.UNAVAILABLE, f"connection to {self.authority} lost: {exc}") from None

    def _unary(
        self,
        method: str,
        request: Message,
        response_type: ResponseType[M],
        deadline: float | None,
        timeout: float | None,
        metadata: dict[str, str] | None,
    ) -> M:
        sock, conn = self._connect(deadline)
        stream_id = conn.start_request(self._headers(method, deadline, metadata))
        payload = memoryview(frame_message(request.SerializeToString()))
        sent = False
        headers: dict[str, str] | None = None
        trailers: dict[str, str] | None = None
        decoder = MessageDecoder(self.max_message_bytes)
        messages: list[bytes] = []
        ended = False
        draining = False  # a graceful GOAWAY that still covers this stream: finish it, then reconnect
        while True:
            if not sent and not ended:  # send as much of the request as the peer's windows allow
                payload = conn.send_data(stream_id, payload)
                sent = not payload
            out = conn.data_to_send()
            if out:
                sock.sendall(out)
            if ended:
                break
            sock.settimeout(_remaining(deadline))
            data = sock.recv(_READ)
            if not data:
                raise OSError("connection closed by peer")
            for event in conn.receive_data(data):
                if isinstance(event, Headers) and event.stream_id == stream_id:
                    if headers is None:
                        headers = decode_headers(event.headers)
                        decoder.encoding = headers.get("grpc-encoding", "identity")
                        if "grpc-status" in headers:
                            trailers = headers
                    else:
                        trailers = decode_headers(event.headers)
                    ended = ended or event.end_stream
                elif isinstance(event, Data) and event.stream_id == stream_id:
                    messages.extend(decoder.feed(event.data))
                    ended = ended or event.end_stream
                elif isinstance(event, Reset) and event.stream_id == stream_id:
                    self.close()
                    reason = _error_name(event.error_code)
                    raise RpcError(StatusCode.UNAVAILABLE, f"stream reset by server ({reason})")
                elif isinstance(event, GoAway) and (event.error_code or event.last_stream_id < stream_id):
                    self.close()
                    raise RpcError(
                        StatusCode.UNAVAILABLE,
                        f"server closed the connection (GOAWAY {_error_name(event.error_code)})",
                    )
                elif isinstance(event, GoAway):
                    draining = True
        if draining:
            self.close()
        status = response_status(headers, trailers, self.authority)
        if status is not None:
            raise status
        if len(messages) != 1:
            raise RpcError(StatusCode.INTERNAL, f"{method}: expected exactly one response message")
        try:
            return response_type.FromString(messages[0])
        except _decode_errors(response_type) as exc:
            raise RpcError(
                StatusCode.INTERNAL,
                f"{method}: cannot decode response as {response_type.DESCRIPTOR.full_name}: {exc}",
            ) from None

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
    """Unary RPCs of a service on a :class:`BlockingChannel`; each call runs at once and returns an
    already-completed awaitable. Server-streaming RPCs raise :class:`NeedsEventLoop` when called."""

    def __init__(self, channel: BlockingChannel, service: ServiceDescriptor) -> None:
        from google.protobuf import message_factory

        self.channel = channel
        self.service: _Named = service
        self._methods: dict[str, _Method] = {}
        for m in service.methods:
            # types-protobuf declares DESCRIPTOR an instance variable of Message, so a message class
            # does not match ResponseType's DESCRIPTOR; generated classes do have it as a class attribute.
            response_type: ResponseType[object] = message_factory.GetMessageClass(m.output_type)  # type: ignore[assignment]
            self._methods[m.name] = (
                f"/{service.full_name}/{m.name}",
                message_factory.GetMessageClass(m.input_type),
                response_type,
                m.server_streaming or m.client_streaming,
            )

    def __getattr__(self, name: str) -> Any:
        methods = self.__dict__.get("_methods", {})
        if name not in methods:
            raise AttributeError(f"service {self.service.full_name} has no RPC named {name!r}")
        path, request_type, response_type, streaming = methods[name]

        def call(
            request: Message, *, timeout: float | None = None, metadata: dict[str, str] | None = None
        ) -> _Done:
            if streaming:
                raise NeedsEventLoop(f"{path} is a streaming RPC: use spur.rpc.channel")
            if not isinstance(request, request_type):
                raise TypeError(
                    f"{path} takes {request_type.DESCRIPTOR.full_name}, got {type(request).__name__}"
                )
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
        name: (f"/{lite.SERVICE}/{name}", lite.message_class(req), lite.Adaptive(resp), False)
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
