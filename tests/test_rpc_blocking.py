"""spur.rpc.blocking: unary calls without Trio against the real (Trio) server, run in a thread."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import trio

from spur.rpc.blocking import (
    BlockingChannel,
    NeedsEventLoop,
    blocking_controller_stub,
    drive,
    wait_readable,
)
from spur.rpc.proto import spur_pb2 as pb
from spur.rpc.server import CallContext, Server
from spur.rpc.status import RpcError, StatusCode

SUBMIT = "/spur.v1.Controller/SubmitJob"
WATCH = "/spur.v1.Controller/WatchJob"


class _Controller:
    def __init__(self) -> None:
        self.metadata: list[dict[str, str]] = []
        self.release = trio.Event()
        self.token: trio.lowlevel.TrioToken | None = None

    async def SubmitJob(self, request: pb.SubmitJobRequest, context: CallContext) -> pb.SubmitJobResponse:
        self.metadata.append(dict(context.metadata))
        if request.spec.name == "bad":
            raise RpcError(StatusCode.INVALID_ARGUMENT, "bad job name")
        if request.spec.name == "slow":
            await trio.sleep(30)
        return pb.SubmitJobResponse(job_id=len(request.spec.script))

    async def GetJobs(self, request: pb.GetJobsRequest, context: CallContext) -> pb.GetJobsResponse:
        big = "x" * 1_000_000
        return pb.GetJobsResponse(jobs=[pb.JobInfo(job_id=i, reason=big) for i in request.job_ids])

    async def WatchJob(self, request: pb.GetJobsRequest, context: CallContext) -> AsyncIterator[pb.JobInfo]:
        """Job ids name the script: n > 0 streams n states then ends OK (one of them 300 kB, past a
        stream window); 0 waits for ``release`` and then streams one; an id over 1000 streams one
        state, then fails with NOT_FOUND."""
        job_id = request.job_ids[0]
        if job_id == 0:
            await self.release.wait()
            yield pb.JobInfo(job_id=0, state="RELEASED")
            return
        if job_id > 1000:
            yield pb.JobInfo(job_id=job_id, state="PENDING")
            raise RpcError(StatusCode.NOT_FOUND, f"job {job_id} went away")
        for n in range(job_id):
            yield pb.JobInfo(job_id=n, state="RUNNING", reason="x" * (300_000 if n == 1 else 1))


@pytest.fixture
def server() -> Iterator[tuple[str, _Controller]]:
    servicer = _Controller()
    ready = threading.Event()
    holder: dict[str, Any] = {}

    def runner() -> None:
        async def main() -> None:
            srv = Server()
            srv.add_service(pb.DESCRIPTOR.services_by_name["Controller"], servicer)
            async with trio.open_nursery() as nursery:
                holder["port"] = await nursery.start(srv.serve, "127.0.0.1", 0)
                holder["token"] = trio.lowlevel.current_trio_token()
                holder["cancel"] = nursery.cancel_scope.cancel
                ready.set()

        trio.run(main)

    thread = threading.Thread(target=runner, daemon=True)
    thread.start()
    assert ready.wait(10), "server thread did not start"
    servicer.token = holder["token"]
    try:
        yield f"127.0.0.1:{holder['port']}", servicer
    finally:
        trio.from_thread.run_sync(holder["cancel"], trio_token=holder["token"])
        thread.join(10)


def test_unary_call_sends_metadata_and_large_messages(server) -> None:
    target, servicer = server
    script = "#" * 300_000  # larger than the default 64 KiB stream window
    with BlockingChannel(target, metadata={"X-User": "alice"}) as ch:
        resp = ch.unary(SUBMIT, pb.SubmitJobRequest(spec=pb.JobSpec(script=script)), pb.SubmitJobResponse)
        assert resp.job_id == len(script)
        jobs = ch.unary("/spur.v1.Controller/GetJobs", pb.GetJobsRequest(job_ids=[1, 2]), pb.GetJobsResponse)
        assert [j.job_id for j in jobs.jobs] == [1, 2]
        assert len(jobs.jobs[1].reason) == 1_000_000
    assert servicer.metadata[0]["x-user"] == "alice"


def test_server_error_becomes_rpc_error_and_channel_stays_usable(server) -> None:
    target, _ = server
    with BlockingChannel(target) as ch:
        with pytest.raises(RpcError) as err:
            ch.unary(SUBMIT, pb.SubmitJobRequest(spec=pb.JobSpec(name="bad")), pb.SubmitJobResponse)
        assert err.value.code is StatusCode.INVALID_ARGUMENT
        assert err.value.message == "bad job name"
        with pytest.raises(RpcError) as err:
            ch.unary("/spur.v1.Controller/Nope", pb.Empty(), pb.Empty)
        assert err.value.code is StatusCode.UNIMPLEMENTED
        ok = ch.unary(SUBMIT, pb.SubmitJobRequest(spec=pb.JobSpec(script="abc")), pb.SubmitJobResponse)
        assert ok.job_id == 3


def test_deadline_exceeded(server) -> None:
    target, _ = server
    with BlockingChannel(target) as ch:
        with pytest.raises(RpcError) as err:
            ch.unary(
                SUBMIT, pb.SubmitJobRequest(spec=pb.JobSpec(name="slow")), pb.SubmitJobResponse, timeout=0.3
            )
        assert err.value.code is StatusCode.DEADLINE_EXCEEDED
        assert "0.3s" in err.value.message


def test_unreachable_target_is_unavailable() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: connection refused
        with pytest.raises(RpcError) as err:
            BlockingChannel(f"127.0.0.1:{port}").unary(SUBMIT, pb.SubmitJobRequest(), pb.SubmitJobResponse)
    assert err.value.code is StatusCode.UNAVAILABLE
    assert err.value.message.startswith(f"cannot connect to 127.0.0.1:{port}")


def test_drive_runs_async_bodies_written_for_the_trio_stub(server) -> None:
    target, _ = server

    async def body(stub: Any) -> list[int]:
        a = await stub.SubmitJob(pb.SubmitJobRequest(spec=pb.JobSpec(script="ab")), timeout=5)
        try:
            await stub.SubmitJob(pb.SubmitJobRequest(spec=pb.JobSpec(name="bad")), timeout=5)
        except RpcError as exc:
            return [a.job_id, int(exc.code)]
        return [a.job_id]

    async def needs_trio(stub: Any) -> None:
        await trio.sleep(0)

    with BlockingChannel(target) as ch:
        stub = blocking_controller_stub(ch)
        assert drive(body(stub)) == [2, int(StatusCode.INVALID_ARGUMENT)]
        with pytest.raises(NeedsEventLoop):
            drive(needs_trio(stub))
        with pytest.raises(TypeError):
            stub.SubmitJob(pb.Empty())


def test_module_does_not_import_trio() -> None:
    code = "import sys, spur.rpc.blocking; print('trio' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_server_stream_hands_out_every_message_then_checks_the_status(server) -> None:
    target, _ = server
    with BlockingChannel(target) as ch:
        states = list(ch.stream(WATCH, pb.GetJobsRequest(job_ids=[5]), pb.JobInfo))
        assert [s.job_id for s in states] == [0, 1, 2, 3, 4]
        assert len(states[1].reason) == 300_000
        failing = ch.stream(WATCH, pb.GetJobsRequest(job_ids=[1001]), pb.JobInfo)
        seen = []
        with pytest.raises(RpcError) as err:
            for info in failing:
                seen.append(info.state)
        assert seen == ["PENDING"]
        assert err.value.code is StatusCode.NOT_FOUND
        assert err.value.message == "job 1001 went away"
        # the channel goes on to the next call after a stream, as after a unary one
        assert (
            ch.unary(SUBMIT, pb.SubmitJobRequest(spec=pb.JobSpec(script="ab")), pb.SubmitJobResponse).job_id
            == 2
        )


def test_async_for_over_a_stream_runs_under_drive(server) -> None:
    target, _ = server

    async def body(stub: Any) -> list[int]:
        return [info.job_id async for info in stub.WatchJob(pb.GetJobsRequest(job_ids=[3]))]

    async def failing(stub: Any) -> str:
        try:
            async for _info in stub.WatchJob(pb.GetJobsRequest(job_ids=[1002])):
                pass
        except RpcError as exc:
            return exc.message
        return "no error"

    with BlockingChannel(target) as ch:
        stub = blocking_controller_stub(ch)
        assert drive(body(stub)) == [0, 1, 2]
        assert drive(failing(stub)) == "job 1002 went away"


def test_wait_readable_follows_several_streams_and_other_fds(server) -> None:
    import os

    target, servicer = server
    pipe_r, pipe_w = os.pipe()
    with BlockingChannel(target) as held, BlockingChannel(target) as quick:
        waiting = held.stream(WATCH, pb.GetJobsRequest(job_ids=[0]), pb.JobInfo)
        finite = quick.stream(WATCH, pb.GetJobsRequest(job_ids=[2]), pb.JobInfo)
        got: dict[int, list[str]] = {id(waiting): [], id(finite): []}
        while not finite.done:
            streams, fds = wait_readable([waiting, finite], [pipe_r], timeout=10)
            assert streams and not fds  # readable: connection set-up frames or messages
            for stream in streams:
                got[id(stream)].extend(info.state for info in stream.read_available())
        assert got == {id(waiting): [], id(finite): ["RUNNING", "RUNNING"]}
        while True:  # the held stream's connection set-up, until it has nothing more to read
            streams, _ = wait_readable([waiting], [pipe_r], timeout=0.2)
            if not streams:
                break
            assert waiting.read_available() == []
        os.write(pipe_w, b"x")
        assert wait_readable([waiting], [pipe_r], timeout=10) == ([], [pipe_r])
        trio.from_thread.run_sync(servicer.release.set, trio_token=servicer.token)
        streams, _ = wait_readable([waiting], timeout=10)
        assert streams == [waiting]
        assert [i.state for i in waiting] == ["RELEASED"]
    os.close(pipe_r)
    os.close(pipe_w)


def test_a_stream_with_a_deadline_ends_with_deadline_exceeded(server) -> None:
    target, _ = server
    with BlockingChannel(target) as ch:
        stream = ch.stream(WATCH, pb.GetJobsRequest(job_ids=[0]), pb.JobInfo, timeout=0.3)
        with pytest.raises(RpcError) as err:
            list(stream)
        assert err.value.code is StatusCode.DEADLINE_EXCEEDED
