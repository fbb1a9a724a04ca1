"""spur.rpc.tls: contexts from [tls] files and their errors, TLS on Server/open_channel/BlockingChannel,
optional-mode sniffing, mutual TLS on the peer (Raft) port, hot reload, session resumption, spur cert."""

from __future__ import annotations

import os
import ssl
from functools import partial
from pathlib import Path

import pytest
import trio
from cryptography import x509

from spur.rpc.blocking import BlockingChannel
from spur.rpc.certs import CertError, ensure_ca, issue
from spur.rpc.channel import open_channel
from spur.rpc.proto import spur_pb2 as pb
from spur.rpc.server import CallContext, Server
from spur.rpc.status import RpcError, StatusCode
from spur.rpc.tls import (
    ClientTLS,
    TlsConfigError,
    TlsContexts,
    TlsSettings,
    client_context,
    user_client_tls,
)

SUBMIT = "/spur.v1.Controller/SubmitJob"
CONTROLLER = pb.DESCRIPTOR.services_by_name["Controller"]


class _Controller:
    async def SubmitJob(self, request: pb.SubmitJobRequest, context: CallContext) -> pb.SubmitJobResponse:
        return pb.SubmitJobResponse(job_id=len(request.spec.script))


@pytest.fixture
def pki(tmp_path: Path) -> Path:
    """A cluster CA with certificates ``server`` and ``node2`` (localhost, 127.0.0.1) in tmp_path/pki,
    and a foreign CA with ``intruder`` in tmp_path/other."""
    d = tmp_path / "pki"
    ensure_ca(d, cluster_name="test")
    for name in ("server", "node2"):
        issue(d, name, dns=["localhost"], ips=["127.0.0.1"])
    other = tmp_path / "other"
    ensure_ca(other, cluster_name="other")
    issue(other, "intruder", dns=["localhost"], ips=["127.0.0.1"])
    return d


def settings(d: Path, name: str = "server", mode: str = "required", ca: Path | None = None) -> TlsSettings:
    return TlsSettings(
        mode=mode, cert_file=d / f"{name}.crt", key_file=d / f"{name}.key", ca_file=ca or d / "ca.crt"
    )


def submit() -> pb.SubmitJobRequest:
    return pb.SubmitJobRequest(spec=pb.JobSpec(script="abc"))


async def start(nursery: trio.Nursery, tls: object, **kw: object) -> int:
    server = Server()
    server.add_service(CONTROLLER, _Controller())
    return await nursery.start(partial(server.serve, tls=tls), "127.0.0.1", 0)


async def call(port: int, tls: ClientTLS | None) -> int:
    async with open_channel(f"127.0.0.1:{port}", tls=tls, connect_timeout=3) as ch:
        resp = await ch.unary(SUBMIT, submit(), pb.SubmitJobResponse, timeout=5)
        return resp.job_id


def blocking_call(port: int, tls: ClientTLS | None) -> int:
    with BlockingChannel(f"127.0.0.1:{port}", tls=tls, connect_timeout=3) as ch:
        return ch.unary(SUBMIT, submit(), pb.SubmitJobResponse, timeout=5).job_id


def served_serial(port: int) -> int:
    """The serial of the certificate the server presents on a new connection."""
    import socket

    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost") as s:
            der = s.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number


def serial_of(path: Path) -> int:
    return x509.load_pem_x509_certificate(path.read_bytes()).serial_number


# ---------------------------------------------------------------------- configuration errors


def test_off_reads_nothing(tmp_path: Path) -> None:
    tls = TlsContexts(TlsSettings(mode="off", cert_file=tmp_path / "missing.crt"))
    assert tls.server() is None and tls.client() is None and tls.reload() is None


def test_errors_name_the_key_and_file(pki: Path, tmp_path: Path) -> None:
    missing = settings(pki)
    missing = TlsSettings(
        mode="required", cert_file=tmp_path / "nope.crt", key_file=missing.key_file, ca_file=missing.ca_file
    )
    with pytest.raises(TlsConfigError, match=r"tls.cert_file .*nope.crt: cannot read it: No such file"):
        TlsContexts(missing)

    os.chmod(pki / "server.key", 0o640)
    with pytest.raises(
        TlsConfigError,
        match=r"tls.key_file .*server.key is readable by group/other \(mode 0640\): run chmod 600",
    ):
        TlsContexts(settings(pki))
    os.chmod(pki / "server.key", 0o600)

    mismatch = TlsSettings(
        mode="required", cert_file=pki / "server.crt", key_file=pki / "node2.key", ca_file=pki / "ca.crt"
    )
    with pytest.raises(
        TlsConfigError, match=r"tls.key_file .*node2.key does not match tls.cert_file .*server.crt"
    ):
        TlsContexts(mismatch)

    with pytest.raises(TlsConfigError, match=r"tls.ca_file .*absent.crt: cannot read it"):
        TlsContexts(settings(pki, ca=tmp_path / "absent.crt"))
    garbage = tmp_path / "garbage.crt"
    garbage.write_text("not a certificate\n")
    with pytest.raises(TlsConfigError, match=r"tls.ca_file .*garbage.crt: holds no PEM certificate"):
        TlsContexts(settings(pki, ca=garbage))

    with pytest.raises(TlsConfigError, match=r'tls.mode = "required" needs tls.cert_file, which is not set'):
        TlsContexts(TlsSettings(mode="required", ca_file=pki / "ca.crt"))
    with pytest.raises(TlsConfigError, match=r"needs tls.ca_file"):
        user_client_tls(TlsSettings(mode="required"))
    assert user_client_tls(TlsSettings(mode="optional")) is None


