"""Test hosts for Spur-managed k0s: real spurd processes on loopback, each with its own spur.conf
([cluster] enabled, every k0s/systemd path under its own directory) and its own systemd and k0s
test doubles (``integration/doubles``), so several "nodes" share one machine without sharing a unit,
a data dir or a join API port."""

from __future__ import annotations

import contextlib
import hashlib
import http.server
import json
import os
import platform
import shutil
import subprocess
import threading
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from integration.doubles import fake_systemd
from integration.harness import Cluster, Proc, free_port, spurd_argv, wait_for
from spur.k8s.cluster.install import arch_of

DOUBLES = Path(__file__).parent / "doubles"


def k0s_launcher(path: Path) -> Path:
    """Place an executable at ``path`` that runs the fake k0s (what an installed k0s would be)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'#!/bin/sh\nexec python3 {DOUBLES / "fake_k0s.py"} "$@"\n')
    path.chmod(0o755)
    return path


@dataclass
class K0sHost:
    """One node: its spurd, its k0s/systemd roots and its config."""

    name: str
    root: Path
    cluster: Cluster
    cluster_conf: str = ""
    preinstall: bool = True
    extra_env: dict[str, str] = field(default_factory=dict)
    netns: str | None = None  # run spurd (and so its k0s) in this network namespace, at ``host_ip``
    host_ip: str = "127.0.0.1"
    spurd_extra: list[str] = field(default_factory=list)  # more spurd flags (e.g. --sysfs-root)
    port: int = field(default_factory=free_port)
    proc: Proc | None = None

    @property
    def k0s_root(self) -> Path:
        return self.root / "k0s-root"

    @property
    def systemd_root(self) -> Path:
        return self.root / "systemd"

    @property
    def data_dir(self) -> Path:
        return self.k0s_root / "var/lib/k0s"

    @property
    def config_dir(self) -> Path:
        return self.root / "etc/spur/k0s"

    @property
    def unit_dir(self) -> Path:
        return self.systemd_root / "units"

    @property
    def binary(self) -> Path:
        return self.root / "usr/local/bin/k0s"

    @property
    def cdi_dir(self) -> Path:
        return self.root / "etc/cdi"

    @property
    def address(self) -> str:
        return f"{self.host_ip}:{self.port}"

    def write_conf(self) -> Path:
        conf = self.root / "spur.conf"
        conf.write_text(
            'cluster_name = "itest"\n'
            "[cluster]\n"
            "enabled = true\n"
            f'k0s_binary = "{self.binary}"\n'
            f'k0s_data_dir = "{self.data_dir}"\n'
            f'k0s_config_dir = "{self.config_dir}"\n'
            f'systemctl = "{DOUBLES / "bin/systemctl"}"\n'
            f'systemd_unit_dir = "{self.unit_dir}"\n'
            f'cdi_dir = "{self.cdi_dir}"\n' + self.cluster_conf
        )
        return conf

    def env(self) -> dict[str, str]:
        env = dict(self.cluster.env)
        env.update(
            FAKE_K0S_ROOT=str(self.k0s_root),
            FAKE_SYSTEMD_ROOT=str(self.systemd_root),
            FAKE_K0S_JOIN_PORT="0",
        )
        env.update(self.extra_env)
        return env

    def start(self) -> K0sHost:
        self.root.mkdir(parents=True, exist_ok=True)
        self.unit_dir.mkdir(parents=True, exist_ok=True)
        if self.preinstall and not self.binary.exists():
            k0s_launcher(self.binary)
        conf = self.write_conf()
        argv = spurd_argv(
            self.cluster.root, self.name, [self.cluster.address], self.host_ip, self.port, 2, 4000,
            ["-f", str(conf), *self.spurd_extra],
        )
        if self.netns:  # ``ip netns exec`` execs spurd: the pid held is spurd's own
            argv = ["ip", "netns", "exec", self.netns, *argv]
        self.proc = Proc(argv, self.root / "spurd.log", self.env()).start()
        wait_for(self._up, timeout=20, what=f"spurd {self.name} to answer")
        return self

    def _up(self) -> bool:
        import socket

        if self.proc and not self.proc.alive():
            raise AssertionError(f"spurd {self.name} exited:\n{self.proc.log()}")
        try:
            with socket.create_connection((self.host_ip, self.port), timeout=0.5):
                return True
        except OSError:
            return False

    def k0s_call(self, method: str, request: Any, timeout: float = 60) -> Any:
        """Call the node's K0sAgent service as the controller does."""
        import trio

        from spur.rpc.channel import open_channel
        from spur.rpc.proto import k0s_pb2
        from spur.rpc.stub import Stub

        service = k0s_pb2.DESCRIPTOR.services_by_name["K0sAgent"]

        async def run() -> Any:
            async with open_channel(self.address) as ch:
                return await getattr(Stub(ch, service), method)(request, timeout=timeout)

        return trio.run(run)

    def unit_output(self) -> str:
        out = self.systemd_root / "state/spur-k0s.service/output"
        return out.read_text(errors="replace") if out.exists() else ""

    def joined(self) -> list[dict]:
        f = self.data_dir / "fake/joined.json"
        return json.loads(f.read_text()) if f.exists() else []

    def stop(self) -> None:
        if self.proc:
            self.proc.kill()
        fake_systemd.shutdown(self.systemd_root)


