"""Wire compatibility with stock gRPC (grpcio): its client against our server, our channel against its server.

grpcio runs its own threads, so its blocking client calls go through ``trio.to_thread.run_sync`` while our
server runs in the test's Trio loop; its server runs in a thread pool while our channel calls it from Trio.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
import trio
from rpc_helpers import MB, start_server

from spur.rpc.channel import open_channel
from spur.rpc.proto import spur_pb2 as pb
from spur.rpc.status import RpcError, StatusCode
from spur.rpc.stub import agent_stub, controller_stub

grpc = pytest.importorskip("grpc")

OPTIONS = [("grpc.enable_http_proxy", 0), ("grpc.max_receive_message_length", 64 * MB)]


# ---------------------------------------------------------------- grpcio client -> our server


@pytest.fixture
def grpc_channel_factory():
    channels = []

    def make(target: str):
        channel = grpc.insecure_channel(target, options=OPTIONS)
        channels.append(channel)
        return channel

    yield make
    for channel in channels:
        channel.close()


def submit_callable(channel):
    return channel.unary_unary(
        "/spur.v1.Controller/SubmitJob",
        request_serializer=pb.SubmitJobRequest.SerializeToString,
        response_deserializer=pb.SubmitJobResponse.FromString,
    )


async def test_grpcio_client_unary_ok_and_errors(nursery, grpc_channel_factory):
    srv = await start_server(nursery)
    channel = grpc_channel_factory(srv.target)
    submit = submit_callable(channel)

    reply = await trio.to_thread.run_sync(
        lambda: submit(
            pb.SubmitJobRequest(spec=pb.JobSpec(script="hello")), timeout=10, metadata=[("x-spur-uid", "7")]
        )
    )
    assert reply.job_id == 5
    assert srv.controller.seen[-1].metadata["x-spur-uid"] == "7"

    def failing(name: str, comment: str = ""):
        try:
            submit(pb.SubmitJobRequest(spec=pb.JobSpec(name=name, comment=comment)), timeout=10)
        except grpc.RpcError as exc:
            return exc
        raise AssertionError("call unexpectedly succeeded")

    err = await trio.to_thread.run_sync(failing, "not-found")
    assert err.code() == grpc.StatusCode.NOT_FOUND
    assert err.details() == "no such job 42"
    assert ("x-reason", "gone") in tuple(err.trailing_metadata())
    err = await trio.to_thread.run_sync(failing, "abort", "100% ünïcode")
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert err.details() == "100% ünïcode"
    err = await trio.to_thread.run_sync(failing, "crash")
    assert err.code() == grpc.StatusCode.INTERNAL

    unknown = channel.unary_unary("/spur.v1.Controller/GetNodes")
    err = await trio.to_thread.run_sync(lambda: _capture(lambda: unknown(b"", timeout=10)))
    assert err.code() == grpc.StatusCode.UNIMPLEMENTED


async def test_grpcio_client_large_messages(nursery, grpc_channel_factory):
    srv = await start_server(nursery)
    channel = grpc_channel_factory(srv.target)
    submit = submit_callable(channel)
    reply = await trio.to_thread.run_sync(
        lambda: submit(pb.SubmitJobRequest(spec=pb.JobSpec(script="x" * 8 * MB)), timeout=30)
    )
    assert reply.job_id == 8 * MB
    get_jobs = channel.unary_unary(
        "/spur.v1.Controller/GetJobs",
        request_serializer=pb.GetJobsRequest.SerializeToString,
        response_deserializer=pb.GetJobsResponse.FromString,
    )
    jobs = await trio.to_thread.run_sync(
        lambda: get_jobs(pb.GetJobsRequest(job_ids=[8 * MB], states=["BIG"]), timeout=30)
    )
    assert len(jobs.jobs[0].spec.script) == 8 * MB


async def test_grpcio_client_streaming(nursery, grpc_channel_factory):
    srv = await start_server(nursery)
    channel = grpc_channel_factory(srv.target)
    watch = channel.unary_stream(
        "/spur.v1.Controller/WatchJob",
        request_serializer=pb.GetJobsRequest.SerializeToString,
        response_deserializer=pb.JobInfo.FromString,
    )
    infos = await trio.to_thread.run_sync(
        lambda: list(watch(pb.GetJobsRequest(job_ids=[1, 2, 3]), timeout=10))
    )
    assert [i.job_id for i in infos] == [1, 2, 3]

    def watch_failing():
        got = []
        try:
            for info in watch(pb.GetJobsRequest(job_ids=[9], states=["fail"]), timeout=10):
                got.append(info.job_id)
        except grpc.RpcError as exc:
            return got, exc
        raise AssertionError("stream unexpectedly succeeded")

    got, err = await trio.to_thread.run_sync(watch_failing)
    assert got == [9]
    assert (err.code(), err.details()) == (grpc.StatusCode.ABORTED, "watch aborted")


async def test_grpcio_client_deadline(nursery, grpc_channel_factory):
    srv = await start_server(nursery)
    submit = submit_callable(grpc_channel_factory(srv.target))
    err = await trio.to_thread.run_sync(
        lambda: _capture(lambda: submit(pb.SubmitJobRequest(spec=pb.JobSpec(name="hang")), timeout=0.3))
    )
    assert err.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    with trio.fail_after(5):
        await srv.controller.cancelled.wait()  # our handler was cancelled too


def _capture(fn) -> grpc.RpcError:
    try:
        fn()
    except grpc.RpcError as exc:
        return exc
    raise AssertionError("call unexpectedly succeeded")


# ---------------------------------------------------------------- our channel -> grpcio server


class _GrpcioServicer:
    def __init__(self) -> None:
        self.metadata: dict[str, str] = {}
        self.release = threading.Event()

    def submit(self, request: pb.SubmitJobRequest, context) -> pb.SubmitJobResponse:
        self.metadata = dict(context.invocation_metadata())
        if request.spec.name == "missing":
            context.abort(grpc.StatusCode.NOT_FOUND, "no such partition: gpü")
        if request.spec.name == "hang":
            self.release.wait(10)
        return pb.SubmitJobResponse(job_id=len(request.spec.script))

    def get_jobs(self, request: pb.GetJobsRequest, context) -> pb.GetJobsResponse:
        return pb.GetJobsResponse(
            jobs=[pb.JobInfo(job_id=1, spec=pb.JobSpec(script="q" * request.job_ids[0]))]
        )

    def stream_output(self, request: pb.StreamOutputRequest, context) -> Iterator[pb.OutputChunk]:
        for i in range(request.job_id):
            yield pb.OutputChunk(stream="stdout", data=b"%d" % i)
        if request.follow:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, "job is gone")


@pytest.fixture
def grpcio_server():
    servicer = _GrpcioServicer()
    server = grpc.server(ThreadPoolExecutor(max_workers=8), options=OPTIONS)
    handlers = {
        "SubmitJob": grpc.unary_unary_rpc_method_handler(
            servicer.submit, pb.SubmitJobRequest.FromString, pb.SubmitJobResponse.SerializeToString
        ),
        "GetJobs": grpc.unary_unary_rpc_method_handler(
            servicer.get_jobs, pb.GetJobsRequest.FromString, pb.GetJobsResponse.SerializeToString
        ),
    }
    agent = {
        "StreamOutput": grpc.unary_stream_rpc_method_handler(
            servicer.stream_output, pb.StreamOutputRequest.FromString, pb.OutputChunk.SerializeToString
        )
    }
    server.add_generic_rpc_handlers(
        (
            grpc.method_handlers_generic_handler("spur.v1.Controller", handlers),
            grpc.method_handlers_generic_handler("spur.v1.Agent", agent),
        )
    )
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield f"127.0.0.1:{port}", servicer
    servicer.release.set()
    server.stop(None)


async def test_our_channel_against_grpcio_unary(grpcio_server):
    target, servicer = grpcio_server
    async with open_channel(target, metadata_provider=lambda: {"x-spur-uid": "1000"}) as channel:
        stub = controller_stub(channel)
        reply = await stub.SubmitJob(pb.SubmitJobRequest(spec=pb.JobSpec(script="abc")), timeout=10)
        assert reply.job_id == 3
        assert servicer.metadata["x-spur-uid"] == "1000"
        with pytest.raises(RpcError) as err:
            await stub.SubmitJob(pb.SubmitJobRequest(spec=pb.JobSpec(name="missing")))
        assert (err.value.code, err.value.message) == (StatusCode.NOT_FOUND, "no such partition: gpü")
        with pytest.raises(RpcError) as err:
            await stub.GetNodes(pb.GetNodesRequest())
        assert err.value.code == StatusCode.UNIMPLEMENTED
        with trio.fail_after(30):
            reply = await stub.SubmitJob(pb.SubmitJobRequest(spec=pb.JobSpec(script="x" * 8 * MB)))
            assert reply.job_id == 8 * MB
            jobs = await stub.GetJobs(pb.GetJobsRequest(job_ids=[8 * MB]))
        assert len(jobs.jobs[0].spec.script) == 8 * MB
        with pytest.raises(RpcError) as err:
            await stub.SubmitJob(pb.SubmitJobRequest(spec=pb.JobSpec(name="hang")), timeout=0.2)
        assert err.value.code == StatusCode.DEADLINE_EXCEEDED


async def test_our_channel_against_grpcio_streaming(grpcio_server):
    target, _ = grpcio_server
    async with open_channel(target) as channel:
        stub = agent_stub(channel)
        chunks = [c.data async for c in stub.StreamOutput(pb.StreamOutputRequest(job_id=50), timeout=10)]
        assert chunks == [b"%d" % i for i in range(50)]
        got = []
        with pytest.raises(RpcError) as err:
            async for chunk in stub.StreamOutput(pb.StreamOutputRequest(job_id=2, follow=True)):
                got.append(chunk.data)
        assert got == [b"0", b"1"]
        assert (err.value.code, err.value.message) == (StatusCode.FAILED_PRECONDITION, "job is gone")
