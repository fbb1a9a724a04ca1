"""The gRPC server's observer: called once per finished call with method, status name and seconds."""

from __future__ import annotations

import pytest
from rpc_helpers import start_server

from spur.rpc.channel import open_channel
from spur.rpc.proto import spur_pb2 as pb
from spur.rpc.status import RpcError
from spur.rpc.stub import agent_stub, controller_stub


def submit(script: str = "", name: str = "") -> pb.SubmitJobRequest:
    return pb.SubmitJobRequest(spec=pb.JobSpec(script=script, name=name))


async def test_observer_sees_every_call_with_its_status(nursery):
    seen: list[tuple[str, str, float]] = []
    srv = await start_server(nursery, observer=lambda method, code, secs: seen.append((method, code, secs)))
    async with open_channel(srv.target) as channel:
        stub = controller_stub(channel)
        await stub.SubmitJob(submit("#!/bin/sh\n"), timeout=10)
        with pytest.raises(RpcError):
            await stub.SubmitJob(submit(name="not-found"))
        chunks = [c async for c in agent_stub(channel).StreamOutput(pb.StreamOutputRequest(job_id=2))]
        assert chunks
    assert [(m, c) for m, c, _ in seen] == [
        ("/spur.v1.Controller/SubmitJob", "OK"),
        ("/spur.v1.Controller/SubmitJob", "NOT_FOUND"),
        ("/spur.v1.Agent/StreamOutput", "OK"),
    ]
    assert all(secs >= 0 for _, _, secs in seen)


async def test_a_failing_observer_never_fails_the_call(nursery):
    def broken(method: str, code: str, secs: float) -> None:
        raise RuntimeError("observer bug")

    srv = await start_server(nursery, observer=broken)
    async with open_channel(srv.target) as channel:
        reply = await controller_stub(channel).SubmitJob(submit("#!/bin/sh\n"), timeout=10)
        assert reply.job_id == len("#!/bin/sh\n")
