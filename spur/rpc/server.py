"""gRPC server on Trio + h2: unary and server-streaming RPCs, wire-compatible with stock gRPC clients.

Contracts:

- A servicer has one async method per RPC, named as in the .proto. Unary:
  ``async def M(self, request, context) -> response``; server-streaming: an async generator
  ``async def M(self, request, context): yield response``.
- A unary method may also have a synchronous companion ``def M_now(self, request, context) ->
  response | None`` for calls that usually need no waiting. When the server has no async
  ``interceptor``, the connection's reader calls it as soon as the request is whole, and answers
  with what it returns, without starting a task for the call. When it returns None, the call goes
  to ``M`` as usual. It must not block, and it follows ``M``'s error contract.
- A handler raising :class:`RpcError` ends the call with that status, message and trailing metadata; any
  other exception ends it with INTERNAL (``"<ExcType>: <text>"``), is logged with its traceback, and the
  server keeps serving. A passed ``grpc-timeout`` cancels the handler and answers DEADLINE_EXCEEDED; a
  client RST_STREAM (or a dropped connection) cancels the handler and answers nothing. A call for a
  companion that is still waiting for the rest of its request has no task yet: it is answered
  DEADLINE_EXCEEDED up to ``DEADLINE_TICK`` (50 ms) after its deadline, by the one task per
  connection that keeps such deadlines (:mod:`spur.rpc.deadline_watch`).
- Unknown service/method -> UNIMPLEMENTED; undecodable request -> INVALID_ARGUMENT; request larger than
  ``max_message_bytes`` -> RESOURCE_EXHAUSTED. Errors before any response message use a trailers-only
  response.
- Cancelling :meth:`Server.serve` shuts down: listeners close, in-flight calls end with UNAVAILABLE,
  each connection gets a GOAWAY.
- ``serve(..., tls=ServerTLS)`` (spur.rpc.tls) serves TLS: in ``required`` mode every connection must
  complete a TLS handshake (a plaintext client is disconnected), in ``optional`` mode the first byte of
  each connection says which it is. Each connection is wrapped with the context current when it was
  accepted, so a certificate reload reaches new connections only.

No work before authentication:

- An ``authenticator`` (:class:`Authenticator`, synchronous, headers only) runs when a call's HEADERS
  arrive, before any of its DATA is accepted. A refused call is answered at once (trailers-only
  UNAUTHENTICATED / PERMISSION_DENIED, then RST_STREAM); its DATA is discarded unread (h2 drops DATA on
  a reset stream and keeps the connection window open) and its stream is never granted window beyond
  the initial one. Only an accepted call has its DATA buffered, decoded (up to ``max_message_bytes``)
  and its stream window re-opened.
- With only an async ``interceptor`` it runs in the call's task before the body is awaited (not after
  it is decoded, as it once did): DATA that arrives meanwhile is held raw, within the stream's initial
  window (no window is released and nothing is decoded until the interceptor accepts the call).
- When the authenticator says a credential is required (``requires_credential``, ``[auth] mode =
  "required"``), a connection is *pre-auth* until one of its calls is accepted, and :class:`PreAuthLimits`
  bound what it may cost (defaults): at most ``max_connections`` (512) pre-auth connections per server
  (one more closes the oldest at once, so idle connections cannot lock out a client that authenticates
  with its first call); a pre-auth connection advertises only HTTP/2's
  default windows (64 KiB per stream and in all: a refused stream can be sent at most that much) and
  gets the full ones (4 MiB / 16 MiB) when a call is accepted; it reads at most ``read_bytes`` (16 KiB)
  at a time (all it buffers) and ``max_bytes`` (1 MiB) in all, has ``timeout`` (10 s) from accept to
  get a call accepted, and may have ``max_refusals`` (8) calls refused; past any of these it gets a
  GOAWAY (ENHANCE_YOUR_CALM, naming the bound) after the answers already queued, and is closed. In
  permissive and disabled modes none of this applies (calls without a credential are accepted, as
  before).
"""

from __future__ import annotations

import inspect
import logging
import math
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NoReturn, Protocol, cast

import h2.errors
import h2.events
import h2.exceptions
import trio
from google.protobuf import message_factory
from google.protobuf.descriptor import ServiceDescriptor
from google.protobuf.message import DecodeError, Message

