"""Shared pieces for the spur.rpc tests: test servicers, a server starter, a raw HTTP/2 client."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

import h2.config
import h2.connection
import h2.events
import trio

from spur.rpc.proto import spur_pb2 as pb
from spur.rpc.server import Authenticator, CallContext, Interceptor, Observer, PreAuthLimits, Server
from spur.rpc.status import RpcError, StatusCode

CONTROLLER = pb.DESCRIPTOR.services_by_name["Controller"]
AGENT = pb.DESCRIPTOR.services_by_name["Agent"]
MB = 1024 * 1024


class ControllerServicer:
    """Behaviour is chosen by the request: ``spec.name`` for SubmitJob, ``states`` for GetJobs/WatchJob.

    Deliberately lacks most Controller methods (they must answer UNIMPLEMENTED).
    """

    def __init__(self) -> None:
        self.started = trio.Event()
        self.cancelled = trio.Event()
        self.seen: list[CallContext] = []
        self.barrier_count = 0
        self.barrier_target = 0
        self.barrier = trio.Event()

    async def SubmitJob(self, request: pb.SubmitJobRequest, context: CallContext) -> pb.SubmitJobResponse:
        self.seen.append(context)
        name = request.spec.name
        if name == "not-found":
            raise RpcError(StatusCode.NOT_FOUND, "no such job 42", {"x-reason": "gone"})
        if name == "abort":
            context.abort(StatusCode.INVALID_ARGUMENT, request.spec.comment)
        if name == "crash":
            raise ValueError("boom")
        if name == "hang":
            await self._hang()
        if name == "barrier":
            self.barrier_count += 1
            if self.barrier_count == self.barrier_target:
                self.barrier.set()
            await self.barrier.wait()
        if name == "trailer":
            context.set_trailing_metadata({"x-job-state": "PENDING"})
        if name == "deadline":
            remaining = context.time_remaining()
            return pb.SubmitJobResponse(job_id=0 if remaining is None else int(remaining * 1000))
        return pb.SubmitJobResponse(job_id=len(request.spec.script))

    async def GetJobs(self, request: pb.GetJobsRequest, context: CallContext) -> pb.GetJobsResponse:
        if "BIG" in request.states:
            size = request.job_ids[0]
            return pb.GetJobsResponse(jobs=[pb.JobInfo(job_id=1, spec=pb.JobSpec(script="y" * size))])
        return pb.GetJobsResponse(jobs=[pb.JobInfo(job_id=i) for i in request.job_ids])

    async def WatchJob(self, request: pb.GetJobsRequest, context: CallContext):
        for job_id in request.job_ids:
            yield pb.JobInfo(job_id=job_id, state="RUNNING")
        if "fail" in request.states:
            raise RpcError(StatusCode.ABORTED, "watch aborted")
        if "forever" in request.states:
            await self._hang()

    async def _hang(self) -> None:
        self.started.set()
        try:
            await trio.sleep_forever()
        finally:
            self.cancelled.set()


class AgentServicer:
    def __init__(self) -> None:
        self.produced = 0

    async def StreamOutput(self, request: pb.StreamOutputRequest, context: CallContext):
        if request.follow:  # a firehose of 64 KiB chunks, counting how many were handed to the transport
            for _ in range(request.job_id):
                yield pb.OutputChunk(stream="stdout", data=b"o" * 65536)
                self.produced += 1
            return
        for i in range(request.job_id):
            yield pb.OutputChunk(stream="stdout", data=f"line {i}\n".encode(), task=0)
        yield pb.OutputChunk(stream="exit", exit_code=3)

    async def Status(self, request: pb.Empty, context: CallContext) -> pb.AgentStatus:
        return pb.AgentStatus(name=context.peer)


@dataclass
class Running:
    port: int
    controller: ControllerServicer
    agent: AgentServicer
    scope: trio.CancelScope
    server: Server | None = None

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"


async def start_server(
    nursery: trio.Nursery,
    *,
    port: int = 0,
    interceptor: Interceptor | None = None,
    max_message_bytes: int = 64 * MB,
    controller: ControllerServicer | None = None,
    observer: Observer | None = None,
    authenticator: Authenticator | None = None,
    preauth: PreAuthLimits | None = None,
) -> Running:
    """Serve the test Controller and Agent on loopback inside ``nursery``; cancel ``scope`` to stop."""
    server = Server(
        interceptor=interceptor,
        authenticator=authenticator,
        max_message_bytes=max_message_bytes,
        observer=observer,
        preauth=preauth,
    )
    controller = controller or ControllerServicer()
    server.add_service(CONTROLLER, controller)
    agent = AgentServicer()
    server.add_service(AGENT, agent)

    scope = trio.CancelScope()

    async def run(task_status=trio.TASK_STATUS_IGNORED) -> None:
        with scope:
            await server.serve("127.0.0.1", port, task_status=task_status)

    bound = await nursery.start(run)
    return Running(bound, controller, agent, scope, server)


def grpc_frame(payload: bytes, compressed: bool = False) -> bytes:
    return struct.pack(">BI", int(compressed), len(payload)) + payload


@dataclass
class RawResponse:
    header_blocks: list[dict[str, str]] = field(default_factory=list)
    data: bytes = b""
    reset: int | None = None

    @property
    def trailers(self) -> dict[str, str]:
        return self.header_blocks[-1]


class RawH2Client:
    """A bare h2 client for checking exactly what the server puts on the wire."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.conn = h2.connection.H2Connection(
            h2.config.H2Configuration(client_side=True, header_encoding="utf-8")
        )
        self.conn.initiate_connection()

    @classmethod
    async def connect(cls, port: int) -> RawH2Client:
        client = cls(await trio.open_tcp_stream("127.0.0.1", port))
        await client.flush()
        return client

    async def flush(self) -> None:
        await self.stream.send_all(self.conn.data_to_send())

    async def events(self) -> list[h2.events.Event]:
        data = await self.stream.receive_some(65536)
        assert data, "server closed the connection"
        events = self.conn.receive_data(data)
        for event in events:
            if isinstance(event, h2.events.DataReceived):
                self.conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
        await self.flush()
        return events

    async def call(
        self, path: str, body: bytes, extra_headers: list[tuple[str, str]] | None = None
    ) -> RawResponse:
        headers = [
            (":method", "POST"),
            (":scheme", "http"),
            (":path", path),
            (":authority", "test"),
            ("content-type", "application/grpc"),
            ("te", "trailers"),
        ] + (extra_headers or [])
        stream_id = self.conn.get_next_available_stream_id()
        self.conn.send_headers(stream_id, headers)
        self.conn.send_data(stream_id, body, end_stream=True)
        await self.flush()
        response = RawResponse()
        while True:
            for event in await self.events():
                if getattr(event, "stream_id", None) != stream_id:
                    continue
                if isinstance(event, h2.events.ResponseReceived | h2.events.TrailersReceived):
                    response.header_blocks.append(dict(event.headers))
                elif isinstance(event, h2.events.DataReceived):
                    response.data += event.data
                elif isinstance(event, h2.events.StreamReset):
                    response.reset = event.error_code
                    return response
                elif isinstance(event, h2.events.StreamEnded):
                    return response
