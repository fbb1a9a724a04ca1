"""A unary method's synchronous companion (``M_now``): answered by the connection's reader, or left to
the async handler when it returns None; same errors, metadata and observer as the async path."""

from __future__ import annotations

import h2.events
import pytest
import trio
from rpc_helpers import CONTROLLER, ControllerServicer, RawH2Client, grpc_frame, start_server

from spur.rpc.channel import open_channel
from spur.rpc.proto import spur_pb2 as pb
from spur.rpc.server import CallContext, Server
from spur.rpc.status import RpcError, StatusCode
from spur.rpc.stub import controller_stub


class WithCompanions(ControllerServicer):
    """Heartbeat: answered now for node "now", left to the handler for "later", refused for "bad",
    a bug for "bug". GetJobs: answered now with ``big_names`` jobs of 1 KiB names each."""

    def __init__(self, big_names: int = 0) -> None:
        super().__init__()
        self.now_calls: list[str] = []
        self.async_calls: list[str] = []
        self.big_names = big_names
        self.tasks_seen: list[str] = []

    def Heartbeat_now(
        self, request: pb.HeartbeatRequest, context: CallContext
    ) -> pb.HeartbeatResponse | None:
        self.now_calls.append(request.name)
        if request.name == "later":
            return None
        if request.name == "bad":
            raise RpcError(StatusCode.PERMISSION_DENIED, "node bad may not beat", {"why": "test"})
        if request.name == "bug":
            raise ValueError("companion bug")
        context.set_trailing_metadata({"served-by": "now"})
        return pb.HeartbeatResponse(known=True, heartbeat_interval_secs=7)

    async def Heartbeat(self, request: pb.HeartbeatRequest, context: CallContext) -> pb.HeartbeatResponse:
        self.async_calls.append(request.name)
        self.tasks_seen.append(trio.lowlevel.current_task().name)
        await trio.sleep(0)
        return pb.HeartbeatResponse(known=True, heartbeat_interval_secs=30)

    def GetJobs_now(self, request: pb.GetJobsRequest, context: CallContext) -> pb.GetJobsResponse | None:
        jobs = [pb.JobInfo(job_id=i, spec=pb.JobSpec(name="x" * 1024)) for i in range(self.big_names)]
        return pb.GetJobsResponse(jobs=jobs)


async def test_a_companion_answers_without_the_async_handler(nursery):
    servicer = WithCompanions()
    seen: list[tuple[str, str]] = []
    srv = await start_server(nursery, controller=servicer, observer=lambda m, code, s: seen.append((m, code)))
    async with open_channel(srv.target) as channel:
        stub = controller_stub(channel)
        for _ in range(3):
            reply = await stub.Heartbeat(pb.HeartbeatRequest(name="now"), timeout=10)
            assert reply.known and reply.heartbeat_interval_secs == 7
    assert servicer.now_calls == ["now"] * 3
    assert servicer.async_calls == []
    assert seen == [("/spur.v1.Controller/Heartbeat", "OK")] * 3


async def test_the_trailing_metadata_a_companion_sets_reaches_the_client(nursery):
    srv = await start_server(nursery, controller=WithCompanions())
    client = await RawH2Client.connect(srv.port)
    body = grpc_frame(pb.HeartbeatRequest(name="now").SerializeToString())
    response = await client.call("/spur.v1.Controller/Heartbeat", body)
    assert response.trailers["grpc-status"] == "0"
    assert response.trailers["served-by"] == "now"
    assert pb.HeartbeatResponse.FromString(response.data[5:]).heartbeat_interval_secs == 7


async def test_none_leaves_the_call_to_the_async_handler_in_a_task_of_its_own(nursery):
    servicer = WithCompanions()
    srv = await start_server(nursery, controller=servicer)
    async with open_channel(srv.target) as channel:
        reply = await controller_stub(channel).Heartbeat(pb.HeartbeatRequest(name="later"), timeout=10)
    assert reply.heartbeat_interval_secs == 30
    assert servicer.now_calls == ["later"] and servicer.async_calls == ["later"]
    assert servicer.tasks_seen == ["rpc /spur.v1.Controller/Heartbeat"]


