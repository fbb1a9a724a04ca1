"""Network-namespace test hosts for the WireGuard mesh tests (real tunnels through wireguard-go).

Each host is a network namespace joined to a per-run bridge by a veth pair. Names carry the test
process id and a counter (``sm<pid><n>...``), so parallel runs never collide, and :meth:`Hosts.cleanup`
removes everything it created. Each host's spurd runs in its namespace inside a private mount of
``/run/wireguard`` (a tmpfs), because wireguard-go keeps its control sockets in that one directory
for all namespaces: every host can then use the same interface name, spur0.
"""

from __future__ import annotations

import itertools
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from integration.harness import BIN, Cluster, Proc, free_port

_COUNTER = itertools.count()


def sh(*argv: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=30)
    if check and proc.returncode != 0:
        raise AssertionError(f"{argv} exited {proc.returncode}: {proc.stderr.strip()}")
    return proc


def netns_available() -> str | None:
    """None when this process can create namespaces and run wireguard-go; else why not."""
    if os.geteuid() != 0:
        return "needs root (network namespaces)"
    if subprocess.run(["which", "wireguard-go"], capture_output=True).returncode != 0:
        return "wireguard-go is not installed (scripts/setup.sh installs it as root)"
    if subprocess.run(["which", "ping"], capture_output=True).returncode != 0:
        return "ping is not installed (scripts/setup.sh installs iputils-ping as root)"
    if not Path("/dev/net/tun").exists():
        return "no /dev/net/tun"
    return None


@dataclass
class Host:
    name: str  # node name
    ns: str
    ip: str
    agent_port: int
    proc: Proc | None = None
    env: dict[str, str] | None = None  # the CLI's environment (SPUR_CONF of the test cluster)

    @property
    def agent(self) -> str:
        return f"{self.ip}:{self.agent_port}"

    def run(self, *argv: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess:
        """Run a command inside this host's namespace (argv[0] from the venv when it is there)."""
        exe = str(BIN / argv[0]) if (BIN / argv[0]).exists() else argv[0]
        proc = subprocess.run(
            ["ip", "netns", "exec", self.ns, exe, *argv[1:]],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=self.env,
        )
        if check and proc.returncode != 0:
            raise AssertionError(
                f"{self.name}: {argv} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
            )
        return proc

    def ping(self, address: str) -> bool:
        return self.run("ping", "-c", "1", "-W", "1", address, check=False).returncode == 0

    def wireguard_go_pids(self) -> list[int]:
        out = sh("ip", "netns", "pids", self.ns, check=False).stdout.split()
        pids = []
        for pid in out:
            try:
                if Path(f"/proc/{pid}/comm").read_text().strip() == "wireguard-go":
                    pids.append(int(pid))
            except OSError:
                continue
        return pids


@dataclass
class Hosts:
    """A bridge in the root namespace (the controllers listen on its address) and N hosts."""

    root: Path
    tag: str = field(default_factory=lambda: f"sm{os.getpid() % 100000}{next(_COUNTER)}")
    hosts: list[Host] = field(default_factory=list)
    subnet: str = ""
    bridge_ip: str = ""

    def __post_init__(self) -> None:
        # A /24 no other bridge of this machine routes (parallel runs, other tests' namespaces).
        routes = sh("ip", "-4", "route", "show", check=False).stdout
        start = (os.getpid() * 7 + next(_COUNTER)) % 200
        for step in range(200):
            n = (start + step) % 200
            self.subnet = f"10.{200 + n // 100}.{n % 100 + 100}"
            if f"{self.subnet}.0/24" not in routes:
                break
        self.bridge_ip = f"{self.subnet}.1"

    @property
    def bridge(self) -> str:
        return f"{self.tag}b"

    def create(self, count: int, prefix: str = "h") -> list[Host]:
        sh("ip", "link", "add", self.bridge, "type", "bridge")
        sh("ip", "addr", "add", f"{self.bridge_ip}/24", "dev", self.bridge)
        sh("ip", "link", "set", self.bridge, "up")
        for i in range(1, count + 1):
            self.add_host(f"{prefix}{i}", i)
        return self.hosts

    def add_host(self, name: str, index: int) -> Host:
        ns = f"{self.tag}n{index}"
        outer, inner = f"{self.tag}v{index}", f"{self.tag}p{index}"
        ip = f"{self.subnet}.{10 + index}"
        sh("ip", "netns", "add", ns)
        sh("ip", "link", "add", outer, "type", "veth", "peer", "name", inner)
        sh("ip", "link", "set", inner, "netns", ns)
        sh("ip", "link", "set", outer, "master", self.bridge, "up")
        sh("ip", "-n", ns, "link", "set", "lo", "up")
        sh("ip", "-n", ns, "link", "set", inner, "name", "eth0")
        sh("ip", "-n", ns, "addr", "add", f"{ip}/24", "dev", "eth0")
        sh("ip", "-n", ns, "link", "set", "eth0", "up")
        host = Host(name, ns, ip, free_port())
        self.hosts.append(host)
        return host

    def start_spurd(self, host: Host, conf: Path, controllers: list[str], env: dict[str, str]) -> Proc:
        """spurd inside the host's namespace with a private /run/wireguard (module docstring)."""
        args = [
            str(BIN / "spurd"),
            "-D",
            "-f",
            str(conf),
            *(a for c in controllers for a in ("--controller", c)),
            "--listen",
            host.agent,
            "--address",
            host.ip,
            "--name",
            host.name,
            "--state-dir",
            str(self.root / f"agent-{host.name}"),
            "--cpus",
            "1",
            "--memory-mb",
            "1000",
            "--metrics-addr",
            "off",
        ]
        script = 'mkdir -p /run/wireguard && mount -t tmpfs spur-wg /run/wireguard && exec "$@"'
        argv = ["ip", "netns", "exec", host.ns, "sh", "-c", script, "spurd", *args]
        host.env = dict(env, SPUR_CONF=str(conf))
        host.proc = Proc(argv, self.root / f"spurd-{host.name}.log", env).start()
        return host.proc

    def cleanup(self) -> None:
        for host in self.hosts:
            if host.proc is not None:
                host.proc.kill()
            for pid in host.wireguard_go_pids():
                try:
                    os.kill(pid, 9)
                except OSError:
                    pass
            sh("ip", "netns", "del", host.ns, check=False)
            sh("ip", "link", "del", f"{self.tag}v{self.hosts.index(host) + 1}", check=False)
        sh("ip", "link", "del", self.bridge, check=False)


class BridgeCluster(Cluster):
    """A Cluster whose controller listens on the bridge address (reachable from the namespaces)."""

    listen_host: str = "127.0.0.1"

    @property
    def address(self) -> str:
        return f"{self.listen_host}:{self.port}"

    def _controller_up(self) -> bool:
        import socket

        if self.controller and not self.controller.alive():
            raise AssertionError(f"spurctld exited:\n{self.controller.log()}")
        try:
            with socket.create_connection((self.listen_host, self.port), timeout=0.5):
                return True
        except OSError:
            return False