from spur.rpc.deadline_watch import DeadlineWatch
from spur.rpc.h2_server import ServerH2Connection
from spur.rpc.status import RpcError, StatusCode, encode_grpc_message
from spur.rpc.transport import READ_SIZE as _FULL_READ
from spur.rpc.transport import STREAM_WINDOW, H2Transport, StreamGone, server_engine
from spur.rpc.wire import (
    ACCEPT_ENCODING,
    CONTENT_TYPE,
    MessageDecoder,
    decode_headers,
    frame_message,
    parse_timeout,
    user_metadata,
    validate_metadata,
)

if TYPE_CHECKING:
    from spur.rpc.tls import ServerTLS

__all__ = [
    "Authenticator",
    "CallContext",
    "Interceptor",
    "ListenError",
    "Observer",
    "PreAuthLimits",
    "Server",
]

log = logging.getLogger("spur.rpc.server")

Interceptor = Callable[["CallContext"], Awaitable[None]]
# Called once per finished call with (method path, status code name, seconds); must not raise or block.
Observer = Callable[[str, str, float], None]
# Concurrent calls one connection may have open (SETTINGS_MAX_CONCURRENT_STREAMS); clients queue the
# rest (spur.rpc.channel waits for a slot). Kept small on purpose: h2 counts open streams by walking
# all of them on every new HEADERS frame, so thousands of concurrent calls on one connection made
# each new call O(open calls) and an overloaded controller spent most of its CPU there (bench.fleet
# profile, issue 16); a bounded window is also the transport's share of backpressure.
_MAX_STREAMS = 128
# Long status messages are cut: peers cap header blocks (grpcio at 8-16 KiB).
_MAX_STATUS_MESSAGE = 2048
_RESPONSE_HEADERS = (
    (":status", "200"),
    ("content-type", CONTENT_TYPE),
    ("grpc-accept-encoding", ACCEPT_ENCODING),
)


class ListenError(OSError):
    """A server could not bind its address; ``str()`` names the address and the reason (the daemons
    turn it into their start-up message, see :mod:`spur.startup`)."""

    def __init__(self, host: str, port: int, cause: OSError) -> None:
        super().__init__(cause.errno, cause.strerror or str(cause))
        self.host, self.port = host, port

    def __str__(self) -> str:
        return f"cannot listen on {self.host or '*'}:{self.port}: {self.strerror}"


@dataclass(frozen=True)
class PreAuthLimits:
    """What a connection that has had no call accepted may cost while credentials are required (see the
    module docstring)."""

    max_connections: int = 512
    timeout: float = 10.0
    read_bytes: int = 16 * 1024
    max_bytes: int = 1024 * 1024
    max_refusals: int = 8


class CallContext:
    """What a handler (and the interceptor) knows about the call it serves."""

    def __init__(self, method: str, metadata: dict[str, str], peer: str, deadline: float | None) -> None:
        self.method = method
        self.metadata = metadata
        self.peer = peer
        self.deadline = deadline
        self.trailing_metadata: dict[str, str] = {}
        # The caller's verified identity, set by the interceptor (spur.auth.guard.ServerAuth).
        self.identity: Any = None

    def abort(self, code: StatusCode, message: str) -> NoReturn:
        """End the call with ``code`` and ``message`` (raises :class:`RpcError`)."""
        raise RpcError(code, message)

    def set_trailing_metadata(self, md: dict[str, str]) -> None:
        """Metadata sent in the trailers when the call ends (any status)."""
        self.trailing_metadata = {k.lower(): v for k, v in md.items()}

    def time_remaining(self) -> float | None:
        """Seconds until the deadline (None when the client set none)."""
        return None if self.deadline is None else max(0.0, self.deadline - trio.current_time())


class Authenticator(Protocol):
    """Header-time authentication, run synchronously when a call's HEADERS arrive (before its DATA)."""

    @property
    def requires_credential(self) -> bool:
        """True when a call without a valid credential is refused (the pre-auth limits apply)."""
        ...

    def authenticate_call(self, context: CallContext) -> None:
        """Set ``context.identity`` or raise :class:`RpcError` (UNAUTHENTICATED, PERMISSION_DENIED).
        Reads only ``context.method``, ``metadata`` and ``peer``; must not block."""
        ...


class _AuthenticatorInterceptor:
    """An :class:`Authenticator` as an async :data:`Interceptor`, for callers that run the server's
    policy themselves (the REST layer awaits ``server.interceptor``)."""

    def __init__(self, authenticator: Authenticator) -> None:
        self.authenticator = authenticator

    async def __call__(self, context: CallContext) -> None:
        self.authenticator.authenticate_call(context)


