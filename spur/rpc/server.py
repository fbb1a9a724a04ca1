"""gRPC server on Trio + h2: unary and server-streaming RPCs, wire-compatible with stock gRPC clients.

Contracts:

- A servicer has one async method per RPC, named as in the .proto. Unary:
  ``async def M(self, request, context) -> response``; server-streaming: an async generator
  ``async def M(self, request, context): yield response``.
- A handler raising :class:`RpcError` ends the call with that status, message and trailing metadata; any
  other exception ends it with INTERNAL (``"<ExcType>: <text>"``), is logged with its traceback, and the
  server keeps serving. A passed ``grpc-timeout`` cancels the handler and answers DEADLINE_EXCEEDED; a
  client RST_STREAM (or a dropped connection) cancels the handler and answers nothing.
- Unknown service/method -> UNIMPLEMENTED; undecodable request -> INVALID_ARGUMENT; request larger than
  ``max_message_bytes`` -> RESOURCE_EXHAUSTED. Errors before any response message use a trailers-only
  response.
- Cancelling :meth:`Server.serve` shuts down: listeners close, in-flight calls end with UNAVAILABLE,
  each connection gets a GOAWAY.
- ``serve(..., tls=ServerTLS)`` (spur.rpc.tls) serves TLS: in ``required`` mode every connection must
  complete a TLS handshake (a plaintext client is disconnected), in ``optional`` mode the first byte of
  each connection says which it is. Each connection is wrapped with the context current when it was
  accepted, so a certificate reload reaches new connections only.
"""

from __future__ import annotations

import inspect
import logging
import math
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NoReturn

import h2.errors
import h2.events
import trio
from google.protobuf import message_factory
from google.protobuf.descriptor import ServiceDescriptor
from google.protobuf.message import DecodeError, Message

from spur.rpc.status import RpcError, StatusCode, encode_grpc_message
from spur.rpc.transport import STREAM_WINDOW, H2Transport, StreamGone
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

__all__ = ["CallContext", "Server", "Interceptor", "Observer"]

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


@dataclass(frozen=True)
class _Method:
    path: str
    request_type: type[Message]
    response_type: type[Message]
    server_streaming: bool
    handler: Callable[..., Any] | None  # None: servicer lacks the method -> UNIMPLEMENTED


