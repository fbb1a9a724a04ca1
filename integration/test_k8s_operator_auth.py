"""Who may call the operator's virtual-agent surface (--listen), per --auth-mode, exactly as
docs/kubernetes.md states; and a cluster in required mode running a SpurJob end to end."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
import trio

from integration.harness import BIN, free_port, wait_for
from integration.k8s_harness import kubeapi_process
from integration.kubeapi.kubectl import KUBECTL
from integration.operator_harness import KubeBackend, operator_env, spurjob
from spur.auth.tokens import mint
from spur.rpc.channel import open_channel
from spur.rpc.proto import spur_pb2 as pb
from spur.rpc.status import RpcError, StatusCode
from spur.rpc.stub import agent_stub

KEY = "operator-test-key-0123456789abcdef"


def _token(*, admin: bool, key: str = KEY, user: str | None = None) -> str:
    """``admin``: the controller's credential (audience controller: what spurctld sends an agent);
    else a user's token (alice, with her gid)."""
    if admin:
        return mint(key.encode(), user or "spurctld", 0, now=time.time(), ttl_secs=300, audience="controller")
    return mint(key.encode(), user or "alice", 1000, now=time.time(), ttl_secs=300, gid=1000)


def _signal(port: int, token: str | None) -> StatusCode:
    """SignalJob for a job the operator does not have: NOT_FOUND means the call got through."""

    async def call() -> StatusCode:
        md = {"authorization": f"Bearer {token}"} if token else {}
        async with open_channel(f"127.0.0.1:{port}", connect_timeout=2) as ch:
            try:
                await agent_stub(ch).SignalJob(pb.SignalJobRequest(job_id=424242), timeout=5, metadata=md)
            except RpcError as exc:
                return exc.code
        return StatusCode.OK

    return trio.run(call)


def _operator(
    tmp: Path, url: str, *args: str, env: dict[str, str] | None = None
) -> tuple[subprocess.Popen, int]:
    port = free_port()
    log = open(tmp / f"operator-{port}.log", "wb")
    proc = subprocess.Popen(
        [
            str(BIN / "spur-k8s-operator"),
            "--controller",
            f"127.0.0.1:{free_port()}",
            "--kube-api",
            url,
            "--listen",
            f"127.0.0.1:{port}",
            "--address",
            f"127.0.0.1:{port}",
            "--connect-timeout",
            "1",
            *args,
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
    )
    log.close()
    return proc, port


def _up(proc: subprocess.Popen, port: int, tmp: Path) -> None:
    import socket

    def listening() -> bool:
        assert proc.poll() is None, (tmp / f"operator-{port}.log").read_text()
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", port)) == 0

    wait_for(listening, timeout=20, what="the virtual agent to listen")


MATRIX = [
    # mode, key?, presented credential -> expected outcome
    ("disabled", False, None, StatusCode.NOT_FOUND),
    ("disabled", False, "garbage", StatusCode.NOT_FOUND),
    ("permissive", True, None, StatusCode.NOT_FOUND),
    ("permissive", True, "admin", StatusCode.NOT_FOUND),
    ("permissive", True, "forged", StatusCode.UNAUTHENTICATED),
    ("permissive", False, None, StatusCode.NOT_FOUND),
    ("permissive", False, "admin", StatusCode.UNAUTHENTICATED),
    ("required", True, None, StatusCode.UNAUTHENTICATED),
    ("required", True, "user", StatusCode.PERMISSION_DENIED),
    ("required", True, "forged", StatusCode.UNAUTHENTICATED),
    ("required", True, "admin", StatusCode.NOT_FOUND),
]


def test_virtual_agent_auth_modes(tmp_path: Path) -> None:
    tokens = {
        None: None,
        "garbage": "not-a-jwt",
        "admin": _token(admin=True),
        "user": _token(admin=False),
        "forged": _token(admin=True, key="some-other-key-0123456789abcdefghij"),
    }
    with kubeapi_process(tmp_path) as url:
        procs = {}
        try:
            for mode, with_key in {(m, k) for m, k, _, _ in MATRIX}:
                args = ["--auth-mode", mode] + (["--jwt-key", KEY] if with_key else [])
                procs[(mode, with_key)] = _operator(tmp_path, url, *args)
            for proc, port in procs.values():
                _up(proc, port, tmp_path)
            outcomes = [
                (mode, with_key, cred, _signal(procs[(mode, with_key)][1], tokens[cred]))
                for mode, with_key, cred, _ in MATRIX
            ]
            assert outcomes == [(m, k, c, want) for m, k, c, want in MATRIX]
            log = (tmp_path / f"operator-{procs[('permissive', True)][1]}.log").read_text()
            assert "unauthenticated call to /spur.v1.Agent/SignalJob" in log
            for _proc, port in procs.values():
                text = (tmp_path / f"operator-{port}.log").read_text()
                assert KEY not in text and tokens["admin"] not in text
        finally:
            for proc, _port in procs.values():
                proc.kill()
                proc.wait()


def test_required_mode_without_a_key_refuses_to_start(tmp_path: Path) -> None:
    with kubeapi_process(tmp_path) as url:
        proc = subprocess.run(
            [str(BIN / "spur-k8s-operator"), "--auth-mode", "required", "--kube-api", url],
            capture_output=True,
            text=True,
            timeout=30,
            env={"PATH": "/usr/bin:/bin"},
        )
    assert proc.returncode == 78
    assert "--auth-mode required needs a key: pass --jwt-key or set SPUR_JWT_KEY" in proc.stderr


def test_the_key_can_come_from_the_environment(tmp_path: Path) -> None:
    import os

    with kubeapi_process(tmp_path) as url:
        proc, port = _operator(
            tmp_path, url, "--auth-mode", "required", env={**os.environ, "SPUR_JWT_KEY": KEY}
        )
        try:
            _up(proc, port, tmp_path)
            assert _signal(port, None) is StatusCode.UNAUTHENTICATED
            assert _signal(port, _token(admin=True)) is StatusCode.NOT_FOUND
        finally:
            proc.kill()
            proc.wait()


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")
def test_a_required_mode_cluster_runs_a_spurjob(tmp_path: Path, kube_backend: KubeBackend) -> None:
    key_file = tmp_path / "jwt.key"
    key_file.write_text(KEY)
    key_file.chmod(0o600)
    conf = f'[auth]\nmode = "required"\njwt_key_file = "{key_file}"\n'
    with operator_env(tmp_path, kube_backend, conf_extra=conf) as env:
        root = mint(KEY.encode(), "root", 0, now=time.time(), ttl_secs=600, admin=True, gid=0)
        env.cluster.metadata = {"authorization": f"Bearer {root}"}
        env.start_operator("--auth-mode", "required", env={"SPUR_JWT_KEY": KEY})
        env.wait_nodes("gpu-node-1", "gpu-node-2")
        env.apply(spurjob("secure", ["#SBATCH -N 2", "true"]))
        job_id = wait_for(lambda: env.spurjob("secure").get("status", {}).get("jobId"), timeout=30)
        env.set_phase(env.wait_pods(job_id, 2), "Succeeded")
        env.wait_state("secure", "COMPLETED")
        job = env.cluster.job(job_id)
        assert job.user == env.namespace  # the namespace-to-user rule, proven by a token the operator minted
        assert KEY not in env.operator.log()