@dataclass(frozen=True)
class _Method:
    path: str
    request_type: type[Message]
    response_type: type[Message]
    server_streaming: bool
    handler: Callable[..., Any] | None  # None: servicer lacks the method -> UNIMPLEMENTED
    # The synchronous companion ``M_now`` (unary only): an answer from the reader, or None.
    now: Callable[[Any, CallContext], Message | None] | None = None


class Server:
    """A gRPC server; register services, then ``await serve(host, port)``."""

    def __init__(
        self,
        *,
        interceptor: Interceptor | None = None,
        authenticator: Authenticator | None = None,
        max_message_bytes: int = 64 * 1024 * 1024,
        observer: Observer | None = None,
        preauth: PreAuthLimits | None = None,
    ) -> None:
        """``authenticator`` runs on every call's HEADERS (see the module docstring); ``interceptor``
        runs in the call's task before its body is awaited. With an authenticator and no interceptor,
        :attr:`interceptor` is the authenticator as an async interceptor (for callers such as the REST
        layer that apply the server's policy themselves); the server does not run it a second time."""
        self.authenticator = authenticator
        self.call_interceptor = interceptor
        self.interceptor: Interceptor | None = interceptor
        if interceptor is None and authenticator is not None:
            self.interceptor = _AuthenticatorInterceptor(authenticator)
        self.observer = observer
        self.max_message_bytes = max_message_bytes
        self.preauth = preauth or PreAuthLimits()
        self._preauth: dict[_ServerConnection, None] = {}  # insertion order: oldest first
        self._methods: dict[str, _Method] = {}
        self._services: set[str] = set()
        self._last_excess_log = -math.inf
        self._excess_since_log = 0

    def requires_credential(self) -> bool:
        """Whether the pre-auth connection limits apply now (the authenticator requires a credential)."""
        return self.authenticator is not None and self.authenticator.requires_credential

    @property
    def preauth_connections(self) -> int:
        """How many connections are pre-auth now (at most ``preauth.max_connections``)."""
        return len(self._preauth)

    def admit_preauth(self, conn: _ServerConnection) -> None:
        """Count ``conn`` as pre-auth; at the bound, the oldest pre-auth connection is closed at once to
        make room (so a flood of idle connections cannot lock out a client that authenticates with its
        first call: it holds its slot only for that one round trip)."""
        while len(self._preauth) >= self.preauth.max_connections:
            oldest = next(iter(self._preauth))
            del self._preauth[oldest]
            oldest.evict()
        self._preauth[conn] = None

    def note_preauth_closed(self, peer: str, why: str) -> None:
        """Log closed pre-auth connections at most once a minute (a flood must not flood the log)."""
        self._excess_since_log += 1
        now = trio.current_time()
        if now - self._last_excess_log >= 60.0:
            log.warning(
                "closed %d unauthenticated connection(s) since the last message; the last from %s: %s",
                self._excess_since_log,
                peer,
                why,
            )
            self._last_excess_log = now
            self._excess_since_log = 0

    def leave_preauth(self, conn: _ServerConnection) -> None:
        """``conn`` authenticated a call or closed."""
        self._preauth.pop(conn, None)

    def add_service(self, service: ServiceDescriptor, servicer: object) -> None:
        """Serve every RPC of ``service`` from the same-named async methods of ``servicer``.

        Raises ValueError for a service registered twice or one with client-streaming RPCs (unsupported).
        """
        if service.full_name in self._services:
            raise ValueError(f"service {service.full_name} is already registered")
        for method in service.methods:
            if method.client_streaming:
                raise ValueError(f"{method.full_name}: client-streaming RPCs are not supported")
        companions = {m.name: getattr(servicer, f"{m.name}_now", None) for m in service.methods}
        for method in service.methods:
            now = companions[method.name]
            if now is not None and (method.server_streaming or inspect.iscoroutinefunction(now)):
                raise ValueError(
                    f"{method.full_name}: {method.name}_now must be synchronous, for a unary RPC"
                )
        self._services.add(service.full_name)
        for method in service.methods:
            path = f"/{service.full_name}/{method.name}"
            self._methods[path] = _Method(
                path=path,
                request_type=message_factory.GetMessageClass(method.input_type),
                response_type=message_factory.GetMessageClass(method.output_type),
                server_streaming=method.server_streaming,
                handler=getattr(servicer, method.name, None),
                now=companions[method.name],
            )

    def method_for(self, path: str) -> _Method | RpcError:
        """Look up a ``/package.Service/Method`` path; an UNIMPLEMENTED error if unknown."""
        found = self._methods.get(path)
        if found is not None:
            return found
        service, _, name = path.lstrip("/").partition("/")
        if service not in self._services:
            return RpcError(StatusCode.UNIMPLEMENTED, f"unknown service {service}")
        return RpcError(StatusCode.UNIMPLEMENTED, f"unknown method {name} for service {service}")

    async def serve(
        self,
        host: str,
        port: int,
        *,
        tls: ServerTLS | None = None,
        task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Listen on ``host:port`` (0 picks a free port), report the bound port via ``task_status``,
        and serve until cancelled. With port 0 and a host resolving to several addresses, only the
        first address is bound (so every listener shares one port). A failed bind raises
        :class:`ListenError` (an OSError naming the address). ``tls``: serve TLS
        (spur.rpc.tls.ServerTLS: required or optional); None: plaintext."""
        try:
            listeners = await trio.open_tcp_listeners(port, host=host or None)
        except OSError as exc:
            raise ListenError(host, port, exc) from exc
        if port == 0 and len(listeners) > 1:
            for extra in listeners[1:]:
                await extra.aclose()
            listeners = listeners[:1]
        bound = listeners[0].socket.getsockname()[1]
        log.info("gRPC server listening on %s:%d%s", host or "*", bound, f" (TLS {tls.mode})" if tls else "")
        task_status.started(bound)
        if tls is None:
            await trio.serve_listeners(self._handle_connection, listeners)
            return

        async def handle_tls(stream: trio.SocketStream) -> None:
            from spur.rpc.tls import accept

            served = await accept(stream, tls, _peer_of(stream))
            if served is not None:
                await self._handle_connection(served)

        await trio.serve_listeners(handle_tls, listeners)

    async def _handle_connection(self, stream: trio.abc.Stream) -> None:
        try:
            await _ServerConnection(self, stream).run()
        except Exception:
            log.exception("gRPC connection handler failed")


class _OverSocket(Protocol):
    """A stream this server accepts, as ``_peer_of`` reads it: a socket stream, or TLS over one."""

    @property
    def socket(self) -> trio.socket.SocketType: ...


def _peer_of(stream: trio.abc.Stream) -> str:
    # a trio.SSLStream: its socket stream
    inner = cast("_OverSocket", getattr(stream, "transport_stream", stream))
    try:
        addr = inner.socket.getpeername()
    except OSError:
        return "unknown"
    host, port = addr[0], addr[1]
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


@dataclass(eq=False)
class _Call:
    stream_id: int
    path: str
    headers: dict[str, str]
    decoder: MessageDecoder
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    messages: list[bytes] = field(default_factory=list)
    request_done: trio.Event = field(default_factory=trio.Event)
    error: RpcError | None = None
    reset_by_peer: bool = False
    remote_ended: bool = False
    headers_sent: bool = False
    finished: bool = False
    unacked: int = 0
    # False until the call is authenticated: its DATA is held raw in `pending` and no window is released.
    accepted: bool = False
    pending: list[bytes] = field(default_factory=list)
    # Set while a call for a method with an ``M_now`` companion waits for its whole request.
    inline: tuple[_Method, CallContext] | None = None
    request: Message | None = None  # decoded by the companion, which left the call to the handler
    timed: bool = False  # its deadline is in the connection's DeadlineWatch (no task holds it)
    began: float = 0.0  # when its HEADERS arrived (Trio's clock): set for a call the reader serves


class _ServerConnection(H2Transport[ServerH2Connection]):
    def __init__(self, server: Server, stream: trio.abc.Stream) -> None:
        super().__init__(stream, server_engine(_MAX_STREAMS))
        self.server = server
        self.peer = _peer_of(stream)
        self.calls: dict[int, _Call] = {}
        self._nursery: trio.Nursery | None = None
        # Pre-auth accounting (only while the server requires a credential): see the module docstring.
        self.preauth = False
        self._preauth_bytes = 0
        self._preauth_refusals = 0
        self._authenticated = trio.Event()
        self._linger_bytes = 0
        self._deadlines: DeadlineWatch[_Call] | None = None  # made with the first call that needs it

    async def run(self) -> None:
        limits = self.server.preauth
        if self.server.requires_credential():
            self.server.admit_preauth(self)
            self.preauth = True
            self.read_size = min(self.read_size, limits.read_bytes)
        self.start(open_windows=not self.preauth)
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                if self.preauth:
                    nursery.start_soon(self._preauth_deadline, limits.timeout)
                await self.run_io()
                nursery.cancel_scope.cancel()
        finally:
            self._leave_preauth()
            if not self.closed:  # the server shuts down: calls still waiting for a request end as tasks' do
                shutting_down = RpcError(StatusCode.UNAVAILABLE, "server is shutting down")
                for call in [call for call in self.calls.values() if call.inline is not None]:
                    self._end_waiting_call(call, shutting_down)
            await self.final_flush(goaway=not self.closed, linger_bytes=self._linger_bytes)

    def on_closed(self, reason: str) -> None:
        log.debug("connection from %s closed: %s", self.peer, reason)
        # Calls end now; run() ends the connection's other tasks once the writer has sent what is queued.
        for call in self.calls.values():
            call.scope.cancel()

    # ------------------------------------------------------------------ pre-auth bounds

    def _leave_preauth(self) -> None:
        if self.preauth:
            self.preauth = False
            self.server.leave_preauth(self)
            self._authenticated.set()

    def evict(self) -> None:
        """Closed to make room for a newer pre-auth connection (see :meth:`Server.admit_preauth`)."""
        if self.preauth and not self.closed:
            self._refuse_connection("too many connections have not authenticated")

    def _mark_authenticated(self) -> None:
        """A call on this connection was accepted: it is no longer pre-auth."""
        if self.preauth:
            self._leave_preauth()
            self.read_size = max(self.read_size, _FULL_READ)
            self.open_receive_windows()

    def _refuse_connection(self, why: str) -> None:
        """GOAWAY and close a pre-auth connection that went past one of its bounds."""
        self.server.note_preauth_closed(self.peer, why)
        try:
            self.h2.close_connection(
                error_code=h2.errors.ErrorCodes.ENHANCE_YOUR_CALM, additional_data=why.encode()
            )
        except h2.exceptions.ProtocolError:
            pass
        self._linger_bytes = self.server.preauth.read_bytes * 4
        self.close(why)

    async def _preauth_deadline(self, timeout: float) -> None:
        with trio.move_on_after(timeout):
            await self._authenticated.wait()
            return
        if self.preauth and not self.closed:
            self._refuse_connection(f"no call authenticated within {timeout:g} s")

    def on_received(self, nbytes: int) -> None:
        if not self.preauth:
            return
        self._preauth_bytes += nbytes
        limit = self.server.preauth.max_bytes
        if self._preauth_bytes > limit:
            self._refuse_connection(f"sent more than {limit} bytes before authenticating")

    # ------------------------------------------------------------------ events

    def handle_event(self, event: h2.events.Event) -> None:
        if isinstance(event, h2.events.RequestReceived):
            self._on_request(event.stream_id, decode_headers(event.headers or []))
        elif isinstance(event, h2.events.DataReceived):
            self._on_data(event)
        elif isinstance(event, h2.events.StreamEnded):
            call = self.calls.get(event.stream_id)
            if call is not None:
                call.remote_ended = True
                call.request_done.set()
                if call.inline is not None:
                    self._answer_now(call)
        elif isinstance(event, h2.events.StreamReset):
            call = self.calls.pop(event.stream_id, None)
            if call is not None:
                call.reset_by_peer = True
                call.remote_ended = True
                call.scope.cancel()
                call.request_done.set()
                self._unwatch(call)
        elif isinstance(event, h2.events.ConnectionTerminated):
            self.close(f"client sent GOAWAY ({event.error_code!r})")

    def _on_request(self, stream_id: int, headers: dict[str, str]) -> None:
        if headers.get(":method") != "POST":
            self.send_headers(stream_id, [(":status", "405")], end_stream=True)
            self.reset_stream(stream_id, h2.errors.ErrorCodes.NO_ERROR)
            return
        if not headers.get("content-type", "").startswith(CONTENT_TYPE):
            self.send_headers(stream_id, [(":status", "415")], end_stream=True)
            self.reset_stream(stream_id, h2.errors.ErrorCodes.NO_ERROR)
            return
        path = headers.get(":path", "")
        call = _Call(
            stream_id=stream_id,
            path=path,
            headers=headers,
            decoder=MessageDecoder(self.server.max_message_bytes, headers.get("grpc-encoding", "identity")),
        )
        self.calls[stream_id] = call
        encoding = headers.get("grpc-encoding", "identity")
        if encoding not in ("identity", "gzip"):
            self._finish(call, RpcError(StatusCode.UNIMPLEMENTED, f"unsupported grpc-encoding {encoding!r}"))
            return
        deadline: float | None = None
        if "grpc-timeout" in headers:
            try:
                call.began = trio.current_time()
                deadline = call.began + parse_timeout(headers["grpc-timeout"])
            except ValueError as exc:
                self._finish(call, RpcError(StatusCode.INVALID_ARGUMENT, str(exc)))
                return
        method = self.server.method_for(path)
        if isinstance(method, RpcError):
            self._finish(call, method)
            return
        if deadline is not None:  # a fresh scope: setting a scope's deadline costs a context manager in Trio
            call.scope = trio.CancelScope(deadline=deadline)
        assert self._nursery is not None
        ctx = CallContext(path, user_metadata(headers), self.peer, deadline)
        authenticator = self.server.authenticator
        if authenticator is not None:
            refusal = _authenticate(authenticator, ctx)
            if refusal is not None:
                self._refuse_call(call, refusal)
                return
            self._mark_authenticated()
            call.accepted = True
        elif self.server.call_interceptor is None:
            call.accepted = True
        if method.now is not None and call.accepted and self.server.call_interceptor is None:
            call.inline = (method, ctx)  # answered by the reader once the request is whole
            if deadline is not None:
                self._watch(call, deadline)
            else:
                call.began = trio.current_time()
            return
        self._nursery.start_soon(self._serve_call, call, method, ctx, name=f"rpc {path}")

    def _answer_now(self, call: _Call) -> None:
        """Serve a whole request from the reader with its method's ``M_now`` companion: answer with
        its response, or hand the call (request decoded) to the usual task when it returns None."""
        assert call.inline is not None and self._nursery is not None
        method, ctx = call.inline
        call.inline = None
        self._unwatch(call)  # from here an answer, or a task's cancel scope, ends the call
        began = trio.current_time()
        status: RpcError | None = None
        try:
            if call.error is not None:
                raise call.error
            request = self._request_of(call, method)
            assert method.now is not None
            response = method.now(request, ctx)
            if response is None:
                call.request = request
                self._nursery.start_soon(self._serve_call, call, method, ctx, name=f"rpc {call.path}")
                return
            payload = self._framed(method, response)
            call.headers_sent = True
            if not self.send_headers(call.stream_id, _RESPONSE_HEADERS, end_stream=False, flush=False):
                call.finished = True  # the stream is gone: nobody to answer
                self.calls.pop(call.stream_id, None)
                return
            if not self.queue_data(call.stream_id, payload):  # no window now: a task waits for it
                self._nursery.start_soon(
                    self._send_rest, call, method, payload, ctx, began, name=f"rpc {call.path}"
                )
                return
        except Exception as exc:
            status = _status_of(exc, method.path)
        self._finish(call, status, ctx.trailing_metadata, now=True)
        self._observe(method.path, "OK" if status is None else status.code.name, trio.current_time() - began)

    async def _send_rest(
        self, call: _Call, method: _Method, payload: bytes, ctx: CallContext, began: float
    ) -> None:
        """Finish an answer from ``M_now`` that the flow-control windows did not hold."""
        try:
            await self.send_data(call.stream_id, payload)
        except StreamGone:
            self._observe(method.path, "CANCELLED", trio.current_time() - began)
            return
        self._finish(call, None, ctx.trailing_metadata, now=True)
        self._observe(method.path, "OK", trio.current_time() - began)

    # ------------------------------------------------------------------ deadlines of calls without a task

    def _watch(self, call: _Call, deadline: float) -> None:
        if self._deadlines is None:
            assert self._nursery is not None
            self._deadlines = DeadlineWatch(self._expire_call, alive=_is_timed)
            self._nursery.start_soon(self._deadlines.run, name=f"rpc deadlines {self.peer}")
        call.timed = True
        self._deadlines.watch(deadline, call)

    def _unwatch(self, call: _Call) -> None:
        if call.timed:
            call.timed = False
            assert self._deadlines is not None
            self._deadlines.release()

    def _expire_call(self, call: _Call) -> None:
        """``call``'s deadline passed: DEADLINE_EXCEEDED if it is still waiting for its request (a
        call stays watched only until its companion runs, it ends, or its client resets it)."""
        if call.timed:
            self._end_waiting_call(call, RpcError(StatusCode.DEADLINE_EXCEEDED, "deadline exceeded"))

    def _end_waiting_call(self, call: _Call, status: RpcError) -> None:
        """End a companion's call that is still waiting for its request with ``status``."""
        call.inline = None
        self._finish(call, status)
        self._observe(call.path, status.code.name, trio.current_time() - call.began)

    def _observe(self, path: str, code: str, seconds: float) -> None:
        """Tell the server's observer (if any) how a call ended; its failures are logged, never raised."""
        if self.server.observer is not None:
            try:
                self.server.observer(path, code, seconds)
            except Exception:
                log.exception("RPC observer failed")

    def _refuse_call(self, call: _Call, refusal: RpcError) -> None:
        """Answer a call its authenticator refused, before any of its DATA is read."""
        self._finish(call, refusal)
        self._observe(call.path, refusal.code.name, 0.0)
        if self.preauth:
            self._preauth_refusals += 1
            limit = self.server.preauth.max_refusals
            if self._preauth_refusals >= limit:
                self._refuse_connection(f"{limit} calls refused before any was authenticated")

    def _on_data(self, event: h2.events.DataReceived) -> None:
        call = self.calls.get(event.stream_id)
        if call is None:
            return
        if not call.accepted:  # held raw, within the stream's initial window, until the interceptor decides
            call.unacked += event.flow_controlled_length
            call.pending.append(event.data or b"")
            return
        call.unacked += event.flow_controlled_length
        if call.unacked >= STREAM_WINDOW // 4:
            self.release_stream_window(call.stream_id, call.unacked)
            call.unacked = 0
        self._feed(call, event.data or b"")

    def _feed(self, call: _Call, data: bytes) -> None:
        if call.error is not None or call.finished:
            return
        try:
            call.messages.extend(call.decoder.feed(data))
        except RpcError as err:
            call.error = err
            call.request_done.set()
            if call.inline is not None:
                self._answer_now(call)

    def _accept(self, call: _Call) -> None:
        """The interceptor accepted ``call``: decode what it held and re-open its window."""
        call.accepted = True
        pending, call.pending = call.pending, []
        for data in pending:
            self._feed(call, data)
        if call.unacked and not call.remote_ended:
            self.release_stream_window(call.stream_id, call.unacked)
        call.unacked = 0

    # ------------------------------------------------------------------ calls

    async def _serve_call(self, call: _Call, method: _Method, ctx: CallContext) -> None:
        if self.server.observer is None:
            await self._serve_call_inner(call, method, ctx)
            return
        began = trio.current_time()
        code = "CANCELLED"
        try:
            code = await self._serve_call_inner(call, method, ctx)
        finally:
            self._observe(method.path, code, trio.current_time() - began)

    async def _serve_call_inner(self, call: _Call, method: _Method, ctx: CallContext) -> str:
        """Serve the call; returns the name of the status it ended with."""
        status: RpcError | None = None
        try:
            with call.scope:
                try:
                    await self._run_handler(call, method, ctx)
                except StreamGone:
                    return "CANCELLED"
                except Exception as exc:
                    status = _status_of(exc, method.path)
            if call.scope.cancelled_caught:
                if call.reset_by_peer or self.closed:
                    return "CANCELLED"
                status = RpcError(StatusCode.DEADLINE_EXCEEDED, "deadline exceeded")
            self._finish(call, status, ctx.trailing_metadata, now=True)
            return "OK" if status is None else status.code.name
        except trio.Cancelled:
            if not self.closed:
                self._finish(call, RpcError(StatusCode.UNAVAILABLE, "server is shutting down"))
            raise

    async def _run_handler(self, call: _Call, method: _Method, ctx: CallContext) -> None:
        if self.server.call_interceptor is not None:
            await self.server.call_interceptor(ctx)
        if not call.accepted:
            self._accept(call)
        if call.request_done.is_set():
            # A unary request usually arrives whole with its HEADERS: no second trip through the run loop.
            await trio.lowlevel.checkpoint_if_cancelled()
        else:
            await call.request_done.wait()
        if call.error is not None:
            raise call.error
        request = call.request if call.request is not None else self._request_of(call, method)
        if method.handler is None:
            raise RpcError(StatusCode.UNIMPLEMENTED, f"method {method.path} is not implemented")
        if not method.server_streaming:
            response = await method.handler(request, ctx)
            await self._send_message(call, method, response, last=True)
            return
        result = method.handler(request, ctx)
        if inspect.isawaitable(result):
            result = await result
        async with _aclosing(result) as responses:
            async for response in responses:
                await self._send_message(call, method, response)

    @staticmethod
    def _request_of(call: _Call, method: _Method) -> Message:
        """Decode a unary call's one request message (RpcError: none, several, or undecodable)."""
        if len(call.messages) != 1:
            raise RpcError(
                StatusCode.INTERNAL, f"expected exactly one request message, got {len(call.messages)}"
            )
        try:
            return method.request_type.FromString(call.messages.pop())
        except DecodeError as exc:
            raise RpcError(
                StatusCode.INVALID_ARGUMENT,
                f"cannot decode {method.request_type.DESCRIPTOR.full_name}: {exc}",
            ) from None

    @staticmethod
    def _framed(method: _Method, response: object) -> bytes:
        """A response message serialized and framed (TypeError when it is not the method's type)."""
        if not isinstance(response, method.response_type):
            raise TypeError(
                f"handler returned {type(response).__name__}, expected "
                f"{method.response_type.DESCRIPTOR.full_name}"
            )
        return frame_message(response.SerializeToString())

    async def _send_message(self, call: _Call, method: _Method, response: object, *, last: bool = False) -> None:
        """Send one response message. ``last``: the trailers follow at once (a unary answer), so a
        message the windows hold now is only queued, and leaves with them (see :meth:`_finish`)."""
        payload = self._framed(method, response)
        if not call.headers_sent:
            call.headers_sent = True
            if not self.send_headers(call.stream_id, _RESPONSE_HEADERS, end_stream=False, flush=not last):
                raise StreamGone("stream closed")
        if last:
            if self.queue_data(call.stream_id, payload):
                return
            self.flush_soon()  # the headers queued above must not wait with us for window
        await self.send_data(call.stream_id, payload)

    def _finish(
        self, call: _Call, status: RpcError | None, trailing: dict[str, str] | None = None, *, now: bool = False
    ) -> None:
        """Queue the trailers (or a trailers-only response) that end the call. Synchronous. ``now``:
        from the call's own task, the end of its answer: hand it to the socket at once
        (:meth:`H2Transport.flush_now`); from the reader (refusals) the reader's own flush sends it."""
        if call.finished:
            return
        call.finished = True
        self.calls.pop(call.stream_id, None)
        self._unwatch(call)
        code = StatusCode.OK if status is None else status.code
        metadata = dict(trailing or {})
        if status is not None:
            metadata.update(status.metadata)
        block: list[tuple[str, str]] = []
        if not call.headers_sent:
            block += _RESPONSE_HEADERS
        block.append(("grpc-status", str(int(code))))
        if status is not None and status.message:
            block.append(("grpc-message", encode_grpc_message(status.message[:_MAX_STATUS_MESSAGE])))
        try:
            block += validate_metadata(metadata)
        except ValueError as exc:
            log.warning("dropping trailing metadata of %s: %s", call.path, exc)
        self.send_headers(call.stream_id, block, end_stream=True, flush=False)
        if not call.remote_ended:
            # We answered before the request finished (error): tell the client to stop sending.
            self.reset_stream(call.stream_id, h2.errors.ErrorCodes.NO_ERROR)
        if now:
            self.flush_now()
        else:
            self.flush_soon()


