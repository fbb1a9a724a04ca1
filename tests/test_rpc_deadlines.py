"""Client-side deadlines: local enforcement, propagation as grpc-timeout, handler cancellation."""

from __future__ import annotations

import pytest
import trio
from rpc_helpers import start_server

from spur.rpc.channel import open_channel
from spur.rpc.proto import spur_pb2 as pb
from spur.rpc.status import RpcError, StatusCode
from spur.rpc.stub import controller_stub


def submit(name: str = "") -> pb.SubmitJobRequest:
    return pb.SubmitJobRequest(spec=pb.JobSpec(name=name))


async def test_unary_deadline_exceeded_and_handler_cancelled(nursery, autojump_clock):
    srv = await start_server(nursery)
    async with open_channel(srv.target) as channel:
        stub = controller_stub(channel)
        await stub.SubmitJob(submit())  # connection established before the clock starts jumping
        start = trio.current_time()
        with pytest.raises(RpcError) as err:
            await stub.SubmitJob(submit("hang"), timeout=30)
        assert err.value.code == StatusCode.DEADLINE_EXCEEDED
        assert trio.current_time() - start == pytest.approx(30, abs=0.1)
        with trio.fail_after(5):
            await srv.controller.cancelled.wait()
        # The server learned the deadline from grpc-timeout.
        reply = await stub.SubmitJob(submit("deadline"), timeout=12)
        assert 11_000 <= reply.job_id <= 12_000
        # No timeout: the handler sees no deadline.
        assert (await stub.SubmitJob(submit("deadline"))).job_id == 0


async def test_stream_deadline_after_some_messages(nursery, autojump_clock):
    srv = await start_server(nursery)
    async with open_channel(srv.target) as channel:
        stub = controller_stub(channel)
        await stub.SubmitJob(submit())
        got = []
        with pytest.raises(RpcError) as err:
            async for info in stub.WatchJob(
                pb.GetJobsRequest(job_ids=[1, 2], states=["forever"]), timeout=60
            ):
                got.append(info.job_id)
        assert got == [1, 2]
        assert err.value.code == StatusCode.DEADLINE_EXCEEDED
        with trio.fail_after(5):
            await srv.controller.cancelled.wait()


async def test_caller_cancellation_resets_the_stream(nursery):
    srv = await start_server(nursery)
    async with open_channel(srv.target) as channel:
        with trio.move_on_after(0.05):
            await controller_stub(channel).SubmitJob(submit("hang"))
        with trio.fail_after(5):
            await srv.controller.cancelled.wait()
