"""TLS required on every port of a real spurctld + spurd, with the CLI and REST as users see them.

The cluster runs ``[auth] mode = "required"`` and ``[tls] mode = "required"`` with certificates from
``spur cert``: spurd registers and runs jobs over mutual TLS, the CLI (sbatch, squeue, scontrol)
verifies the controller with the CA, REST answers over https, and a plaintext client gets nothing.
Rotated certificates are picked up by SIGHUP and ``scontrol reconfigure`` for new connections, and a
broken new key is reported while the old certificate stays in use.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509

from integration.harness import BIN, Cluster, wait_for
from spur.auth.tokens import mint
from spur.rpc.status import RpcError, StatusCode
from spur.rpc.tls import TlsSettings, user_client_tls
from spur.startup import EXIT_CONFIG

KEY = b"tls-integration-cluster-key-0123456789abcdef"


def tls_conf(pki: Path, mode: str = "required") -> str:
    return (
        "[tls]\n"
        f'mode = "{mode}"\n'
        f'cert_file = "{pki / "node.crt"}"\n'
        f'key_file = "{pki / "node.key"}"\n'
        f'ca_file = "{pki / "ca.crt"}"\n'
    )


def make_pki(root: Path) -> Path:
    """``spur cert init`` + ``spur cert issue node`` as a user would run them."""
    pki = root / "pki"
    out = subprocess.run(
        [str(BIN / "spur"), "cert", "init", "--dir", str(pki), "--name", "head"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert "[tls]" in out.stdout and f'ca_file = "{pki / "ca.crt"}"' in out.stdout
    subprocess.run(
        [str(BIN / "spur"), "cert", "issue", "node", "--dns", "localhost", "--ip", "127.0.0.1", "--dir", str(pki)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return pki


@pytest.fixture
def tls_cluster(tmp_path: Path) -> Iterator[Cluster]:
    pki = make_pki(tmp_path)
    key = tmp_path / "jwt.key"
    key.write_bytes(KEY)
    key.chmod(0o600)
    c = Cluster(
        tmp_path,
        conf_extra=f'[auth]\nmode = "required"\njwt_key_file = "{key}"\n' + tls_conf(pki),
        agent_conf=True,
    )
    c.tls = user_client_tls(TlsSettings(mode="required", ca_file=pki / "ca.crt"))
    token = mint(KEY, "root", 0, now=time.time(), ttl_secs=3600, admin=True)
    c.metadata = {"authorization": f"Bearer {token}"}
    # What a user's machine has: the CA and the two [tls] lines.
    (tmp_path / "user.conf").write_text(f'[tls]\nmode = "required"\nca_file = "{pki / "ca.crt"}"\n')
    try:
        c.start_controller()
        c.wait_rest()
        c.start_agent("n1")
        c.wait_nodes("n1")
        yield c
    finally:
        c.stop()


def user_env(c: Cluster, conf: Path | None) -> dict[str, str]:
    env = c.env
    if conf is not None:
        env["SPUR_CONF"] = str(conf)
    return env


def cli(c: Cluster, *args: str, conf: Path | None, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / args[0]), *args[1:]],
        cwd=c.root, env={**user_env(c, conf), **env}, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def served_serial(port: int) -> int:
    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost") as s:
            der = s.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number


def serial_of(path: Path) -> int:
    return x509.load_pem_x509_certificate(path.read_bytes()).serial_number


def rest_get(c: Cluster, path: str, ca: Path | None, scheme: str = "https") -> tuple[int, dict]:
    token = mint(KEY, "root", 0, now=time.time(), ttl_secs=600)
    req = urllib.request.Request(
        f"{scheme}://localhost:{c.rest_port}{path}",
        headers={"X-SLURM-USER-NAME": "root", "X-SLURM-USER-TOKEN": token},
    )
    ctx = ssl.create_default_context(cafile=str(ca)) if ca else None
    try:
        with urllib.request.urlopen(req, timeout=10, context=ctx) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def test_cli_rest_and_agents_over_tls_and_plaintext_refused(tls_cluster: Cluster) -> None:
    c = tls_cluster
    pki, user_conf = c.root / "pki", c.root / "user.conf"
    # The CLI with the CA: sbatch, squeue; the job runs on n1 (controller -> spurd over mutual TLS).
    out = cli(c, "sbatch", "--wrap", "echo over-tls", conf=user_conf)
    assert out.returncode == 0, out.stderr
    job_id = int(out.stdout.split()[-1])
    listed = cli(c, "squeue", "-h", "-o", "%i", "-t", "all", conf=user_conf)
    assert listed.returncode == 0 and str(job_id) in listed.stdout, listed
    c.wait_job(job_id, "COMPLETED")
    assert "over-tls" in next(c.root.glob(f"*-{job_id}.out")).read_text()

    # REST over https, verified with the CA.
    status, body = rest_get(c, "/slurm/v0.0.38/jobs", pki / "ca.crt")
    assert status == 200 and job_id in [j["job_id"] for j in body["jobs"]]

    # sattach follows a running job's output over wss:// (the REST WebSocket), verified with the CA.
    out = cli(c, "sbatch", "--wrap", "echo attached-over-tls; sleep 2", conf=user_conf)
    attached_job = int(out.stdout.split()[-1])
    c.wait_job(attached_job, "RUNNING")
    token = mint(KEY, "root", 0, now=time.time(), ttl_secs=600)
    att = cli(
        c, "sattach", str(attached_job), conf=user_conf,
        SPUR_REST_URL=f"https://127.0.0.1:{c.rest_port}", SLURM_JWT=token,
    )  # fmt: skip
    assert att.returncode == 0 and "attached-over-tls" in att.stdout, att

    # Plaintext clients get nothing useful: the CLI without [tls], a raw gRPC client, plain http.
    plain = cli(c, "squeue", "-h", conf=None)
    assert plain.returncode != 0 and "Unable to contact slurm controller" in plain.stderr
    saved, c.tls = c.tls, None
    with pytest.raises(RpcError) as refused:
        c.nodes()
    assert refused.value.code is StatusCode.UNAVAILABLE
    c.tls = saved
    with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
        rest_get(c, "/slurm/v0.0.38/jobs", None, scheme="http")
    # A client trusting another CA refuses the controller (it verifies the server).
    other = c.root / "other"
    subprocess.run(
        [str(BIN / "spur"), "cert", "init", "--dir", str(other), "--name", "x"],
        check=True,
        capture_output=True,
    )
    (c.root / "wrong.conf").write_text(f'[tls]\nmode = "required"\nca_file = "{other / "ca.crt"}"\n')
    wrong = cli(c, "squeue", "-h", conf=c.root / "wrong.conf")
    assert wrong.returncode != 0 and "certificate verify failed" in wrong.stderr
    # The cluster kept serving.
    assert {n.name for n in c.nodes()} == {"n1"}


def test_rotation_by_sighup_and_reconfigure(tls_cluster: Cluster) -> None:
    c = tls_cluster
    pki, user_conf = c.root / "pki", c.root / "user.conf"
    assert c.controller is not None
    first = serial_of(pki / "node.crt")
    assert served_serial(c.port) == first
    agent_port = c.agent_ports["n1"]
    assert served_serial(agent_port) == first

    def rotate() -> int:
        subprocess.run(
            [str(BIN / "spur"), "cert", "issue", "node", "--dns", "localhost", "--ip", "127.0.0.1",
             "--dir", str(pki), "--force"],
            check=True, capture_output=True,
        )  # fmt: skip
        return serial_of(pki / "node.crt")

    second = rotate()
    assert served_serial(c.port) == first  # nothing re-read yet
    c.controller.kill(signal.SIGHUP)
    c.agents["n1"].kill(signal.SIGHUP)
    wait_for(lambda: served_serial(c.port) == second, timeout=10, what="spurctld to serve the new cert")
    wait_for(lambda: served_serial(agent_port) == second, timeout=10, what="spurd to serve the new cert")
    wait_for(lambda: served_serial(c.rest_port) == second, timeout=10, what="REST to serve the new cert")

    third = rotate()
    out = cli(c, "scontrol", "reconfigure", conf=user_conf)
    assert out.returncode == 0, out.stderr
    assert served_serial(c.port) == third

    # A broken new key: reconfigure says so in one line and the certificate in use stays.
    (pki / "node.key").write_text("not a key\n")
    out = cli(c, "scontrol", "reconfigure", conf=user_conf)
    assert "tls.key_file" in out.stdout + out.stderr, out
    assert served_serial(c.port) == third
    # New connections still work (the old context), and so does everything else.
    assert cli(c, "squeue", "-h", conf=user_conf).returncode == 0
    assert c.controller.alive() and c.agents["n1"].alive()


def test_daemons_refuse_unusable_tls_files(tmp_path: Path) -> None:
    pki = make_pki(tmp_path)
    os.chmod(pki / "node.key", 0o644)
    conf = tmp_path / "spur.conf"
    conf.write_text(tls_conf(pki))
    for argv in (
        [str(BIN / "spurctld"), "-f", str(conf), "--state-dir", str(tmp_path / "ctl")],
        [str(BIN / "spurd"), "-f", str(conf), "--state-dir", str(tmp_path / "agent")],
    ):
        out = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        assert out.returncode == EXIT_CONFIG, out
        assert f"tls.key_file {pki / 'node.key'} is readable by group/other (mode 0644)" in out.stderr


def test_init_tls_flag_of_spurctld(tmp_path: Path) -> None:
    out = subprocess.run(
        [str(BIN / "spurctld"), "--init-tls", str(tmp_path / "pki")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert "wrote cluster CA" in out.stdout and 'mode = "required"' in out.stdout
    assert (tmp_path / "pki" / "ca.key").stat().st_mode & 0o777 == 0o600
    again = subprocess.run(
        [str(BIN / "spurctld"), "--init-tls", str(tmp_path / "pki")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert again.returncode == 0 and "kept existing cluster CA" in again.stdout
