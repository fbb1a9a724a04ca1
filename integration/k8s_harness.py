"""Kubernetes-shaped test setups: the API double as a process, and spurctld as StatefulSet pods.

``kubeapi_process`` runs ``python -m integration.kubeapi`` and yields its URL. ``StatefulSetControllers``
runs real spurctld processes as the pods of examples/k8s/spurctld.yaml would: hostnames
spurctld-0..N-1, each in its own UTS namespace (``unshare --uts``, as root), the guide's spur.conf
peers list unchanged, and a private /etc/hosts (its own mount namespace) mapping the peers'
StatefulSet DNS names to loopback addresses of a /24 picked at random, as cluster DNS maps them
to pod IPs. Raft listens on the port each peers entry names, on that private address.
"""

from __future__ import annotations

import contextlib
import os
import random
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from integration.harness import BIN, Proc, free_port, wait_for
from spur.config import load_config
from spur.config.addr import parse_addr

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE_CONF = ROOT / "examples" / "k8s" / "spur.conf"


@contextlib.contextmanager
def kubeapi_process(tmp: Path, *args: str) -> Iterator[str]:
    """The API double as its own process (port picked by the double); yields its base URL."""
    log = open(tmp / "kubeapi.log", "w+")
    proc = subprocess.Popen(
        [sys.executable, "-m", "integration.kubeapi", "--port", "0", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # printed once it accepts connections
        assert line.startswith("listening on http://"), (line, (tmp / "kubeapi.log").read_text())
        yield line.split()[-1]
    finally:
        proc.kill()
        proc.wait(timeout=10)
        log.close()


def controller_status(address: str) -> Any | None:
    """GetControllerStatus of one controller, or None when it does not answer."""
    import trio

    from spur.auth.identity import identity_metadata
    from spur.rpc.channel import open_channel
    from spur.rpc.proto import spur_pb2 as pb
    from spur.rpc.status import RpcError
    from spur.rpc.stub import controller_stub

    async def call() -> Any:
        with trio.fail_after(3):
            async with open_channel(address, connect_timeout=1.0, metadata_provider=identity_metadata) as ch:
                return await controller_stub(ch).GetControllerStatus(pb.Empty(), timeout=2)

    try:
        return trio.run(call)
    except (RpcError, trio.TooSlowError, OSError):
        return None


def example_peers() -> list[str]:
    return list(load_config(EXAMPLE_CONF).controller.peers)


@dataclass
class StatefulSetControllers:
    """spurctld-0..N-1 with the example's peers. ``log_path(i)`` says where pod i's output goes."""

    root: Path
    log_dir: Path | None = None
    block: str = field(default_factory=lambda: f"127.{random.randint(64, 250)}.{random.randint(1, 250)}")
    procs: list[Proc] = field(default_factory=list)
    addresses: list[str] = field(default_factory=list)

    @property
    def peers(self) -> list[str]:
        return example_peers()

    def ip(self, index: int) -> str:
        return f"{self.block}.{11 + index}"

    def log_path(self, index: int) -> Path:
        return (self.log_dir or self.root) / f"spur_spurctld-{index}.log"

    def hosts_file(self) -> Path:
        hosts = self.root / "hosts"
        hosts.write_text(
            "127.0.0.1 localhost\n"
            + "".join(f"{self.ip(i)} {parse_addr(p, 6821)[0]}\n" for i, p in enumerate(self.peers))
        )
        return hosts

    def conf(self, name: str, index: int, grpc_port: int) -> Path:
        """The example's cluster, peers and scheduler, plus this pod's state dir and listen addresses."""
        peers = self.peers
        _, raft_port = parse_addr(peers[index], 6821)
        ip = self.ip(index)
        conf = self.root / f"{name}.conf"
        quoted = ", ".join(f'"{p}"' for p in peers)
        conf.write_text(
            'cluster_name = "spur-k8s"\n'
            "[controller]\n"
            f"peers = [{quoted}]\n"
            f'listen_addr = "{ip}:{grpc_port}"\n'
            f'raft_listen_addr = "{ip}:{raft_port}"\n'
            f'rest_addr = "{ip}:{free_port()}"\n'
            f'state_dir = "{self.root / name}"\n'
            "election_timeout_min_ms = 500\n"
            "election_timeout_max_ms = 1000\n"
            "heartbeat_ms = 100\n"
            "[scheduler]\n"
            "interval_secs = 2\n"
            'plugin = "backfill"\n'
            "[[partitions]]\n"
            'name = "default"\n'
            'state = "UP"\n'
            "default = true\n"
        )
        return conf

    def launch(self, hostname: str, conf: Path, log: Path) -> Proc:
        """spurctld in new UTS and mount namespaces, with ``hostname`` and the private hosts file."""
        hosts = self.hosts_file()
        script = f'mount --bind "{hosts}" /etc/hosts && hostname "{hostname}" && exec "{BIN / "spurctld"}" -D -f "{conf}"'
        env = dict(os.environ)
        env.pop("SPUR_CONF", None)
        return Proc(["unshare", "--uts", "--mount", "--", "sh", "-c", script], log, env).start()

    def start(self, count: int = 3) -> None:
        for i in range(count):
            port = free_port()
            conf = self.conf(f"spurctld-{i}", i, port)
            self.procs.append(self.launch(f"spurctld-{i}", conf, self.log_path(i)))
            self.addresses.append(f"{self.ip(i)}:{port}")

    def wait_leader(self, timeout: float = 60) -> dict[int, Any]:
        """Wait until exactly one leads and every member follows it; index -> ControllerInfo."""

        def one_leader() -> dict[int, Any] | None:
            for p in self.procs:
                if not p.alive():
                    raise AssertionError(f"a controller exited:\n{p.log()}")
            statuses = [controller_status(a) for a in self.addresses]
            if any(s is None for s in statuses):
                return None
            leaders = [s for s in statuses if s.role == "leader"]
            if len(leaders) != 1 or any(
                s.term != leaders[0].term or s.leader_address != leaders[0].address for s in statuses
            ):
                return None
            return dict(enumerate(statuses))

        return wait_for(one_leader, timeout=timeout, interval=0.2, what="one Raft leader among spurctld-*")

    def stop(self) -> None:
        for p in self.procs:
            p.kill()
