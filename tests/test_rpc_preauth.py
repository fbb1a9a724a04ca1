"""No work before authentication (spur.rpc.server): header-time refusals, no window and no decoding for a
refused stream, and the bounds on connections that have not authenticated, over real loopback sockets."""

from __future__ import annotations

import h2.config
import h2.connection
import h2.errors
import h2.events
import pytest
import trio
from rpc_helpers import MB, grpc_frame, start_server

import spur.rpc.server as server_mod
from spur.rpc.channel import open_channel
from spur.rpc.proto import spur_pb2 as pb
from spur.rpc.server import CallContext, PreAuthLimits
from spur.rpc.status import RpcError, StatusCode
from spur.rpc.stub import controller_stub

GOOD = {"authorization": "Bearer good"}
SUBMIT = "/spur.v1.Controller/SubmitJob"


class TokenGate:
    """A header-time authenticator: ``Bearer good`` is the only credential; without one a call is
    refused when ``required``, else it runs as ``anonymous`` (permissive mode)."""

    def __init__(self, required: bool = True) -> None:
        self.required = required
        self.seen: list[str] = []

    @property
    def requires_credential(self) -> bool:
        return self.required

    def authenticate_call(self, context: CallContext) -> None:
        self.seen.append(context.method)
        token = context.metadata.get("authorization")
        if token == "Bearer good":
            context.identity = "alice"
        elif token is not None:
            raise RpcError(StatusCode.UNAUTHENTICATED, "invalid token")
        elif self.required:
            raise RpcError(StatusCode.UNAUTHENTICATED, "a credential is required")
        else:
            context.identity = "anonymous"


class FedBytes:
    """Counts the request bytes the server hands to its message decoder (a spy on the collaborator)."""

    total = 0

    @classmethod
    def install(cls, monkeypatch: pytest.MonkeyPatch) -> type[FedBytes]:
        cls.total = 0
        real = server_mod.MessageDecoder

        class Counting(real):  # type: ignore[misc, valid-type]
            def feed(self, data: bytes) -> list[bytes]:
                cls.total += len(data)
                return super().feed(data)

        monkeypatch.setattr(server_mod, "MessageDecoder", Counting)
        return cls


def submit(script: str) -> pb.SubmitJobRequest:
    return pb.SubmitJobRequest(spec=pb.JobSpec(script=script))