async def test_a_companion_s_errors_end_the_call_as_a_handler_s_would(nursery):
    servicer = WithCompanions()
    seen: list[str] = []
    srv = await start_server(nursery, controller=servicer, observer=lambda m, code, s: seen.append(code))
    async with open_channel(srv.target) as channel:
        stub = controller_stub(channel)
        with pytest.raises(RpcError) as refused:
            await stub.Heartbeat(pb.HeartbeatRequest(name="bad"), timeout=10)
        assert refused.value.code is StatusCode.PERMISSION_DENIED
        assert refused.value.message == "node bad may not beat"
        with pytest.raises(RpcError) as bug:
            await stub.Heartbeat(pb.HeartbeatRequest(name="bug"), timeout=10)
        assert bug.value.code is StatusCode.INTERNAL and bug.value.message == "ValueError: companion bug"
        reply = await stub.Heartbeat(pb.HeartbeatRequest(name="now"), timeout=10)  # still serving
        assert reply.known
    assert seen == ["PERMISSION_DENIED", "INTERNAL", "OK"]
    assert servicer.async_calls == []


async def test_a_request_the_companion_cannot_have_is_refused_before_it_runs(nursery):
    servicer = WithCompanions()
    srv = await start_server(nursery, controller=servicer, max_message_bytes=64)
    client = await RawH2Client.connect(srv.port)
    garbage = await client.call("/spur.v1.Controller/Heartbeat", grpc_frame(b"\xff\xff\xff"))
    assert garbage.trailers["grpc-status"] == str(StatusCode.INVALID_ARGUMENT.value)
    big = grpc_frame(pb.HeartbeatRequest(name="n" * 200).SerializeToString())
    too_big = await client.call("/spur.v1.Controller/Heartbeat", big)
    assert too_big.trailers["grpc-status"] == str(StatusCode.RESOURCE_EXHAUSTED.value)
    assert servicer.now_calls == [] and servicer.async_calls == []


async def test_an_answer_larger_than_the_client_s_window_still_arrives_whole(nursery):
    servicer = WithCompanions(big_names=100)  # about 100 KiB: more than HTTP/2's default 64 KiB window
    seen: list[tuple[str, str]] = []
    srv = await start_server(nursery, controller=servicer, observer=lambda m, code, s: seen.append((m, code)))
    client = await RawH2Client.connect(srv.port)
    body = grpc_frame(pb.GetJobsRequest().SerializeToString())
    response = await client.call("/spur.v1.Controller/GetJobs", body)
    assert response.trailers["grpc-status"] == "0"
    jobs = pb.GetJobsResponse.FromString(response.data[5:]).jobs
    assert [j.job_id for j in jobs] == list(range(100))
    assert all(j.spec.name == "x" * 1024 for j in jobs)
    assert seen == [("/spur.v1.Controller/GetJobs", "OK")]


async def test_an_async_interceptor_runs_first_so_the_companion_is_not_used(nursery):
    servicer = WithCompanions()
    intercepted: list[str] = []

    async def interceptor(context: CallContext) -> None:
        intercepted.append(context.method)

    srv = await start_server(nursery, controller=servicer, interceptor=interceptor)
    async with open_channel(srv.target) as channel:
        reply = await controller_stub(channel).Heartbeat(pb.HeartbeatRequest(name="now"), timeout=10)
    assert reply.heartbeat_interval_secs == 30
    assert intercepted == ["/spur.v1.Controller/Heartbeat"]
    assert servicer.now_calls == [] and servicer.async_calls == ["now"]