class Server:
    """A gRPC server; register services, then ``await serve(host, port)``."""

    def __init__(
        self,
        *,
        interceptor: Interceptor | None = None,
        max_message_bytes: int = 64 * 1024 * 1024,
        observer: Observer | None = None,
    ) -> None:
        self.interceptor = interceptor
        self.observer = observer
        self.max_message_bytes = max_message_bytes
        self._methods: dict[str, _Method] = {}
        self._services: set[str] = set()

    def add_service(self, service: ServiceDescriptor, servicer: object) -> None:
        """Serve every RPC of ``service`` from the same-named async methods of ``servicer``.

        Raises ValueError for a service registered twice or one with client-streaming RPCs (unsupported).
        """
        if service.full_name in self._services:
            raise ValueError(f"service {service.full_name} is already registered")
        for method in service.methods:
            if method.client_streaming:
                raise ValueError(f"{method.full_name}: client-streaming RPCs are not supported")
        self._services.add(service.full_name)
        for method in service.methods:
            path = f"/{service.full_name}/{method.name}"
            self._methods[path] = _Method(
                path=path,
                request_type=message_factory.GetMessageClass(method.input_type),
                response_type=message_factory.GetMessageClass(method.output_type),
                server_streaming=method.server_streaming,
                handler=getattr(servicer, method.name, None),
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
        task_status: Any = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Listen on ``host:port`` (0 picks a free port), report the bound port via ``task_status``,
        and serve until cancelled. With port 0 and a host resolving to several addresses, only the
        first address is bound (so every listener shares one port). A failed bind raises
        :class:`spur.startup.ListenError` (an OSError naming the address). ``tls``: serve TLS
        (spur.rpc.tls.ServerTLS: required or optional); None: plaintext."""
        try:
            listeners = await trio.open_tcp_listeners(port, host=host or None)
        except OSError as exc:
            from spur.startup import ListenError

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


def _peer_of(stream: trio.abc.Stream) -> str:
    inner = getattr(stream, "transport_stream", stream)  # a trio.SSLStream: its socket stream
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


class _ServerConnection(H2Transport):
    def __init__(self, server: Server, stream: trio.abc.Stream) -> None:
        super().__init__(stream, client_side=False, max_concurrent_streams=_MAX_STREAMS)
        self.server = server
        self.peer = _peer_of(stream)
        self.calls: dict[int, _Call] = {}
        self._nursery: trio.Nursery | None = None

    async def run(self) -> None:
        self.start()
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                await self.run_io()
                nursery.cancel_scope.cancel()
        finally:
            await self.final_flush(goaway=not self.closed)

    def on_closed(self, reason: str) -> None:
        log.debug("connection from %s closed: %s", self.peer, reason)
        for call in self.calls.values():
            call.scope.cancel()
        if self._nursery is not None:
            self._nursery.cancel_scope.cancel()

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
        elif isinstance(event, h2.events.StreamReset):
            call = self.calls.pop(event.stream_id, None)
            if call is not None:
                call.reset_by_peer = True
                call.remote_ended = True
                call.scope.cancel()
                call.request_done.set()
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
                deadline = trio.current_time() + parse_timeout(headers["grpc-timeout"])
            except ValueError as exc:
                self._finish(call, RpcError(StatusCode.INVALID_ARGUMENT, str(exc)))
                return
        method = self.server.method_for(path)
        if isinstance(method, RpcError):
            self._finish(call, method)
            return
        call.scope.deadline = math.inf if deadline is None else deadline
        assert self._nursery is not None
        ctx = CallContext(path, user_metadata(headers), self.peer, deadline)
        self._nursery.start_soon(self._serve_call, call, method, ctx, name=f"rpc {path}")

    def _on_data(self, event: h2.events.DataReceived) -> None:
        call = self.calls.get(event.stream_id)
        if call is None:
            return
        call.unacked += event.flow_controlled_length
        if call.unacked >= STREAM_WINDOW // 4:
            self.release_stream_window(call.stream_id, call.unacked)
            call.unacked = 0
        if call.error is not None or call.finished:
            return
        try:
            call.messages.extend(call.decoder.feed(event.data or b""))
        except RpcError as err:
            call.error = err
            call.request_done.set()

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
            try:
                self.server.observer(method.path, code, trio.current_time() - began)
            except Exception:
                log.exception("RPC observer failed")

    async def _serve_call_inner(self, call: _Call, method: _Method, ctx: CallContext) -> str:
        """Serve the call; returns the name of the status it ended with."""
        status: RpcError | None = None
        try:
            with call.scope:
                try:
                    await self._run_handler(call, method, ctx)
                except RpcError as err:
                    status = err
                except StreamGone:
                    return "CANCELLED"
                except Exception as exc:
                    status = _unwrap_rpc_error(exc)
                    if status is None:
                        log.exception("handler for %s failed", method.path)
                        status = RpcError(StatusCode.INTERNAL, f"{type(exc).__name__}: {exc}")
            if call.scope.cancelled_caught:
                if call.reset_by_peer or self.closed:
                    return "CANCELLED"
                status = RpcError(StatusCode.DEADLINE_EXCEEDED, "deadline exceeded")
            self._finish(call, status, ctx.trailing_metadata)
            return "OK" if status is None else status.code.name
        except trio.Cancelled:
            if not self.closed:
                self._finish(call, RpcError(StatusCode.UNAVAILABLE, "server is shutting down"))
            raise

    async def _run_handler(self, call: _Call, method: _Method, ctx: CallContext) -> None:
        await call.request_done.wait()
        if call.error is not None:
            raise call.error
        if len(call.messages) != 1:
            raise RpcError(
                StatusCode.INTERNAL, f"expected exactly one request message, got {len(call.messages)}"
            )
        try:
            request = method.request_type.FromString(call.messages.pop())
        except DecodeError as exc:
            raise RpcError(
                StatusCode.INVALID_ARGUMENT,
                f"cannot decode {method.request_type.DESCRIPTOR.full_name}: {exc}",
            ) from None
        if self.server.interceptor is not None:
            await self.server.interceptor(ctx)
        if method.handler is None:
            raise RpcError(StatusCode.UNIMPLEMENTED, f"method {method.path} is not implemented")
        if not method.server_streaming:
            response = await method.handler(request, ctx)
            await self._send_message(call, method, response)
            return
        result = method.handler(request, ctx)
        if inspect.isawaitable(result):
            result = await result
        async with _aclosing(result) as responses:
            async for response in responses:
                await self._send_message(call, method, response)

    async def _send_message(self, call: _Call, method: _Method, response: object) -> None:
        if not isinstance(response, method.response_type):
            raise TypeError(
                f"handler returned {type(response).__name__}, expected "
                f"{method.response_type.DESCRIPTOR.full_name}"
            )
        payload = frame_message(response.SerializeToString())
        if not call.headers_sent:
            call.headers_sent = True
            headers = [
                (":status", "200"),
                ("content-type", CONTENT_TYPE),
                ("grpc-accept-encoding", ACCEPT_ENCODING),
            ]
            if not self.send_headers(call.stream_id, headers, end_stream=False):
                raise StreamGone("stream closed")
        await self.send_data(call.stream_id, payload)

    def _finish(self, call: _Call, status: RpcError | None, trailing: dict[str, str] | None = None) -> None:
        """Queue the trailers (or a trailers-only response) that end the call. Synchronous."""
        if call.finished:
            return
        call.finished = True
        self.calls.pop(call.stream_id, None)
        code = StatusCode.OK if status is None else status.code
        metadata = dict(trailing or {})
        if status is not None:
            metadata.update(status.metadata)
        block: list[tuple[str, str]] = []
        if not call.headers_sent:
            block += [
                (":status", "200"),
                ("content-type", CONTENT_TYPE),
                ("grpc-accept-encoding", ACCEPT_ENCODING),
            ]
        block.append(("grpc-status", str(int(code))))
        if status is not None and status.message:
            block.append(("grpc-message", encode_grpc_message(status.message[:_MAX_STATUS_MESSAGE])))
        try:
            block += validate_metadata(metadata)
        except ValueError as exc:
            log.warning("dropping trailing metadata of %s: %s", call.path, exc)
        self.send_headers(call.stream_id, block, end_stream=True)
        if not call.remote_ended:
            # We answered before the request finished (error): tell the client to stop sending.
            self.reset_stream(call.stream_id, h2.errors.ErrorCodes.NO_ERROR)


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