def test_config_section_is_validated(tmp_path: Path) -> None:
    from spur.config import ConfigError, load_config

    conf = tmp_path / "spur.conf"
    conf.write_text('[tls]\nmode = "sometimes"\n')
    with pytest.raises(ConfigError, match="tls.mode"):
        load_config(conf)
    conf.write_text('[tls]\nmode = "required"\ncert_file = "/x.crt"\n')
    with pytest.raises(ConfigError, match="key_file"):
        load_config(conf)
    conf.write_text(
        '[tls]\nmode = "required"\ncert_file = "/x.crt"\nkey_file = "/x.key"\nca_file = "/ca.crt"\n'
    )
    cfg = load_config(conf)
    assert cfg.tls.mode == "required" and cfg.tls.ca_file == Path("/ca.crt")
    from spur.config import SpurConfig

    assert SpurConfig().tls.mode == "off"


# ---------------------------------------------------------------------- spur cert


def test_cert_files_modes_and_refusal(pki: Path) -> None:
    assert (pki / "ca.key").stat().st_mode & 0o777 == 0o600
    assert (pki / "server.key").stat().st_mode & 0o777 == 0o600
    cert = x509.load_pem_x509_certificate((pki / "server.crt").read_bytes())
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "localhost" in san.get_values_for_type(x509.DNSName)
    assert [str(a) for a in san.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert (cert.not_valid_after_utc - cert.not_valid_before_utc).days in (365, 366)
    before = serial_of(pki / "server.crt")
    with pytest.raises(CertError, match="already exists; pass --force"):
        issue(pki, "server")
    assert serial_of(pki / "server.crt") == before
    ca_serial = serial_of(pki / "ca.crt")
    assert not ensure_ca(pki).created and serial_of(pki / "ca.crt") == ca_serial


# ---------------------------------------------------------------------- connections


async def test_required_mode_serves_tls_and_refuses_plaintext(pki: Path) -> None:
    server_tls = TlsContexts(settings(pki))
    user = user_client_tls(TlsSettings(mode="required", ca_file=pki / "ca.crt"))
    async with trio.open_nursery() as nursery:
        port = await start(nursery, server_tls.server())
        assert await call(port, user) == 3
        assert await trio.to_thread.run_sync(blocking_call, port, user) == 3
        with pytest.raises(RpcError) as plain:
            await call(port, None)
        assert plain.value.code is StatusCode.UNAVAILABLE
        with pytest.raises(RpcError) as plain_blocking:
            await trio.to_thread.run_sync(blocking_call, port, None)
        assert plain_blocking.value.code is StatusCode.UNAVAILABLE
        # A client trusting another CA does not accept the server.
        foreign = user_client_tls(TlsSettings(mode="required", ca_file=pki.parent / "other" / "ca.crt"))
        with pytest.raises(RpcError, match="TLS handshake failed.*certificate verify failed"):
            await call(port, foreign)
        with pytest.raises(RpcError, match="TLS handshake failed: certificate verify failed"):
            await trio.to_thread.run_sync(blocking_call, port, foreign)
        nursery.cancel_scope.cancel()


async def test_optional_mode_accepts_both_on_one_port(pki: Path) -> None:
    server_tls = TlsContexts(settings(pki, mode="optional"))
    user = user_client_tls(TlsSettings(mode="required", ca_file=pki / "ca.crt"))
    async with trio.open_nursery() as nursery:
        port = await start(nursery, server_tls.server())
        assert await call(port, None) == 3
        assert await call(port, user) == 3
        assert await trio.to_thread.run_sync(blocking_call, port, None) == 3
        assert await trio.to_thread.run_sync(blocking_call, port, user) == 3
        nursery.cancel_scope.cancel()


async def test_peer_port_requires_a_cluster_certificate(pki: Path, tmp_path: Path) -> None:
    server_tls = TlsContexts(settings(pki))
    member = TlsContexts(settings(pki, "node2")).client()
    intruder = TlsContexts(settings(tmp_path / "other", "intruder", ca=pki / "ca.crt")).client()
    user = user_client_tls(TlsSettings(mode="required", ca_file=pki / "ca.crt"))
    async with trio.open_nursery() as nursery:
        port = await start(nursery, server_tls.server(peers_only=True))
        assert await call(port, member) == 3
        for stranger in (user, intruder):  # no certificate; one from another CA
            with pytest.raises(RpcError) as refused:
                await call(port, stranger)
            assert refused.value.code is StatusCode.UNAVAILABLE
        # The ordinary ports ask for a certificate but let a user without one in.
        port2 = await start(nursery, server_tls.server())
        assert await call(port2, user) == 3
        with pytest.raises(RpcError):
            await call(port2, intruder)  # a presented certificate must chain to the CA
        nursery.cancel_scope.cancel()


async def test_reload_rotates_for_new_connections_and_keeps_old_on_error(pki: Path) -> None:
    server_tls = TlsContexts(settings(pki))
    user = user_client_tls(TlsSettings(mode="required", ca_file=pki / "ca.crt"))
    async with trio.open_nursery() as nursery:
        port = await start(nursery, server_tls.server())
        first = serial_of(pki / "server.crt")
        assert await trio.to_thread.run_sync(served_serial, port) == first
        async with open_channel(f"127.0.0.1:{port}", tls=user) as kept:
            assert (await kept.unary(SUBMIT, submit(), pb.SubmitJobResponse, timeout=5)).job_id == 3
            issue(pki, "server", dns=["localhost"], ips=["127.0.0.1"], force=True)  # rotation, same CA
            second = serial_of(pki / "server.crt")
            assert second != first
            assert await trio.to_thread.run_sync(served_serial, port) == first  # not reloaded yet
            assert server_tls.reload() is None
            assert await trio.to_thread.run_sync(served_serial, port) == second
            assert await call(port, user) == 3
            # The connection made before the reload goes on.
            assert (await kept.unary(SUBMIT, submit(), pb.SubmitJobResponse, timeout=5)).job_id == 3
        # A broken new key: one line naming it, and the certificate in use stays.
        (pki / "server.key").write_text("garbage\n")
        error = server_tls.reload()
        assert error is not None and "tls.key_file" in error and "\n" not in error
        assert await trio.to_thread.run_sync(served_serial, port) == second
        assert await call(port, user) == 3
        nursery.cancel_scope.cancel()


async def test_reconnection_resumes_the_session(pki: Path) -> None:
    server_tls = TlsContexts(settings(pki))
    ctx = client_context(TlsSettings(mode="required", ca_file=pki / "ca.crt"), present_cert=False)
    user = ClientTLS(lambda: ctx)
    async with trio.open_nursery() as nursery:
        port = await start(nursery, server_tls.server())
        for _ in range(2):
            assert await call(port, user) == 3
        last = user._last[f"127.0.0.1:{port}"][1]
        assert last.session_reused
        nursery.cancel_scope.cancel()


async def test_plaintext_client_is_closed_quickly_in_required_mode(pki: Path) -> None:
    server_tls = TlsContexts(settings(pki))
    async with trio.open_nursery() as nursery:
        port = await start(nursery, server_tls.server())
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        await stream.send_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00" * 64)
        received = b""
        with trio.fail_after(5):
            while True:
                data = await stream.receive_some(4096)
                if not data:
                    break
                received += data
        assert received == b"" or received[0] == 0x15  # nothing, or a TLS alert: never an HTTP/2 frame
        await stream.aclose()
        nursery.cancel_scope.cancel()


async def test_optional_daemon_falls_back_to_plaintext_for_a_peer_without_tls(pki: Path) -> None:
    """Migration: a daemon at "optional" still reaches a peer at "off"; one at "required" does not."""
    optional = TlsContexts(settings(pki, "node2", mode="optional")).client()
    required = TlsContexts(settings(pki, "node2", mode="required")).client()
    assert optional is not None and optional.plaintext_fallback
    async with trio.open_nursery() as nursery:
        port = await start(nursery, None)  # a peer still at tls.mode = "off"
        assert await call(port, optional) == 3
        with pytest.raises(RpcError, match="TLS handshake failed"):
            await call(port, required)
        tls_port = await start(nursery, TlsContexts(settings(pki)).server())
        assert await call(tls_port, optional) == 3
        assert optional._last  # that one was TLS
        nursery.cancel_scope.cancel()


def test_cli_loads_ssl_only_when_tls_is_configured(pki: Path, tmp_path: Path) -> None:
    import subprocess
    import sys

    probe = "import sys, spur.cli.client as c; t = c.client_tls(); print(t is not None, 'ssl' in sys.modules)"
    off = tmp_path / "off.conf"
    off.write_text('[auth]\nmode = "required"\n')
    on = tmp_path / "on.conf"
    on.write_text(f'[tls]\nmode = "required"\nca_file = "{pki / "ca.crt"}"\n')
    for conf, expected in ((off, "False False"), (on, "True True")):
        out = subprocess.run(
            [sys.executable, "-c", probe], env={**os.environ, "SPUR_CONF": str(conf)},
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        assert out.stdout.strip() == expected, (conf, out)
