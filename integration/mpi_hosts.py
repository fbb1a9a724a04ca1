"""Netns test hosts for the MPI tests: each host its own network and UTS namespace (so ``hostname``
answers the node name, as MPI libraries expect) with its own spurd; spurctld listens on the bridge.

The ring program (integration/mpi/ring.c) is compiled at test time with each MPI stack's explicit
compiler name (Debian's ``mpicc`` alternative may point at either stack).
"""

from __future__ import annotations

import shutil
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path

from integration.harness import BIN, Cluster, Proc
from integration.mesh_hosts import Host, Hosts

RING_SOURCE = Path(__file__).parent / "mpi" / "ring.c"


@dataclass(frozen=True)
class MpiStack:
    """One MPI implementation as Debian installs it, named explicitly (no alternatives)."""

    name: str
    compiler: str
    launcher: str  # mpirun inside an allocation


OPENMPI = MpiStack("openmpi", "mpicc.openmpi", "mpirun.openmpi")
MPICH = MpiStack("mpich", "mpicc.mpich", "mpiexec.hydra")


def mpi_missing(stack: MpiStack) -> str | None:
    """None when the stack's compiler and launcher are installed; else what is missing."""
    for exe in (stack.compiler, stack.launcher):
        if shutil.which(exe) is None:
            return f"{exe} is not installed (scripts/setup.sh installs mpich and openmpi-bin as root)"
    return None


def compile_ring(stack: MpiStack, out_dir: Path) -> Path:
    """integration/mpi/ring.c compiled with ``stack`` into ``out_dir``."""
    exe = out_dir / f"ring-{stack.name}"
    proc = subprocess.run(
        [stack.compiler, "-O1", "-o", str(exe), str(RING_SOURCE)], capture_output=True, text=True, timeout=120
    )
    if proc.returncode != 0:
        raise AssertionError(f"{stack.compiler} failed:\n{proc.stdout}\n{proc.stderr}")
    return exe


class BridgeCluster(Cluster):
    """A Cluster whose controller listens on the bridge address (reachable from the namespaces)."""

    listen_host: str = "127.0.0.1"

    @property
    def address(self) -> str:
        return f"{self.listen_host}:{self.port}"

    def _controller_up(self) -> bool:
        if self.controller and not self.controller.alive():
            raise AssertionError(f"spurctld exited:\n{self.controller.log()}")
        try:
            with socket.create_connection((self.listen_host, self.port), timeout=0.5):
                return True
        except OSError:
            return False


def write_hosts_files(hosts: Hosts) -> list[Path]:
    """Make every node name resolve on every host, as a cluster's DNS or /etc/hosts does.

    ``ip netns exec`` bind-mounts ``/etc/netns/NS/hosts`` over ``/etc/hosts`` for what runs in NS.
    Returns the directories created (remove them with :func:`remove_hosts_files`).
    """
    lines = "127.0.0.1 localhost\n" + "".join(f"{h.ip} {h.name}\n" for h in hosts.hosts)
    made = []
    for host in hosts.hosts:
        folder = Path("/etc/netns") / host.ns
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "hosts").write_text(lines)
        made.append(folder)
    return made


def remove_hosts_files(folders: list[Path]) -> None:
    for folder in folders:
        shutil.rmtree(folder, ignore_errors=True)


def start_host_spurd(hosts: Hosts, host: Host, cluster: BridgeCluster, cpus: int) -> Proc:
    """spurd in ``host``'s network namespace and a UTS namespace of its own named after the node."""
    args = [
        str(BIN / "spurd"),
        "-D",
        "-f",
        str(cluster.root / "spur.conf"),
        "--controller",
        cluster.address,
        "--listen",
        host.agent,
        "--address",
        host.ip,
        "--name",
        host.name,
        "--state-dir",
        str(hosts.root / f"agent-{host.name}"),
        "--cpus",
        str(cpus),
        "--memory-mb",
        "2000",
        "--kill-grace",
        "2",
        "--metrics-addr",
        "off",
    ]
    script = 'hostname "$0" && exec "$@"'
    argv = ["ip", "netns", "exec", host.ns, "unshare", "--uts", "sh", "-c", script, host.name, *args]
    host.env = dict(cluster.env, SPUR_CONF=str(cluster.root / "spur.conf"))
    host.proc = Proc(argv, hosts.root / f"spurd-{host.name}.log", cluster.env).start()
    return host.proc
