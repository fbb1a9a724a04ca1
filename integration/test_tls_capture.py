"""A loopback capture (tcpdump on lo, filtered on the test's ports) of real traffic: credentials never
cross the wire in clear with ``[tls] mode = "required"``, and they do without TLS (so the test can fail).

The capture covers spurd registering and heartbeating (its daemon credential), the controller launching
a job on spurd (the controller's daemon credential), the CLI's sbatch and squeue with a user token
(``SLURM_JWT``) and a REST call with ``X-SLURM-USER-TOKEN``. A credential counts as seen if its bytes
appear raw or HPACK-Huffman-encoded (the Trio channel's h2 encodes header values that way).
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from hpack.huffman import HuffmanEncoder
from hpack.huffman_constants import REQUEST_CODES, REQUEST_CODES_LENGTH

from integration.harness import BIN, Cluster, free_port, wait_for
from integration.test_tls import KEY, make_pki, tls_conf
from spur.auth.tokens import mint
from spur.rpc.tls import TlsSettings, user_client_tls

pytestmark = pytest.mark.skipif(
    shutil.which("tcpdump") is None, reason="needs tcpdump (scripts/setup.sh installs it as root)"
)
_HUFFMAN = HuffmanEncoder(REQUEST_CODES, REQUEST_CODES_LENGTH)


def huffman_prefix(text: bytes) -> bytes:
    """The bytes every Huffman-encoded header value starting with ``text`` starts with."""
    return _HUFFMAN.encode(text)[:-1]


def leaked(capture: bytes, user_token: str) -> list[str]:
    """Which credential patterns appear in ``capture``."""
    patterns = {
        "user token": user_token.encode(),
        "user token (huffman)": huffman_prefix(f"Bearer {user_token}".encode()),
        "Bearer": b"Bearer",
        "Bearer (huffman)": huffman_prefix(b"Bearer eyJ"),
        "JWT header eyJhbGci": b"eyJhbGci",
        "JWT header (huffman)": huffman_prefix(b"eyJhbGci"),
    }
    found = [name for name, pattern in patterns.items() if pattern in capture]
    # Any other bearer credential is a daemon's (Trio channels send header values as HPACK
    # literals, not Huffman-coded, since spur.rpc.hpack_codec.Encoder).
    user = user_token.encode()
    if any(not capture.startswith(user, at.end()) for at in re.finditer(rb"Bearer ", capture)):
        found.append("daemon credential")
    return found


class Capture:
    def __init__(self, path: Path, ports: list[int]) -> None:
        self.path = path
        bpf = " or ".join(f"tcp port {p}" for p in ports)
        self.proc = subprocess.Popen(
            ["tcpdump", "-i", "lo", "--immediate-mode", "-U", "-n", "-s", "0", "-w", str(path), bpf],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )  # fmt: skip
        assert self.proc.stderr is not None
        line = self.proc.stderr.readline().decode(errors="replace")  # "listening on lo, ..."
        if "listening" not in line:
            self.proc.kill()
            pytest.fail(f"tcpdump did not start: {line}")

    def stop(self) -> bytes:
        # Let tcpdump write out what it has seen: stop once the file has not grown for half a second.
        last = (-1, time.monotonic())

        def settled() -> bool:
            nonlocal last
            size = self.path.stat().st_size if self.path.exists() else 0
            if size != last[0]:
                last = (size, time.monotonic())
            return time.monotonic() - last[1] >= 0.5

        wait_for(settled, timeout=20, interval=0.1, what="the capture to settle")
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(timeout=20)
        return self.path.read_bytes()


def run_leg(root: Path, tls: bool) -> tuple[bytes, str]:
    """A cluster in auth required (and tls required when ``tls``); returns the capture and the user token."""
    root.mkdir()
    pki = make_pki(root)
    key = root / "jwt.key"
    key.write_bytes(KEY)
    key.chmod(0o600)
    c = Cluster(
        root,
        conf_extra=f'[auth]\nmode = "required"\njwt_key_file = "{key}"\n' + (tls_conf(pki) if tls else ""),
        agent_conf=True,
    )
    if tls:
        c.tls = user_client_tls(TlsSettings(mode="required", ca_file=pki / "ca.crt"))
    c.metadata = {
        "authorization": f"Bearer {mint(KEY, 'root', 0, now=time.time(), ttl_secs=600, admin=True)}"
    }
    user_token = mint(KEY, "root", 0, now=time.time(), ttl_secs=600)
    user_conf = root / "user.conf"
    user_conf.write_text(f'[tls]\nmode = "required"\nca_file = "{pki / "ca.crt"}"\n' if tls else "")
    agent_port = c.agent_ports.setdefault("n1", free_port())
    capture = Capture(root / "lo.pcap", [c.port, c.rest_port, agent_port])
    try:
        c.start_controller()
        c.wait_rest()
        c.start_agent("n1")
        c.wait_nodes("n1")
        env = {**c.env, "SPUR_CONF": str(user_conf), "SLURM_JWT": user_token}
        env.pop("SPUR_AUTH_SOCKET", None)
        out = subprocess.run(
            [str(BIN / "sbatch"), "--wrap", "true"],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 0, out.stderr
        job_id = int(out.stdout.split()[-1])
        c.wait_job(job_id, "COMPLETED")
        out = subprocess.run(
            [str(BIN / "squeue")], cwd=root, env=env, capture_output=True, text=True, timeout=60
        )
        assert out.returncode == 0, out.stderr
        scheme = "https" if tls else "http"
        request = urllib.request.Request(
            f"{scheme}://localhost:{c.rest_port}/slurm/v0.0.38/jobs",
            headers={"X-SLURM-USER-NAME": "root", "X-SLURM-USER-TOKEN": user_token},
        )
        import ssl

        ctx = ssl.create_default_context(cafile=str(pki / "ca.crt")) if tls else None
        with urllib.request.urlopen(request, timeout=10, context=ctx) as resp:
            assert resp.status == 200
    finally:
        data = capture.stop()
        c.stop()
    return data, user_token


def test_no_credential_bytes_on_the_wire_with_tls(tmp_path: Path) -> None:
    plain, plain_token = run_leg(tmp_path / "plain", tls=False)
    found = leaked(plain, plain_token)
    # Without TLS the capture shows them (the test would notice a leak).
    # The user's token (REST header, CLI), the daemons' credentials (Trio channels).
    assert {"user token", "Bearer", "daemon credential", "JWT header eyJhbGci"} <= set(found), found

    encrypted, token = run_leg(tmp_path / "tls", tls=True)
    assert len(encrypted) > 4096
    assert leaked(encrypted, token) == []
    assert b"\x16\x03" in encrypted  # TLS records were captured, not an empty file
