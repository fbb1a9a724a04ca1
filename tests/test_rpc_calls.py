"""Round trips through spur.rpc's own server and channel over real loopback sockets."""

from __future__ import annotations

import logging
from contextlib import aclosing

import pytest
import trio
import trio.testing
from rpc_helpers import MB, ControllerServicer, start_server

from spur.rpc.channel import InvalidTarget, open_channel
from spur.rpc.proto import spur_pb2 as pb
from spur.rpc.server import CallContext
from spur.rpc.status import RpcError, StatusCode
from spur.rpc.stub import agent_stub, controller_stub


def submit(name: str = "", script: str = "", comment: str = "") -> pb.SubmitJobRequest:
    return pb.SubmitJobRequest(spec=pb.JobSpec(name=name, script=script, comment=comment))


async def test_unary_round_trip(nursery):
    srv = await start_server(nursery)
    async with open_channel(srv.target) as channel:
        stub = controller_stub(channel)
        reply = await stub.SubmitJob(submit(script="#!/bin/sh\necho hi\n"), timeout=10)
        assert reply == pb.SubmitJobResponse(job_id=len("#!/bin/sh\necho hi\n"))
        jobs = await stub.GetJobs(pb.GetJobsRequest(job_ids=[7, 8]))
        assert [j.job_id for j in jobs.jobs] == [7, 8]
    ctx = srv.controller.seen[0]
    assert ctx.method == "/spur.v1.Controller/SubmitJob"
    assert ctx.peer.startswith("127.0.0.1:")
    assert ctx.deadline is not None


async def test_server_streaming_round_trips(nursery):
    srv = await start_server(nursery)
    async with open_channel(f"http://{srv.target}") as channel:
        infos = [
            info async for info in controller_stub(channel).WatchJob(pb.GetJobsRequest(job_ids=[1, 2, 3]))
        ]
        assert [(i.job_id, i.state) for i in infos] == [(1, "RUNNING"), (2, "RUNNING"), (3, "RUNNING")]
        chunks = [c async for c in agent_stub(channel).StreamOutput(pb.StreamOutputRequest(job_id=2))]
        assert [(c.stream, c.data, c.exit_code) for c in chunks] == [
            ("stdout", b"line 0\n", 0),
            ("stdout", b"line 1\n", 0),
            ("exit", b"", 3),
        ]
        empty = [i async for i in controller_stub(channel).WatchJob(pb.GetJobsRequest())]
        assert empty == []


async def test_status_codes_and_messages_propagate(nursery):
    srv = await start_server(nursery)
    async with open_channel(srv.target) as channel:
        stub = controller_stub(channel)
        with pytest.raises(RpcError) as err:
            await stub.SubmitJob(submit("not-found"))
        assert err.value.code == StatusCode.NOT_FOUND
        assert err.value.message == "no such job 42"
        assert err.value.metadata == {"x-reason": "gone"}
        assert str(err.value) == "NOT_FOUND: no such job 42"

        tricky = "bad spec: ünïcode 100% done\nnext line"
        with pytest.raises(RpcError) as err:
            await stub.SubmitJob(submit("abort", comment=tricky))
        assert (err.value.code, err.value.message) == (StatusCode.INVALID_ARGUMENT, tricky)


async def test_stream_error_after_messages(nursery):
    srv = await start_server(nursery)
    async with open_channel(srv.target) as channel:
        got = []
        with pytest.raises(RpcError) as err:
            async for info in controller_stub(channel).WatchJob(
                pb.GetJobsRequest(job_ids=[5], states=["fail"])
            ):
                got.append(info.job_id)
        assert got == [5]
        assert (err.value.code, err.value.message) == (StatusCode.ABORTED, "watch aborted")


async def test_handler_crash_is_internal_and_server_keeps_serving(nursery, caplog):
    srv = await start_server(nursery)
    async with open_channel(srv.target) as channel:
        stub = controller_stub(channel)
        with caplog.at_level(logging.ERROR, logger="spur.rpc.server"):
            with pytest.raises(RpcError) as err:
                await stub.SubmitJob(submit("crash"))
        assert err.value.code == StatusCode.INTERNAL
        assert "boom" in err.value.message
        assert any(r.exc_info and "boom" in str(r.exc_info[1]) for r in caplog.records)
        assert (await stub.SubmitJob(submit(script="ok"))).job_id == 2


async def test_unimplemented_method_and_service(nursery):
    srv = await start_server(nursery)
    async with open_channel(srv.target) as channel:
        with pytest.raises(RpcError) as err:
            await controller_stub(channel).GetNodes(pb.GetNodesRequest())
        assert err.value.code == StatusCode.UNIMPLEMENTED
        with pytest.raises(RpcError) as err:
            await channel.unary("/spur.v1.Nope/Hello", pb.Empty(), pb.Empty)
        assert err.value.code == StatusCode.UNIMPLEMENTED
        assert "unknown service spur.v1.Nope" in err.value.message
        with pytest.raises(RpcError) as err:
            await channel.unary("/spur.v1.Controller/Nope", pb.Empty(), pb.Empty)
        assert err.value.message == "unknown method Nope for service spur.v1.Controller"


class _Garbage:
    """Quacks like a message but serializes to bytes no protobuf parser accepts."""

    def SerializeToString(self) -> bytes:
        return b"\x0a\xff\xff\xff\xff\x0f"


async def test_undecodable_request_is_invalid_argument(nursery):
    srv = await start_server(nursery)
    async with open_channel(srv.target) as channel:
        with pytest.raises(RpcError) as err:
            await channel.unary("/spur.v1.Controller/SubmitJob", _Garbage(), pb.SubmitJobResponse)  # type: ignore[arg-type]
        assert err.value.code == StatusCode.INVALID_ARGUMENT
        assert "spur.v1.SubmitJobRequest" in err.value.message