class Peer:
    """A raw HTTP/2 client that records every event per stream (it never acknowledges DATA)."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.conn = h2.connection.H2Connection(
            h2.config.H2Configuration(client_side=True, header_encoding="utf-8")
        )
        self.conn.initiate_connection()
        self.events: list[h2.events.Event] = []
        self.eof = False
        self.sent: dict[int, tuple[bytes, int]] = {}  # stream -> (request payload, bytes sent so far)

    @classmethod
    async def connect(cls, port: int) -> Peer:
        peer = cls(await trio.open_tcp_stream("127.0.0.1", port))
        await peer.flush()
        return peer

    async def flush(self) -> None:
        data = self.conn.data_to_send()
        if data:
            await self.stream.send_all(data)

    def start_call(self, body_bytes: int, headers: dict[str, str] | None = None, end: bool = False) -> int:
        """HEADERS plus as much of a ``body_bytes`` request body as the window allows now."""
        sid = self.conn.get_next_available_stream_id()
        block = [
            (":method", "POST"),
            (":scheme", "http"),
            (":path", SUBMIT),
            (":authority", "test"),
            ("content-type", "application/grpc"),
            ("te", "trailers"),
        ] + list((headers or {}).items())
        self.conn.send_headers(sid, block)
        payload = grpc_frame(submit("x" * body_bytes).SerializeToString())
        room = min(self.conn.local_flow_control_window(sid), len(payload))
        sent = 0
        while sent < room:
            size = min(room - sent, self.conn.max_outbound_frame_size)
            last = end and sent + size == len(payload)
            self.conn.send_data(sid, payload[sent : sent + size], end_stream=last)
            sent += size
        self.sent[sid] = (payload, sent)
        return sid

    async def finish_call(self, sid: int) -> None:
        """Send the rest of the request body as the server opens the window."""
        payload, sent = self.sent[sid]
        while sent < len(payload):
            await self.pump_until(lambda: self.conn.local_flow_control_window(sid) > 0 or self.eof)
            assert not self.eof, "server closed the connection"
            room = min(
                self.conn.local_flow_control_window(sid),
                len(payload) - sent,
                self.conn.max_outbound_frame_size,
            )
            self.conn.send_data(sid, payload[sent : sent + room], end_stream=sent + room == len(payload))
            sent += room
            await self.flush()

    async def pump_until(self, done, timeout: float = 10.0) -> None:
        with trio.fail_after(timeout):
            while not done():
                try:
                    data = await self.stream.receive_some(65536)
                except trio.BrokenResourceError:  # closed with our unread bytes in its buffer: a reset
                    data = b""
                if not data:
                    self.eof = True
                    return
                self.events.extend(self.conn.receive_data(data))
                await self.flush()

    def of(self, sid: int, kind: type) -> list:
        return [e for e in self.events if isinstance(e, kind) and getattr(e, "stream_id", None) == sid]

    def reset(self, sid: int) -> bool:
        return bool(self.of(sid, h2.events.StreamReset))

    def status(self, sid: int) -> str | None:
        for event in self.of(sid, h2.events.ResponseReceived) + self.of(sid, h2.events.TrailersReceived):
            found = dict(event.headers).get("grpc-status")
            if found is not None:
                return found
        return None

    def goaway(self) -> h2.events.ConnectionTerminated | None:
        found = [e for e in self.events if isinstance(e, h2.events.ConnectionTerminated)]
        return found[0] if found else None


async def wait_for_settings(peer: Peer) -> None:
    await peer.pump_until(lambda: any(isinstance(e, h2.events.RemoteSettingsChanged) for e in peer.events))


async def test_refused_call_is_answered_from_headers_and_gets_no_window(nursery, monkeypatch):
    fed = FedBytes.install(monkeypatch)
    gate = TokenGate(required=True)
    srv = await start_server(nursery, authenticator=gate)
    peer = await Peer.connect(srv.port)
    await wait_for_settings(peer)
    sid = peer.start_call(60 * MB)  # no credential; HEADERS and the first 4 MiB (the initial window)
    await peer.flush()
    await peer.pump_until(lambda: peer.reset(sid) or peer.eof)

    assert peer.status(sid) == str(int(StatusCode.UNAUTHENTICATED))
    assert peer.reset(sid)
    assert peer.of(sid, h2.events.WindowUpdated) == []  # nothing beyond the initial window
    assert gate.seen == [SUBMIT]
    assert srv.controller.seen == []  # the handler never ran
    assert fed.total == 0  # nothing of the body was buffered or decoded


async def test_refused_body_does_not_stall_the_connection(nursery, monkeypatch):
    """DATA of a refused stream is discarded without eating the connection window: an authenticated
    call on the same connection afterwards gets its full (larger than any window) request through."""
    fed = FedBytes.install(monkeypatch)
    srv = await start_server(nursery, authenticator=TokenGate(required=True))
    peer = await Peer.connect(srv.port)
    await wait_for_settings(peer)
    refused = [peer.start_call(4 * MB, {"authorization": "Bearer bad"}) for _ in range(3)]
    await peer.flush()
    await peer.pump_until(lambda: all(peer.reset(s) for s in refused))
    assert fed.total == 0

    sid = peer.start_call(9 * MB, GOOD)
    await peer.flush()
    await peer.finish_call(sid)
    await peer.pump_until(lambda: peer.status(sid) is not None)
    assert peer.status(sid) == "0"
    data = b"".join(e.data for e in peer.of(sid, h2.events.DataReceived))
    assert pb.SubmitJobResponse.FromString(data[5:]).job_id == 9 * MB
    assert fed.total == len(peer.sent[sid][0])  # only the authenticated call's body was decoded


async def test_authenticated_call_gets_the_full_message_size(nursery):
    srv = await start_server(nursery, authenticator=TokenGate(required=True), max_message_bytes=64 * MB)
    async with open_channel(srv.target, metadata_provider=lambda: dict(GOOD)) as channel:
        reply = await controller_stub(channel).SubmitJob(submit("x" * 60 * MB), timeout=60)
    assert reply.job_id == 60 * MB
    assert srv.controller.seen[0].identity == "alice"


async def test_refusal_reaches_a_stock_client_with_the_policy_message(nursery):
    """The stock channel, blocked on the refused stream's window in the middle of a 60 MiB upload,
    gets the refusal at once (not when the connection is dropped for not authenticating)."""
    srv = await start_server(
        nursery, authenticator=TokenGate(required=True), preauth=PreAuthLimits(timeout=60)
    )
    async with open_channel(srv.target, max_message_bytes=128 * MB) as channel:
        with pytest.raises(RpcError) as info, trio.fail_after(10):
            await controller_stub(channel).SubmitJob(submit("x" * 60 * MB), timeout=60)
    assert info.value.code == StatusCode.UNAUTHENTICATED
    assert "a credential is required" in info.value.message
    assert srv.controller.seen == []


async def test_permissive_mode_is_unchanged_for_calls_without_a_credential(nursery):
    gate = TokenGate(required=False)
    srv = await start_server(
        nursery, authenticator=gate, preauth=PreAuthLimits(max_connections=1, timeout=0.2)
    )
    idle = [await Peer.connect(srv.port) for _ in range(3)]  # over max_connections, and idle
    async with open_channel(srv.target) as channel:
        reply = await controller_stub(channel).SubmitJob(submit("x" * 5 * MB), timeout=30)
    assert reply.job_id == 5 * MB
    assert srv.controller.seen[0].identity == "anonymous"
    await trio.sleep(0.5)  # past the pre-auth timeout, which does not apply: the idle ones stay open
    for peer in idle:
        sid = peer.start_call(10, end=True)
        await peer.flush()
        await peer.pump_until(lambda p=peer, s=sid: p.status(s) is not None)
        assert peer.status(sid) == "0"
    assert srv.server is not None and srv.server.preauth_connections == 0


async def test_server_interceptor_serves_callers_that_apply_the_policy_themselves(nursery):
    """With only an authenticator, Server.interceptor is that authenticator (the REST layer awaits it)."""
    gate = TokenGate(required=True)
    srv = await start_server(nursery, authenticator=gate)
    assert srv.server is not None and srv.server.interceptor is not None
    ctx = CallContext(SUBMIT, {}, "rest", None)
    with pytest.raises(RpcError) as info:
        await srv.server.interceptor(ctx)
    assert info.value.code == StatusCode.UNAUTHENTICATED
    ok = CallContext(SUBMIT, dict(GOOD), "rest", None)
    await srv.server.interceptor(ok)
    assert ok.identity == "alice"
    # The server itself authenticates each call once (at its HEADERS), not again in the handler's task.
    async with open_channel(srv.target, metadata_provider=lambda: dict(GOOD)) as channel:
        await controller_stub(channel).SubmitJob(submit("hi"), timeout=10)
    assert gate.seen.count(SUBMIT) == 3


async def test_async_interceptor_runs_before_the_body_and_holds_its_window(nursery, monkeypatch):
    fed = FedBytes.install(monkeypatch)

    async def refuse(ctx: CallContext) -> None:
        raise RpcError(StatusCode.PERMISSION_DENIED, "no")

    srv = await start_server(nursery, interceptor=refuse)
    peer = await Peer.connect(srv.port)
    await wait_for_settings(peer)
    sid = peer.start_call(60 * MB)
    await peer.flush()
    await peer.pump_until(lambda: peer.reset(sid) or peer.eof)
    assert peer.status(sid) == str(int(StatusCode.PERMISSION_DENIED))
    assert peer.of(sid, h2.events.WindowUpdated) == []
    assert fed.total == 0
    assert srv.controller.seen == []


async def test_async_interceptor_that_accepts_gets_the_whole_body(nursery):
    async def accept(ctx: CallContext) -> None:
        await trio.sleep(0.05)  # the body arrives while the interceptor decides
        ctx.identity = "bob"

    srv = await start_server(nursery, interceptor=accept)
    async with open_channel(srv.target) as channel:
        reply = await controller_stub(channel).SubmitJob(submit("y" * 9 * MB), timeout=30)
    assert reply.job_id == 9 * MB
    assert srv.controller.seen[0].identity == "bob"


async def closed_by_server(stream: trio.SocketStream, timeout: float = 5.0) -> bool:
    """True once the server closes ``stream`` (EOF or reset), reading and dropping what it sends."""
    with trio.move_on_after(timeout):
        while True:
            try:
                data = await stream.receive_some(65536)
            except trio.BrokenResourceError:
                return True
            if not data:
                return True
    return False


async def test_preauth_connections_are_bounded_and_an_authenticated_client_still_gets_in(nursery):
    srv = await start_server(
        nursery, authenticator=TokenGate(required=True), preauth=PreAuthLimits(max_connections=3)
    )
    assert srv.server is not None
    idle = [await Peer.connect(srv.port) for _ in range(3)]
    for peer in idle:
        await wait_for_settings(peer)
    assert srv.server.preauth_connections == 3

    # One more closes the oldest at once (GOAWAY naming why); the count stays at the bound.
    newer = await Peer.connect(srv.port)
    await wait_for_settings(newer)
    await idle[0].pump_until(lambda: idle[0].eof)
    assert b"have not authenticated" in (idle[0].goaway().additional_data or b"")
    assert srv.server.preauth_connections == 3

    # An authenticated client still gets in, while the bound holds.
    async with open_channel(srv.target, metadata_provider=lambda: dict(GOOD)) as channel:
        reply = await controller_stub(channel).SubmitJob(submit("abc"), timeout=10)
    assert reply.job_id == 3
    assert srv.server.preauth_connections == 2  # its connection left the pre-auth set (and evicted one)

    # A counted connection that authenticates leaves the pre-auth set and is served as usual.
    sid = newer.start_call(10, GOOD, end=True)
    await newer.flush()
    await newer.pump_until(lambda: newer.status(sid) is not None)
    assert newer.status(sid) == "0"
    assert srv.server.preauth_connections == 1


async def test_idle_preauth_connection_is_closed_after_the_timeout(nursery):
    srv = await start_server(
        nursery, authenticator=TokenGate(required=True), preauth=PreAuthLimits(timeout=0.3)
    )
    assert srv.server is not None
    peer = await Peer.connect(srv.port)
    authed = await Peer.connect(srv.port)
    sid = authed.start_call(10, GOOD, end=True)
    await authed.flush()
    await authed.pump_until(lambda: authed.status(sid) is not None)
    began = trio.current_time()
    await peer.pump_until(lambda: peer.eof)
    assert peer.goaway() is not None and peer.goaway().error_code == h2.errors.ErrorCodes.ENHANCE_YOUR_CALM
    assert trio.current_time() - began < 5
    assert srv.server.preauth_connections == 0
    again = authed.start_call(10, GOOD, end=True)  # the authenticated connection is not timed out
    await authed.flush()
    await authed.pump_until(lambda: authed.status(again) is not None)
    assert authed.status(again) == "0"


async def test_preauth_connection_may_send_only_a_bounded_amount(nursery):
    limits = PreAuthLimits(max_bytes=64 * 1024)
    srv = await start_server(nursery, authenticator=TokenGate(required=True), preauth=limits)
    peer = await Peer.connect(srv.port)
    await wait_for_settings(peer)
    for _ in range(100):  # 100 x 1 KiB of PINGs, never a call: past max_bytes
        for _ in range(128):
            peer.conn.ping(b"12345678")
        try:
            await peer.flush()
        except trio.BrokenResourceError:
            break
    await peer.pump_until(lambda: peer.eof)
    assert peer.goaway() is not None
    assert b"before authenticating" in (peer.goaway().additional_data or b"")


async def test_preauth_connection_is_closed_after_repeated_refusals(nursery):
    srv = await start_server(
        nursery, authenticator=TokenGate(required=True), preauth=PreAuthLimits(max_refusals=3)
    )
    peer = await Peer.connect(srv.port)
    sids = [peer.start_call(10, {"authorization": "Bearer bad"}, end=True) for _ in range(3)]
    await peer.flush()
    await peer.pump_until(lambda: peer.eof)
    assert [peer.status(s) for s in sids] == [str(int(StatusCode.UNAUTHENTICATED))] * 3
    assert peer.goaway() is not None


async def test_client_blocked_on_a_reset_streams_window_gets_the_answer(nursery):
    """A server that answers and resets a call once the client has used up the stream's window (and
    grants no more): the stock channel reports the server's status at once instead of waiting."""
    answered = trio.Event()

    async def serve(stream: trio.SocketStream) -> None:
        conn = h2.connection.H2Connection(
            h2.config.H2Configuration(client_side=False, header_encoding="utf-8")
        )
        conn.initiate_connection()
        await stream.send_all(conn.data_to_send())
        sid, received = None, 0
        while not answered.is_set():
            data = await stream.receive_some(65536)
            if not data:
                return
            for event in conn.receive_data(data):
                if isinstance(event, h2.events.RequestReceived):
                    sid = event.stream_id
                elif isinstance(event, h2.events.DataReceived):
                    received += event.flow_controlled_length
            if sid is not None and received >= 65535:
                trailers = [(":status", "200"), ("content-type", "application/grpc"), ("grpc-status", "16")]
                conn.send_headers(sid, trailers + [("grpc-message", "refused")], end_stream=True)
                conn.reset_stream(sid, h2.errors.ErrorCodes.NO_ERROR)
                answered.set()
            await stream.send_all(conn.data_to_send())
        await trio.sleep_forever()  # keep the connection open: only the stream is gone

    listeners = await nursery.start(trio.serve_tcp, serve, 0)
    port = listeners[0].socket.getsockname()[1]
    async with open_channel(f"127.0.0.1:{port}") as channel:
        with pytest.raises(RpcError) as info, trio.fail_after(5):
            await controller_stub(channel).SubmitJob(submit("x" * MB), timeout=30)
    assert info.value.code == StatusCode.UNAUTHENTICATED
    assert answered.is_set()