def cleanup_hosts(hosts: list[K0sHost]) -> None:
    for host in hosts:
        try:
            host.stop()
        except Exception:  # noqa: BLE001 (cleanup goes on for the other hosts)
            pass
    for host in hosts:
        shutil.rmtree(host.systemd_root / "state", ignore_errors=True)
    os.sync()


# ---------------------------------------------------------------- a fake k0s release server

TAG = "v1.36.2+k0s.0"
NEWEST = "v1.37.0+k0s.0"


class Release:
    """Files of fake releases: tag -> {file name: bytes}; ``latest`` redirects to NEWEST."""

    def __init__(self) -> None:
        arch = arch_of(platform.machine())
        self.files: dict[str, dict[str, bytes]] = {}
        for tag in (TAG, NEWEST):
            binary = f"#!/bin/sh\necho {tag}\n".encode()
            name = f"k0s-{tag}-{arch}"
            sums = f"{hashlib.sha256(b'other').hexdigest()}  k0s-{tag}-s390x\n{hashlib.sha256(binary).hexdigest()} *{name}\n"
            self.files[tag] = {name: binary, "sha256sums.txt": sums.encode()}
        self.requests: list[str] = []


@contextlib.contextmanager
def fake_release() -> Iterator[Release]:
    """A loopback HTTP server laid out like k0s's GitHub releases (``rel.url`` is the base URL)."""
    rel = Release()

    class Handler(http.server.BaseHTTPRequestHandler):
        timeout = 10  # a client that connects and goes quiet cannot hold a handler thread forever

        def log_message(self, *args):
            return

        def do_GET(self):  # noqa: N802
            path = urllib.parse.unquote(self.path)
            rel.requests.append(path)
            if path == "/k0s/releases/latest":
                self.send_response(302)
                self.send_header("Location", f"/k0s/releases/tag/{urllib.parse.quote(NEWEST)}")
                self.end_headers()
                return
            if path.startswith("/k0s/releases/tag/"):
                body = b"release page"
            else:
                parts = path.split("/")
                body = None
                if len(parts) == 6 and parts[1:4] == ["k0s", "releases", "download"]:
                    body = rel.files.get(parts[4], {}).get(parts[5])
                if body is None:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    class Server(http.server.ThreadingHTTPServer):
        # Closing never waits for handler threads: a stuck one must not hang the test's teardown.
        daemon_threads = True
        block_on_close = False

    server = Server(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, name="fake-k0s-release", daemon=True).start()
    rel.url = f"http://127.0.0.1:{server.server_address[1]}/k0s/releases"
    try:
        yield rel
    finally:
        server.shutdown()
        server.server_close()


CLUSTER_ON = "[cluster]\nenabled = true\nk8s_provisioning_timeout_secs = 120\n"


class Env:
    """A spurctld with [cluster] enabled and the K0sHost nodes a test adds, driven through the spur CLI."""

    def __init__(self, root, conf_extra: str = CLUSTER_ON) -> None:
        self.root = root
        (root / "ctl").mkdir(parents=True)
        self.cluster = Cluster(root / "ctl", conf_extra=conf_extra)
        self.cluster.start_controller()
        self.hosts: dict[str, K0sHost] = {}

    def host(self, name: str, **kw) -> K0sHost:
        h = K0sHost(name=name, root=self.root / name, cluster=self.cluster, **kw).start()
        self.hosts[name] = h
        return h

    def hosts_up(self, *names: str, **kw) -> None:
        for n in names:
            self.host(n, **kw)
        self.cluster.wait_nodes(*names)

    def spur(self, *args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
        r = self.cluster.cli("spur", *args, check=False, timeout=timeout)
        if check and r.returncode != 0:
            raise AssertionError(f"spur {' '.join(args)} -> {r.returncode}\n{r.stdout}\n{r.stderr}")
        return r

    def status(self) -> str:
        return self.spur("k8s", "status").stdout

    def stop(self) -> None:
        cleanup_hosts(list(self.hosts.values()))
        self.cluster.stop()


def node_line(status: str, name: str) -> list[str]:
    for line in status.splitlines():
        parts = line.split()
        if parts and parts[0] == name:
            return parts
    raise AssertionError(f"{name} not in:\n{status}")