async def test_interceptor_rejects_and_metadata_provider_reaches_handler(nursery):
    async def require_token(ctx: CallContext) -> None:
        if ctx.metadata.get("authorization") != "Bearer good":
            raise RpcError(StatusCode.UNAUTHENTICATED, "missing or bad token")

    srv = await start_server(nursery, interceptor=require_token)
    async with open_channel(srv.target) as channel:
        with pytest.raises(RpcError) as err:
            await controller_stub(channel).SubmitJob(submit())
        assert (err.value.code, err.value.message) == (StatusCode.UNAUTHENTICATED, "missing or bad token")
    assert srv.controller.seen == []  # the handler never ran

    provider = lambda: {"authorization": "Bearer good", "x-spur-uid": "1000"}  # noqa: E731
    async with open_channel(srv.target, metadata_provider=provider) as channel:
        await controller_stub(channel).SubmitJob(submit(), metadata={"X-Spur-UID": "2000", "x-extra": "1"})
    md = srv.controller.seen[0].metadata
    assert md["authorization"] == "Bearer good"
    assert md["x-spur-uid"] == "2000"  # the call's own metadata wins over the provider
    assert md["x-extra"] == "1"
    assert not any(k.startswith((":", "grpc-")) or k in ("te", "content-type") for k in md)


async def test_eight_megabytes_both_ways(nursery):
    srv = await start_server(nursery)
    async with open_channel(srv.target) as channel:
        stub = controller_stub(channel)
        with trio.fail_after(30):
            reply = await stub.SubmitJob(submit(script="x" * (8 * MB)))
            assert reply.job_id == 8 * MB
            jobs = await stub.GetJobs(pb.GetJobsRequest(job_ids=[8 * MB], states=["BIG"]))
        assert len(jobs.jobs[0].spec.script) == 8 * MB


async def test_oversized_request_is_resource_exhausted(nursery):
    srv = await start_server(nursery, max_message_bytes=64 * 1024)
    async with open_channel(srv.target) as channel:
        stub = controller_stub(channel)
        with pytest.raises(RpcError) as err:
            await stub.SubmitJob(submit(script="x" * MB))
        assert err.value.code == StatusCode.RESOURCE_EXHAUSTED
        assert (await stub.SubmitJob(submit(script="small"))).job_id == 5


async def test_oversized_response_is_resource_exhausted(nursery):
    srv = await start_server(nursery)
    async with open_channel(srv.target, max_message_bytes=1024) as channel:
        with pytest.raises(RpcError) as err:
            await controller_stub(channel).GetJobs(pb.GetJobsRequest(job_ids=[4096], states=["BIG"]))
        assert err.value.code == StatusCode.RESOURCE_EXHAUSTED


async def test_hundred_concurrent_calls_share_one_connection(nursery):
    controller = ControllerServicer()
    controller.barrier_target = 100
    srv = await start_server(nursery, controller=controller)
    results: list[int] = []
    async with open_channel(srv.target) as channel:
        stub = controller_stub(channel)

        async def one(i: int) -> None:
            results.append((await stub.SubmitJob(submit("barrier", script="s" * i))).job_id)

        # Every handler waits until all 100 are running at once: this only finishes if the calls are
        # really multiplexed, not serialized.
        with trio.fail_after(20):
            async with trio.open_nursery() as calls:
                for i in range(100):
                    calls.start_soon(one, i)
    assert sorted(results) == list(range(100))
    assert len({ctx.peer for ctx in controller.seen}) == 1


async def test_breaking_out_of_a_stream_cancels_the_handler(nursery):
    srv = await start_server(nursery)
    async with open_channel(srv.target) as channel:
        stream = controller_stub(channel).WatchJob(pb.GetJobsRequest(job_ids=[1, 2], states=["forever"]))
        async with aclosing(stream) as infos:
            async for info in infos:
                assert info.job_id == 1
                break
        with trio.fail_after(5):
            await srv.controller.cancelled.wait()
        # The connection is still good for other calls.
        assert (await controller_stub(channel).SubmitJob(submit(script="ab"))).job_id == 2


async def test_slow_stream_consumer_pushes_back_on_the_server(nursery):
    srv = await start_server(nursery)
    async with open_channel(srv.target) as channel:
        stream = agent_stub(channel).StreamOutput(pb.StreamOutputRequest(job_id=1000, follow=True))
        async with aclosing(stream) as chunks:
            first = await anext(chunks)
            assert len(first.data) == 65536
            await trio.testing.wait_all_tasks_blocked()
            # Flow control stops the handler long before it produced all 64 MiB.
            assert srv.agent.produced < 200
            received = 1
            async for _ in chunks:
                received += 1
        assert received == 1000 == srv.agent.produced


async def test_client_mistakes_raise_clear_errors(nursery):
    srv = await start_server(nursery)
    with pytest.raises(InvalidTarget, match="expected host:port"):
        async with open_channel("localhost"):
            pass
    with pytest.raises(InvalidTarget, match="port must be a number"):
        async with open_channel("localhost:http"):
            pass
    async with open_channel(srv.target) as channel:
        stub = controller_stub(channel)
        with pytest.raises(TypeError, match="takes spur.v1.SubmitJobRequest"):
            await stub.SubmitJob(pb.GetJobsRequest())
        with pytest.raises(ValueError, match="invalid metadata key"):
            await stub.SubmitJob(submit(), metadata={"bad key": "x"})
        with pytest.raises(AttributeError, match="no RPC named 'Nope'"):
            stub.Nope  # noqa: B018
