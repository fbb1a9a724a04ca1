"""The Kubernetes operator with ``--tls-mode required`` against a controller in ``[tls] mode = "required"``:
it registers the nodes and follows SpurJobs over TLS, the controller launches the job's tasks on the
operator's virtual agent over mutual TLS, and the virtual agent refuses a plaintext client."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import trio

from integration.harness import wait_for
from integration.kubeapi.kubectl import KUBECTL
from integration.operator_harness import KubeBackend, operator_env, spurjob
from integration.test_tls import make_pki, tls_conf
from spur.auth.tokens import mint
from spur.rpc.channel import open_channel
from spur.rpc.proto import spur_pb2 as pb
from spur.rpc.status import RpcError, StatusCode
from spur.rpc.stub import agent_stub
from spur.rpc.tls import TlsSettings, user_client_tls

KEY = "operator-tls-test-key-0123456789abcdef"


def _signal(port: int, tls: object) -> StatusCode:
    async def call() -> StatusCode:
        async with open_channel(f"127.0.0.1:{port}", connect_timeout=2, tls=tls) as ch:  # type: ignore[arg-type]
            try:
                await agent_stub(ch).SignalJob(pb.SignalJobRequest(job_id=424242), timeout=5)
            except RpcError as exc:
                return exc.code
        return StatusCode.OK

    return trio.run(call)


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")
def test_operator_over_tls_runs_a_spurjob(tmp_path: Path, kube_backend: KubeBackend) -> None:
    pki = make_pki(tmp_path)
    key_file = tmp_path / "jwt.key"
    key_file.write_text(KEY)
    key_file.chmod(0o600)
    conf = f'[auth]\nmode = "required"\njwt_key_file = "{key_file}"\n' + tls_conf(pki)
    with operator_env(tmp_path, kube_backend, conf_extra=conf) as env:
        env.cluster.tls = user_client_tls(TlsSettings(mode="required", ca_file=pki / "ca.crt"))
        admin = mint(KEY.encode(), "root", 0, now=time.time(), ttl_secs=600, admin=True)
        env.cluster.metadata = {"authorization": f"Bearer {admin}"}
        env.start_operator(
            "--auth-mode", "required", "--tls-mode", "required", "--tls-cert", str(pki / "node.crt"),
            "--tls-key", str(pki / "node.key"), "--tls-ca", str(pki / "ca.crt"),
            env={"SPUR_JWT_KEY": KEY},
        )  # fmt: skip
        env.wait_nodes("gpu-node-1", "gpu-node-2")
        env.apply(spurjob("encrypted", ["#SBATCH -N 2", "true"]))
        job_id = wait_for(lambda: env.spurjob("encrypted").get("status", {}).get("jobId"), timeout=30)
        env.set_phase(env.wait_pods(job_id, 2), "Succeeded")  # launched over TLS by the controller
        env.wait_state("encrypted", "COMPLETED")
        # The virtual agent: TLS only; a client that verifies it with the CA gets to authentication.
        assert _signal(env.agent_port, None) is StatusCode.UNAVAILABLE
        user = user_client_tls(TlsSettings(mode="required", ca_file=pki / "ca.crt"))
        assert _signal(env.agent_port, user) is StatusCode.UNAUTHENTICATED
        assert env.operator is not None and env.operator.alive()