def test_a_companion_must_be_synchronous_and_for_a_unary_method() -> None:
    class AsyncCompanion(ControllerServicer):
        async def Heartbeat_now(self, request: object, context: CallContext) -> None:
            return None

    class StreamingCompanion(ControllerServicer):
        def WatchJob_now(self, request: object, context: CallContext) -> None:
            return None

    with pytest.raises(ValueError, match="Heartbeat_now must be synchronous"):
        Server().add_service(CONTROLLER, AsyncCompanion())
    with pytest.raises(ValueError, match="WatchJob_now must be synchronous, for a unary RPC"):
        Server().add_service(CONTROLLER, StreamingCompanion())


async def _open_call_without_its_end(client: RawH2Client, timeout: str | None) -> int:
    """HEADERS (with ``grpc-timeout`` when given) and half of a Heartbeat request, never ended."""
    headers = [
        (":method", "POST"),
        (":scheme", "http"),
        (":path", "/spur.v1.Controller/Heartbeat"),
        (":authority", "test"),
        ("content-type", "application/grpc"),
        ("te", "trailers"),
    ] + ([("grpc-timeout", timeout)] if timeout else [])
    stream_id = client.conn.get_next_available_stream_id()
    client.conn.send_headers(stream_id, headers)
    body = grpc_frame(pb.HeartbeatRequest(name="now").SerializeToString())
    client.conn.send_data(stream_id, body[:4])
    await client.flush()
    return stream_id


async def _trailers_of(client: RawH2Client, stream_id: int) -> dict[str, str]:
    """The first header block the server sends on ``stream_id`` (a trailers-only answer); fails
    after 10 s rather than hang when none comes."""
    with trio.fail_after(10):
        while True:
            for event in await client.events():
                if getattr(event, "stream_id", None) == stream_id and isinstance(
                    event, h2.events.ResponseReceived | h2.events.TrailersReceived
                ):
                    return dict(event.headers)


async def test_a_companion_s_call_that_never_ends_its_request_gets_deadline_exceeded(nursery):
    """No task holds such a call's deadline: the connection's deadline watch answers it, and the
    connection goes on serving (a whole request sent after it is answered as usual)."""
    servicer = WithCompanions()
    seen: list[tuple[str, str]] = []
    srv = await start_server(nursery, controller=servicer, observer=lambda m, code, s: seen.append((m, code)))
    client = await RawH2Client.connect(srv.port)
    began = trio.current_time()
    stream_id = await _open_call_without_its_end(client, "200m")
    trailers = await _trailers_of(client, stream_id)
    assert trailers["grpc-status"] == str(StatusCode.DEADLINE_EXCEEDED.value)
    assert trailers["grpc-message"] == "deadline exceeded"
    assert trio.current_time() - began >= 0.2
    assert seen == [("/spur.v1.Controller/Heartbeat", "DEADLINE_EXCEEDED")]
    assert servicer.now_calls == [] and servicer.async_calls == []
    body = grpc_frame(pb.HeartbeatRequest(name="now").SerializeToString())
    response = await client.call("/spur.v1.Controller/Heartbeat", body, [("grpc-timeout", "200m")])
    assert response.trailers["grpc-status"] == "0"
    assert servicer.now_calls == ["now"]


async def test_a_server_shutting_down_answers_a_companion_s_call_still_waiting_unavailable(nursery):
    srv = await start_server(nursery, controller=WithCompanions())
    client = await RawH2Client.connect(srv.port)
    stream_id = await _open_call_without_its_end(client, None)
    ping = await client.call(
        "/spur.v1.Controller/Heartbeat", grpc_frame(pb.HeartbeatRequest(name="now").SerializeToString())
    )
    assert ping.trailers["grpc-status"] == "0"  # the server has read the unfinished call's HEADERS too
    srv.scope.cancel()
    trailers = await _trailers_of(client, stream_id)
    assert trailers["grpc-status"] == str(StatusCode.UNAVAILABLE.value)
    assert trailers["grpc-message"] == "server is shutting down"
