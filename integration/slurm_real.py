"""Real Slurm 22.05 (Debian's ``slurm-wlm``) on this machine: install it, and run a private one-node cluster.

Shared by ``bench/vs_slurm.py`` and the conformance suite (``integration/conformance/``).
:func:`ensure_slurm` installs the package with apt-get when its programs are missing (root on Debian
only; otherwise :class:`Skip` says why). :func:`slurm_cluster` starts a private munged, slurmctld and
slurmd under a temporary directory on the ports it is given (callers pick free ones), waits for the
node to be idle, yields the environment (``SLURM_CONF``) the Slurm commands need, and stops everything
on the way out.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from integration.harness import port_free, wait_for
from integration.slurm_accounting import (
    ACCOUNTING_PACKAGES,
    ACCOUNTING_PROGRAMS,
    AccountingError,
    start_accounting,
)

SBIN = "/usr/sbin:/usr/bin:/sbin:/bin"


class Skip(Exception):
    """Slurm cannot be run here; the message says why."""


def slurm_binaries(accounting: bool = False) -> dict[str, str] | None:
    """Paths of the Slurm and munge programs used (with ``accounting``, slurmdbd's and MariaDB's too),
    or None when any is missing."""
    names = ("slurmctld", "slurmd", "munged", "sbatch", "squeue", "sinfo")
    if accounting:
        names += ACCOUNTING_PROGRAMS
    found = {name: shutil.which(name, path=SBIN) for name in names}
    if not all(found.values()):
        return None
    return {name: path for name, path in found.items() if path}


def ensure_slurm(install: bool = True, accounting: bool = False) -> dict[str, str]:
    """The Slurm programs, installing Debian's slurm-wlm first when missing (with ``accounting``, also
    slurmdbd and MariaDB); raises :class:`Skip`."""
    found = slurm_binaries(accounting)
    if found:
        return found
    packages = ["slurm-wlm", *(ACCOUNTING_PACKAGES if accounting else ())]
    wanted = " ".join(packages)
    if not install:
        raise Skip("Slurm is not installed and installing it was not allowed")
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        raise Skip(f"Slurm is not installed and this is not a root Debian host (apt-get install -y {wanted})")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    print(f"installing Slurm: apt-get install -y {wanted} ...", flush=True)
    cmd = ["apt-get", "install", "-y", "-o", "DPkg::Lock::Timeout=600", "--no-install-recommends", *packages]
    with _no_service_starts():
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if proc.returncode != 0:  # a stale package index: refresh once and retry
            subprocess.run(["apt-get", "update"], env=env, capture_output=True, text=True)
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    found = slurm_binaries(accounting)
    if proc.returncode != 0 or not found:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise Skip(f"apt-get install -y {wanted} failed: " + " / ".join(tail))
    return found


@contextmanager
def _no_service_starts() -> Iterator[None]:
    """While installing, Debian's maintainer scripts start no services (munge, slurmctld, MariaDB on
    the machine's own ports): the tests run private instances. A policy-rc.d already in place is left
    as it is."""
    policy = Path("/usr/sbin/policy-rc.d")
    if policy.exists():
        yield
        return
    policy.write_text("#!/bin/sh\n# written by Spur's test set-up while it installs Slurm\nexit 101\n")
    policy.chmod(0o755)
    try:
        yield
    finally:
        policy.unlink(missing_ok=True)


def free_port_pair() -> tuple[int, int]:
    """Two distinct free loopback ports (slurmctld's, slurmd's)."""
    socks = [socket.socket() for _ in range(2)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        a, b = (s.getsockname()[1] for s in socks)
    finally:
        for s in socks:
            s.close()
    return a, b


@dataclass(frozen=True)
class SlurmLayout:
    """What the private cluster looks like: one node of ``cpus`` CPUs and ``memory_mb`` MB in one
    default partition, on ``ports`` (slurmctld, slurmd). ``extra`` lines go at the end of slurm.conf
    before the node and partition lines."""

    ports: tuple[int, int]
    cpus: int = 2
    memory_mb: int = 2000
    cluster: str = "spurbench"
    partition: str = "debug"
    node: str = field(default_factory=lambda: socket.gethostname().split(".")[0])
    # The machine's host name (slurmd checks it when ``node`` is some other name).
    host: str = field(default_factory=lambda: socket.gethostname().split(".")[0])
    extra: Sequence[str] = ()
    # Use the configured CPUs/memory even where the machine has fewer (slurmd would drain the node).
    config_overrides: bool = False
    # slurmdbd's port: with one, the cluster keeps accounting in its own MariaDB through slurmdbd
    # (integration.slurm_accounting); without, AccountingStorageType=accounting_storage/none.
    dbd_port: int | None = None


def slurm_conf(root: Path, layout: SlurmLayout) -> str:
    """slurm.conf for ``layout`` on loopback, throughput-tuned, no cgroups; accounting through slurmdbd
    only when the layout has a ``dbd_port``."""
    ctld_port, slurmd_port = layout.ports
    lines = [
        f"ClusterName={layout.cluster}",
        "SlurmctldHost=localhost(127.0.0.1)",
        f"SlurmctldPort={ctld_port}",
        f"SlurmdPort={slurmd_port}",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={root / 'munge' / 'munge.socket'}",
        f"StateSaveLocation={root / 'state'}",
        f"SlurmdSpoolDir={root / 'spool'}",
        f"SlurmctldPidFile={root / 'slurmctld.pid'}",
        f"SlurmdPidFile={root / 'slurmd.pid'}",
        f"SlurmctldLogFile={root / 'slurmctld.log'}",
        f"SlurmdLogFile={root / 'slurmd.log'}",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none",
        *(
            [
                "AccountingStorageType=accounting_storage/slurmdbd",
                "AccountingStorageHost=localhost",
                f"AccountingStoragePort={layout.dbd_port}",
                # Where the commands and slurmctld find munged for their slurmdbd connections (the
                # AuthInfo socket above covers only the slurmctld/slurmd ones).
                f"AccountingStoragePass={root / 'munge' / 'munge.socket'}",
            ]
            if layout.dbd_port
            else ["AccountingStorageType=accounting_storage/none"]
        ),
        "JobCompType=jobcomp/none",
        "MpiDefault=none",
        "ReturnToService=2",
        "SwitchType=switch/none",
        "SchedulerType=sched/backfill",
        "SchedulerParameters=batch_sched_delay=0,sched_min_interval=0,sched_interval=1",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_CPU",
        "MaxArraySize=100001",
        *(["SlurmdParameters=config_overrides"] if layout.config_overrides else []),
        *layout.extra,
        f"NodeName={layout.node} NodeHostName={layout.host} NodeAddr=127.0.0.1"
        f" CPUs={layout.cpus} RealMemory={layout.memory_mb} State=UNKNOWN",
        f"PartitionName={layout.partition} Nodes=ALL Default=YES MaxTime=INFINITE State=UP",
        "",
    ]
    return "\n".join(lines)


def _stop(procs: list[subprocess.Popen]) -> None:
    for p in reversed(procs):
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 10
    for p in reversed(procs):
        try:
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


@contextmanager
def slurm_cluster(bins: dict[str, str], layout: SlurmLayout, keep: bool = False) -> Iterator[dict[str, str]]:
    """munged + slurmctld + slurmd for ``layout`` in a temporary directory; yields the commands' env
    (``SLURM_CONF`` set). Raises :class:`Skip` when a port is taken or a daemon does not come up."""
    for port in layout.ports:
        if not port_free(port):
            raise Skip(f"port {port} is in use (another Slurm running?)")
    root = Path(tempfile.mkdtemp(prefix="spur-slurm-"))
    os.chmod(root, 0o700)
    procs: list[subprocess.Popen] = []
    try:
        munge = root / "munge"
        munge.mkdir(mode=0o700)
        key = munge / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o600)
        conf = root / "slurm.conf"
        conf.write_text(slurm_conf(root, layout))
        (root / "cgroup.conf").write_text("CgroupPlugin=cgroup/v1\nCgroupAutomount=no\n")
        for sub in ("state", "spool"):
            (root / sub).mkdir()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SBATCH_", "SRUN_", "SALLOC_"))}
        env["SLURM_CONF"] = str(conf)
        log = open(root / "daemons.out", "wb")  # noqa: SIM115 (closed with the directory)
        munged = [
            bins["munged"], "-F", "--force",
            f"--key-file={key}", f"--socket={munge / 'munge.socket'}",
            f"--pid-file={munge / 'munged.pid'}", f"--log-file={munge / 'munged.log'}",
            f"--seed-file={munge / 'munged.seed'}",
        ]  # fmt: skip
        procs.append(subprocess.Popen(munged, stdout=log, stderr=log, env=env))
        wait_for(lambda: (munge / "munge.socket").exists(), timeout=10, what="munged")
        if layout.dbd_port:
            try:
                procs += start_accounting(
                    bins, root, env, dbd_port=layout.dbd_port, cluster=layout.cluster,
                    munge_socket=munge / "munge.socket", log=log,
                )  # fmt: skip
            except AccountingError as exc:
                raise Skip(f"Slurm's accounting did not start: {exc}") from None
        ctld = [bins["slurmctld"], "-D", "-c", "-f", str(conf)]
        procs.append(subprocess.Popen(ctld, stdout=log, stderr=log, env=env))
        slurmd = [bins["slurmd"], "-D", "-f", str(conf), "-N", layout.node]
        procs.append(subprocess.Popen(slurmd, stdout=log, stderr=log, env=env))
        deadline = time.monotonic() + 60
        while True:
            for p in procs:
                if p.poll() is not None:
                    raise Skip(f"a Slurm daemon exited ({p.args[0]}):\n" + tail_logs(root))
            out = subprocess.run([bins["sinfo"], "-h", "-o", "%T"], env=env, capture_output=True, text=True).stdout
            if out.strip() == "idle":
                break
            if time.monotonic() > deadline:
                raise Skip("the Slurm node did not become idle in 60 s:\n" + tail_logs(root))
            time.sleep(0.2)
        yield env
    finally:
        _stop(procs)
        if keep:
            print(f"(Slurm's directory kept: {root})")
        else:
            shutil.rmtree(root, ignore_errors=True)


def tail_logs(root: Path) -> str:
    out = []
    for name in ("daemons.out", "slurmctld.log", "slurmd.log", "slurmdbd.log", "munge/munged.log"):
        f = root / name
        if f.exists():
            out.append(f"--- {name}\n" + "\n".join(f.read_text(errors="replace").splitlines()[-8:]))
    return "\n".join(out)
