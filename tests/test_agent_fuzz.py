"""Hypothesis over what spurd's gRPC port receives: random and mutated request bytes for every Agent
method, from a caller holding a valid user token, against a real agent server (spur.rpc.server.Server on
loopback, ServerAuth in required mode, AgentServicer over a real Executor in a temporary directory).

Properties: every call ends with a gRPC status and never INTERNAL (nothing a caller sends reaches a
handler's crash path); nothing is launched (the controller's record says the only running job is
root's, so no step may start, and LaunchJob is the controller's); the server still answers afterwards.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_agent_executor import Harness

from spur.agent.service import AgentServicer
from spur.auth.guard import ServerAuth
from spur.auth.keys import AuthSettings
from spur.auth.tokens import mint
from spur.rpc.channel import open_channel
from spur.rpc.proto import spur_pb2 as pb
from spur.rpc.server import Server
from spur.rpc.status import RpcError, StatusCode

KEY = b"agent-fuzz-key-0123456789abcdef0123"
AGENT = pb.DESCRIPTOR.services_by_name["Agent"]
# What a valid request of each method looks like (mutated below), aimed at root's running job 7.
ROOT_JOB = pb.JobInfo(
    job_id=7,
    user="root",
    uid=0,
    gid=0,
    state="RUNNING",
    spec=pb.JobSpec(name="rootjob", work_dir="/"),
    allocation=[pb.NodeAllocation(node="n1", cpus=1, tasks=1)],
    steps=[pb.StepInfo(step_id=1, state="RUNNING", spec=pb.StepSpec(argv=["id"]))],
)
SEEDS: dict[str, bytes] = {
    "LaunchStep": pb.LaunchStepRequest(
        job=ROOT_JOB, step=pb.StepInfo(step_id=1, spec=pb.StepSpec(argv=["id", "-u"])), node="n1"
    ).SerializeToString(),
    "LaunchJob": pb.LaunchJobRequest(job=ROOT_JOB, batch=True).SerializeToString(),
    "SignalJob": pb.SignalJobRequest(job_id=7, signal=9).SerializeToString(),
    "StreamOutput": pb.StreamOutputRequest(job_id=7).SerializeToString(),
    "Status": b"",
}
RESPONSES = {
    "LaunchStep": pb.LaunchJobResponse,
    "LaunchJob": pb.LaunchJobResponse,
    "SignalJob": pb.Empty,
    "StreamOutput": pb.OutputChunk,
    "Status": pb.AgentStatus,
}


class _Raw:
    """Request bytes as they are, for Channel.unary (which only serializes its request)."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def SerializeToString(self) -> bytes:  # noqa: N802 (protobuf's name)
        return self.data


def _mutations(seed: bytes) -> st.SearchStrategy[bytes]:
    if not seed:
        return st.binary(max_size=64)
    flips = st.lists(st.tuples(st.integers(0, len(seed) - 1), st.integers(0, 255)), min_size=1, max_size=4)

    def flipped(changes: list[tuple[int, int]]) -> bytes:
        data = bytearray(seed)
        for position, byte in changes:
            data[position] = byte
        return bytes(data)

    return st.one_of(
        flips.map(flipped),
        st.integers(0, len(seed)).map(lambda n: seed[:n]),
        st.binary(max_size=256),
        st.binary(max_size=32).map(lambda tail: seed + tail),
    )


calls = st.sampled_from(sorted(SEEDS)).flatmap(lambda m: st.tuples(st.just(m), _mutations(SEEDS[m])))


async def _serve_and_call(state: Path, batch: list[tuple[str, bytes]]) -> list[StatusCode]:
    work = state / "work"
    work.mkdir(parents=True, exist_ok=True)
    harness = Harness(state / "agent", work)
    executor = harness.make()

    async def lookup_job(job_id: int) -> pb.JobInfo | None:
        return ROOT_JOB if job_id == 7 else None

    auth = ServerAuth(AuthSettings(mode="required", key=KEY), daemon_name="spurd", daemon_audience="agent")
    server = Server(authenticator=auth)
    server.add_service(AGENT, AgentServicer(executor, node_name="n1", lookup_job=lookup_job))
    token = mint(KEY, "mallory", 4242, now=time.time(), ttl_secs=300, gid=4242)
    codes: list[StatusCode] = []
    try:
        async with trio.open_nursery() as nursery:
            port = await nursery.start(server.serve, "127.0.0.1", 0)
            async with open_channel(
                f"127.0.0.1:{port}", metadata_provider=lambda: {"authorization": f"Bearer {token}"}
            ) as channel:
                for method, data in batch:
                    path = f"/{AGENT.full_name}/{method}"
                    try:
                        if method == "StreamOutput":
                            async for _ in channel.stream(path, _Raw(data), RESPONSES[method], timeout=5):  # type: ignore[arg-type]
                                pass
                        else:
                            await channel.unary(path, _Raw(data), RESPONSES[method], timeout=5)  # type: ignore[arg-type]
                        codes.append(StatusCode.OK)
                    except RpcError as err:
                        codes.append(err.code)
                alive = await channel.unary(
                    f"/{AGENT.full_name}/Status", pb.Empty(), pb.AgentStatus, timeout=5
                )
                assert alive.name == "n1" and not alive.jobs
            nursery.cancel_scope.cancel()
    finally:
        harness.kill_leftovers()
    assert not list(executor.jobs()), "a fuzzed request launched something"
    return codes


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(calls, min_size=1, max_size=12))
def test_hostile_agent_requests_end_with_a_status_and_launch_nothing(batch: list[tuple[str, bytes]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        codes = trio.run(_serve_and_call, Path(tmp), batch)
    assert len(codes) == len(batch)
    assert StatusCode.INTERNAL not in codes, list(zip(batch, codes, strict=True))
    for (method, _), code in zip(batch, codes, strict=True):
        if method in ("LaunchStep", "LaunchJob"):
            assert code is not StatusCode.OK, f"{method} from a user was accepted"
