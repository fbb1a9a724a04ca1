"""Three real controllers in one Raft group with ``[tls] mode = "required"``: Raft runs over mutual TLS
(each member presents its node certificate), followers forward to the leader over TLS, and the Raft
port lets nothing through from a client without a certificate of the cluster CA."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from integration.ha_harness import HACluster
from integration.harness import wait_for
from integration.test_tls import make_pki, tls_conf
from spur.raft.transport import RAFT_SERVICE
from spur.rpc.certs import ensure_ca, issue
from spur.rpc.channel import open_channel
from spur.rpc.proto import raft_pb2
from spur.rpc.proto import spur_pb2 as pb
from spur.rpc.status import RpcError, StatusCode
from spur.rpc.stub import Stub
from spur.rpc.tls import ClientTLS, TlsContexts, TlsSettings, user_client_tls


@pytest.fixture
def ha(tmp_path: Path) -> Iterator[HACluster]:
    pki = make_pki(tmp_path)
    c = HACluster(tmp_path, conf_extra=tls_conf(pki))
    c.tls = user_client_tls(TlsSettings(mode="required", ca_file=pki / "ca.crt"))
    try:
        c.start()
        yield c
    finally:
        c.stop()


def raft_call(address: str, tls: ClientTLS | None) -> raft_pb2.RequestVoteResponse:
    """A pre-vote (changes nothing) straight to a member's Raft port."""

    async def run() -> raft_pb2.RequestVoteResponse:
        async with open_channel(address, tls=tls, connect_timeout=3) as ch:
            request = raft_pb2.RequestVoteRequest(term=1, candidate_id=2, pre_vote=True)
            return await Stub(ch, RAFT_SERVICE).RequestVote(request, timeout=5)

    return trio.run(run)


def test_raft_over_mutual_tls(ha: HACluster, tmp_path: Path) -> None:
    pki = tmp_path / "pki"
    leader = ha.wait_leader()
    follower = next(m.node_id for m in ha.members if m.node_id != leader)
    # A submission through a follower is forwarded to the leader and replicated to all three.
    job = ha.call_member(
        follower,
        "SubmitJob",
        pb.SubmitJobRequest(spec=pb.JobSpec(script="#!/bin/sh\ntrue\n", work_dir=str(tmp_path))),
    )
    assert job.job_id > 0
    wait_for(
        lambda: len({s.commit_index for s in ha.statuses().values()}) == 1 and len(ha.statuses()) == 3,
        timeout=20,
        what="the three members to agree",
    )
    term = ha.status(leader).term
    raft_address = f"127.0.0.1:{ha.member(leader).raft_port}"

    member = TlsContexts(
        TlsSettings(
            mode="required", cert_file=pki / "node.crt", key_file=pki / "node.key", ca_file=pki / "ca.crt"
        )
    ).client()
    # A certificate of the cluster CA gets past TLS to the Raft service: an answer, or (once Raft calls
    # need a controller credential too) a refusal from the service itself, never a transport failure.
    try:
        assert raft_call(raft_address, member).term >= term
    except RpcError as exc:
        assert exc.code is not StatusCode.UNAVAILABLE, exc

    other = tmp_path / "other"
    ensure_ca(other, cluster_name="other")
    issue(other, "intruder", dns=["localhost"], ips=["127.0.0.1"])
    intruder = TlsContexts(
        TlsSettings(
            mode="required",
            cert_file=other / "intruder.crt",
            key_file=other / "intruder.key",
            ca_file=pki / "ca.crt",
        )
    ).client()
    user = user_client_tls(TlsSettings(mode="required", ca_file=pki / "ca.crt"))
    for stranger in (None, user, intruder):  # plaintext; no certificate; another CA's certificate
        with pytest.raises(RpcError) as refused:
            raft_call(raft_address, stranger)
        assert refused.value.code is StatusCode.UNAVAILABLE
    # Nothing changed: same leader and term, and the group keeps serving.
    assert ha.wait_leader() == leader and ha.status(leader).term == term
    assert ha.call("GetJobs", pb.GetJobsRequest(job_ids=[job.job_id])).jobs[0].job_id == job.job_id