def _is_timed(call: _Call) -> bool:
    return call.timed


def _authenticate(authenticator: Authenticator, ctx: CallContext) -> RpcError | None:
    """Run the authenticator; its refusal (any failure of its own is a refusal, never a crash)."""
    try:
        authenticator.authenticate_call(ctx)
    except RpcError as err:
        return err
    except Exception as exc:
        log.warning("authentication of %s from %s failed: %s", ctx.method, ctx.peer, type(exc).__name__)
        return RpcError(StatusCode.UNAUTHENTICATED, "invalid credential or identity headers")
    return None


def _status_of(exc: Exception, path: str) -> RpcError:
    """The status a handler's exception ends its call with: an RpcError (alone, or wrapped alone in
    exception groups) as it is; anything else INTERNAL ("<ExcType>: <text>"), logged with its traceback."""
    status = _unwrap_rpc_error(exc)
    if status is None:
        log.exception("handler for %s failed", path)
        status = RpcError(StatusCode.INTERNAL, f"{type(exc).__name__}: {exc}")
    return status


def _unwrap_rpc_error(exc: BaseException) -> RpcError | None:
    """An RpcError wrapped alone in (nested) exception groups, as a handler's nursery raises it."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc if isinstance(exc, RpcError) else None


class _aclosing:
    """Close an async generator (if it is one) when the block exits, even on cancellation."""

    def __init__(self, it: AsyncIterator[Any]) -> None:
        self.it = it

    async def __aenter__(self) -> AsyncIterator[Any]:
        return self.it

    async def __aexit__(self, *exc: object) -> None:
        aclose = getattr(self.it, "aclose", None)
        if aclose is not None:
            await aclose()
