"""Compute hosts under a real systemd: systemd-nspawn containers booting Debian bookworm's systemd 252.

Each host is a container (``scripts/systemd/run-systemd.sh``) on one shared root filesystem, built once
per machine by ``scripts/setup.sh`` into ``$SPUR_SYSTEMD_DIR/rootfs`` (default
``/var/cache/spur-test/systemd``) and mounted read-only with a tmpfs overlay, so every change a test
makes inside a host is discarded when it stops. The network is that of a network-namespace host of
:mod:`integration.mesh_hosts` (its own address on a per-run bridge; the controller listens on the
bridge's address in the root namespace). The checkout, the virtualenv and its base interpreter are
bind-mounted read-only at their own paths, and a per-test work directory read-write at its own path
(the shared submit directory), so a host runs this very checkout's spurd from ``/etc/systemd/system``.

Names (containers, cgroups, namespaces, links) carry a per-run tag; :meth:`SystemdHosts.cleanup` stops
and removes everything it started, whatever state the test left.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from integration.harness import BIN, wait_for
from integration.mesh_hosts import Host, Hosts

REPO = Path(__file__).resolve().parent.parent
TOOL = REPO / "scripts" / "systemd" / "run-systemd.sh"
UNITS = REPO / "contrib" / "systemd"
SYSTEMD_DIR = Path(os.environ.get("SPUR_SYSTEMD_DIR", "/var/cache/spur-test/systemd"))
ROOTFS = SYSTEMD_DIR / "rootfs"


def systemd_unavailable() -> str | None:
    """None when real systemd hosts can run here; else why not (the tests' skip reason)."""
    if os.geteuid() != 0:
        return "needs root (systemd-nspawn containers, network namespaces)"
    if shutil.which("systemd-nspawn") is None:
        return "systemd-nspawn is not installed (scripts/setup.sh installs systemd-container as root)"
    if not (ROOTFS / "lib" / "systemd" / "systemd").exists():
        return f"no systemd root filesystem at {ROOTFS} (scripts/setup.sh builds it once per machine)"
    if not Path("/sys/fs/cgroup/systemd").is_dir() or not Path("/sys/fs/cgroup/unified").is_dir():
        return "run-systemd.sh needs the hybrid cgroup layout (/sys/fs/cgroup/systemd and /unified)"
    return None


def _bind_paths(work: Path) -> list[str]:
    """nspawn bind options: this checkout, the venv, its interpreter (read-only), the work dir."""
    ro: list[Path] = [REPO]
    for prefix in (Path(sys.prefix), Path(sys.base_prefix)):
        if not any(prefix.is_relative_to(p) for p in ro):
            ro.append(prefix)
    return [f"--bind-ro={p}" for p in ro] + [f"--bind={work}"]


@dataclass
class SystemdHost:
    """One container: a host with its own address, real systemd as PID 1."""

    net: Host
    container: str
    state: Path
    binds: list[str]

    @property
    def name(self) -> str:
        return self.net.name

    @property
    def ip(self) -> str:
        return self.net.ip

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            SDT_NAME=self.container,
            SDT_ROOT=str(ROOTFS),
            SDT_STATE=str(self.state),
            SDT_VOLATILE="overlay",
            SDT_NSPAWN_ARGS=" ".join(
                [f"--network-namespace-path=/run/netns/{self.net.ns}", f"--hostname={self.name}", *self.binds]
            ),
        )
        return env

    def boot(self) -> None:
        proc = subprocess.run(["bash", str(TOOL), "start"], env=self._env(), capture_output=True, text=True, timeout=60)
        if proc.returncode != 0:
            raise AssertionError(f"{self.name}: container did not boot:\n{proc.stdout}\n{proc.stderr}")

    def poweroff(self) -> None:
        subprocess.run(["bash", str(TOOL), "stop"], env=self._env(), capture_output=True, text=True, timeout=60)

    def run(
        self, *argv: str, check: bool = True, timeout: float = 60, input: str | None = None, user: str = ""
    ) -> subprocess.CompletedProcess:
        """Run ``argv`` inside the host (in its cgroup and namespaces), as ``user`` when given."""
        cmd = ["runuser", "-u", user, "--", *argv] if user else list(argv)
        proc = subprocess.run(
            ["bash", str(TOOL), "exec", "env", "-i", "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8", *cmd],
            env=self._env(),
            capture_output=True,
            text=True,
            timeout=timeout,
            input=input,
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"{self.name}: {argv} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
        return proc

    def write(self, path: str, text: str, mode: str = "0644") -> None:
        self.run("sh", "-c", f'mkdir -p "$(dirname "$0")" && cat > "$0" && chmod {mode} "$0"', path, input=text)

    def systemctl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        return self.run("systemctl", *args, check=check)

    def unit_property(self, unit: str, prop: str) -> str:
        return self.systemctl("show", "-p", prop, "--value", unit).stdout.strip()

    def pids(self, pattern: str) -> list[int]:
        """Pids (in this machine's view; the containers' processes are visible from here) of processes
        whose command line contains ``pattern`` (the rootfs has no procps)."""
        found = []
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if pattern in cmdline:
                found.append(int(proc.name))
        return found

    def kill(self, pid: int, signal: str = "KILL") -> None:
        """``kill -SIGNAL pid`` inside the host (the shell's builtin: the rootfs has no procps)."""
        self.run("sh", "-c", f"kill -{signal} {pid}")

    def add_user(self, name: str, uid: int) -> None:
        self.run("useradd", "--create-home", "--uid", str(uid), "--user-group", name)

    def install_spurd(self, conf: str, extra_args: str = "") -> None:
        """Install the shipped ``spurd.service`` with a drop-in that points ExecStart at this venv (the
        documented way to run another prefix), write /etc/spur/spur.conf, enable and start it."""
        self.write("/etc/spur/spur.conf", conf)
        self.write("/etc/systemd/system/spurd.service", (UNITS / "spurd.service").read_text())
        self.write(
            "/etc/systemd/system/spurd.service.d/prefix.conf",
            f"[Service]\nExecStart=\nExecStart={BIN / 'spurd'} -D -f /etc/spur/spur.conf {extra_args}\n",
        )
        self.systemctl("daemon-reload")
        # Type=notify: returns once spurd said READY=1 (or fails with its reason in the journal).
        proc = self.systemctl("enable", "--now", "spurd", check=False)
        if proc.returncode != 0:
            raise AssertionError(f"{self.name}: spurd did not start: {proc.stderr}\n{self.journal('spurd')}")

    def journal(self, unit: str) -> str:
        return self.run("journalctl", "--no-pager", "-o", "cat", "-u", unit, check=False).stdout

    def spurd_pid(self) -> int:
        return int(self.unit_property("spurd", "MainPID"))


@dataclass
class SystemdHosts:
    """N containers on one bridge; the root namespace holds the bridge address (for the controller)."""

    root: Path
    net: Hosts = field(init=False)
    hosts: list[SystemdHost] = field(default_factory=list)
    work: Path = field(init=False)

    def __post_init__(self) -> None:
        self.net = Hosts(self.root)
        self.work = self.root / "work"
        self.work.mkdir(parents=True, exist_ok=True)
        self.work.chmod(0o1777)  # the shared submit directory: every test user writes output here

    @property
    def bridge_ip(self) -> str:
        return self.net.bridge_ip

    def create(self, count: int, prefix: str = "sd") -> list[SystemdHost]:
        """Boot ``count`` hosts named ``<prefix>1..``, each at its own address."""
        self.net.create(0)
        for i in range(1, count + 1):
            net = self.net.add_host(f"{prefix}{i}", i)
            host = SystemdHost(
                net, f"{self.net.tag}c{i}", self.root / f"ct-{net.name}", _bind_paths(self.work)
            )
            self.hosts.append(host)
            host.boot()
        for host in self.hosts:
            wait_for(lambda h=host: h.run("true", check=False).returncode == 0, timeout=20, what=f"{host.name} up")
            # The bind-mounted interpreter may live under /root (pyenv): let test users reach it.
            host.run("chmod", "o+x", "/root")
        return self.hosts

    def cleanup(self) -> None:
        for host in self.hosts:
            host.poweroff()
        self.net.cleanup()
