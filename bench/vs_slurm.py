"""Spur beside real Slurm 22.05 on this machine, same resources: CLI ms per call and an array's makespan.

    python -m bench.vs_slurm [--calls 20] [--array 200] [--no-slurm] [--no-install] [--keep]

Both clusters get one node with 2 CPUs and run one-CPU jobs of ``true``:

- Slurm: Debian's ``slurm-wlm`` (22.05), installed with ``apt-get install -y slurm-wlm`` when
  ``slurmctld``/``slurmd``/``munged`` are missing (as root; otherwise, or when the install fails,
  Slurm is skipped with a message and Spur's figures are still printed). A private munged, then
  slurmctld on port 7817 and slurmd on 7818, all under a temporary directory, tuned for throughput
  as Slurm's high-throughput guide says: ``SchedulerParameters=batch_sched_delay=0,
  sched_min_interval=0,sched_interval=1``, ``select/cons_tres`` with ``CR_CPU``, no accounting.
- Spur: a local spurctld (scheduler interval 1 s, WAL fsync on) and one spurd (``--cpus 2``,
  process backend) on free loopback ports.

For each: ``sbatch --wrap true`` and ``squeue`` ms per call (median of ``--calls`` fresh processes),
then the makespan of one ``sbatch --array=0-<N-1> --wrap true`` (``--array`` tasks): from the
submission until no task is left pending or running, polled every 0.2 s (Slurm with ``squeue -j``,
which costs it ~5 ms; Spur with GetJobs on one held connection, so that the observer's Python
start-up does not take the 2-core machine's CPU from the cluster being measured). Prints
both and Spur's makespan as a fraction of Slurm's (the issue's target: <= 0.2). Every daemon is stopped
and every temporary directory removed on the way out (``--keep`` keeps the directories for their logs).
Figures only; nothing here asserts.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from bench.common import controller, median, print_table
from integration.harness import BIN, Proc, wait_for

SLURM_PORTS = (7817, 7818)
SBIN = "/usr/sbin:/usr/bin:/sbin:/bin"
ACTIVE = {"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING", "PD", "R", "CG", "CF", "S"}


class Skip(Exception):
    """Slurm cannot be run here; the message says why."""


# ---------------------------------------------------------------------------------------- Slurm


def slurm_binaries() -> dict[str, str] | None:
    """Paths of the Slurm and munge programs used, or None when any is missing."""
    found = {name: shutil.which(name, path=SBIN) for name in ("slurmctld", "slurmd", "munged", "sbatch", "squeue")}
    return found if all(found.values()) else None  # type: ignore[return-value]


def ensure_slurm(install: bool) -> dict[str, str]:
    """The Slurm programs, installing Debian's slurm-wlm first when missing; raises Skip."""
    found = slurm_binaries()
    if found:
        return found
    if not install:
        raise Skip("Slurm is not installed and --no-install was given")
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        raise Skip("Slurm is not installed and this is not a root Debian host (apt-get install -y slurm-wlm)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    print("installing Slurm: apt-get install -y slurm-wlm ...", flush=True)
    cmd = ["apt-get", "install", "-y", "--no-install-recommends", "slurm-wlm"]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:  # a stale package index: refresh once and retry
        subprocess.run(["apt-get", "update"], env=env, capture_output=True, text=True)
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    found = slurm_binaries()
    if proc.returncode != 0 or not found:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise Skip("apt-get install -y slurm-wlm failed: " + " / ".join(tail))
    return found


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def slurm_conf(root: Path, node: str, cpus: int) -> str:
    """slurm.conf for one node of ``cpus`` CPUs on loopback, throughput-tuned, no accounting/cgroups."""
    return "\n".join(
        [
            "ClusterName=spurbench",
            "SlurmctldHost=localhost(127.0.0.1)",
            f"SlurmctldPort={SLURM_PORTS[0]}",
            f"SlurmdPort={SLURM_PORTS[1]}",
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
            "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/none",
            "MpiDefault=none",
            "ReturnToService=2",
            "SwitchType=switch/none",
            "SchedulerType=sched/backfill",
            "SchedulerParameters=batch_sched_delay=0,sched_min_interval=0,sched_interval=1",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_CPU",
            "MaxArraySize=100001",
            f"NodeName={node} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory=2000 State=UNKNOWN",
            "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP",
            "",
        ]
    )


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
def slurm_cluster(bins: dict[str, str], cpus: int, keep: bool) -> Iterator[dict[str, str]]:
    """munged + slurmctld (7817) + slurmd (7818) in a temporary directory; yields the commands' env."""
    for port in SLURM_PORTS:
        if not _port_free(port):
            raise Skip(f"port {port} is in use (another Slurm running?); Slurm needs 7817 and 7818")
    root = Path(tempfile.mkdtemp(prefix="spur-vs-slurm-"))
    os.chmod(root, 0o700)
    procs: list[subprocess.Popen] = []
    try:
        munge = root / "munge"
        munge.mkdir(mode=0o700)
        key = munge / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o600)
        node = socket.gethostname().split(".")[0]
        conf = root / "slurm.conf"
        conf.write_text(slurm_conf(root, node, cpus))
        (root / "cgroup.conf").write_text("CgroupPlugin=cgroup/v1\nCgroupAutomount=no\n")
        for sub in ("state", "spool"):
            (root / sub).mkdir()
        env = {**os.environ, "SLURM_CONF": str(conf)}
        log = open(root / "daemons.out", "wb")  # noqa: SIM115 (closed with the directory)
        munged = [
            bins["munged"], "-F", "--force",
            f"--key-file={key}", f"--socket={munge / 'munge.socket'}",
            f"--pid-file={munge / 'munged.pid'}", f"--log-file={munge / 'munged.log'}",
            f"--seed-file={munge / 'munged.seed'}",
        ]  # fmt: skip
        procs.append(subprocess.Popen(munged, stdout=log, stderr=log, env=env))
        wait_for(lambda: (munge / "munge.socket").exists(), timeout=10, what="munged")
        procs.append(subprocess.Popen([bins["slurmctld"], "-D", "-c", "-f", str(conf)], stdout=log, stderr=log, env=env))
        procs.append(subprocess.Popen([bins["slurmd"], "-D", "-f", str(conf), "-N", node], stdout=log, stderr=log, env=env))
        sinfo = shutil.which("sinfo", path=SBIN) or "sinfo"

        deadline = time.monotonic() + 60
        while True:
            for p in procs:
                if p.poll() is not None:
                    raise Skip(f"a Slurm daemon exited ({p.args[0]}):\n" + _tail(root))
            out = subprocess.run([sinfo, "-h", "-o", "%T"], env=env, capture_output=True, text=True).stdout
            if out.strip() == "idle":
                break
            if time.monotonic() > deadline:
                raise Skip("the Slurm node did not become idle in 60 s:\n" + _tail(root))
            time.sleep(0.2)
        yield env
    finally:
        _stop(procs)
        if keep:
            print(f"(Slurm's directory kept: {root})")
        else:
            shutil.rmtree(root, ignore_errors=True)


def _tail(root: Path) -> str:
    out = []
    for name in ("daemons.out", "slurmctld.log", "slurmd.log", "munge/munged.log"):
        f = root / name
        if f.exists():
            out.append(f"--- {name}\n" + "\n".join(f.read_text(errors="replace").splitlines()[-8:]))
    return "\n".join(out)


# ----------------------------------------------------------------------------------- measurements


def _run(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[float, subprocess.CompletedProcess]:
    began = time.perf_counter()
    proc = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
    return 1000 * (time.perf_counter() - began), proc


def per_call_ms(cmd: list[str], calls: int, env: dict[str, str], cwd: Path) -> float:
    """Median wall ms of ``calls`` fresh runs of ``cmd`` (one warm-up run first, not counted)."""
    samples = []
    for i in range(calls + 1):
        ms, proc = _run(cmd, env, cwd)
        if proc.returncode != 0:
            raise RuntimeError(f"{cmd} exited {proc.returncode}: {proc.stderr.strip()}")
        if i:
            samples.append(ms)
    return median(samples)


def active_tasks(squeue: str, job: str, env: dict[str, str], cwd: Path) -> int:
    """Lines of ``squeue -j JOB`` still pending or running (a pending array range counts as one)."""
    proc = subprocess.run([squeue, "-h", "-j", job, "-o", "%T"], env=env, cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        if "Invalid job id" in proc.stderr:
            return 0  # purged: finished long ago
        raise RuntimeError(f"squeue -j {job} exited {proc.returncode}: {proc.stderr.strip()}")
    return sum(1 for line in proc.stdout.split() if line.strip() in ACTIVE)


def wait_idle(squeue: str, env: dict[str, str], cwd: Path, timeout: float = 300) -> None:
    """Until squeue lists no pending or running job at all."""

    def empty() -> bool:
        out = subprocess.run([squeue, "-h", "-o", "%T"], env=env, cwd=cwd, capture_output=True, text=True).stdout
        return not any(line.strip() in ACTIVE for line in out.split())

    wait_for(empty, timeout=timeout, interval=0.2, what="the queue to drain")


def spur_active_tasks(address: str) -> Callable[[str], int]:
    """How many of an array's jobs Spur still has pending or running, asked over one held connection
    (spur.rpc.blocking): polling with the ``squeue`` CLI would spend the 2-core machine's CPU on the
    observer's start-up (Slurm's C ``squeue`` costs ~5 ms, so Slurm is polled with it)."""
    from spur.auth.identity import identity_metadata
    from spur.rpc.blocking import BlockingChannel, blocking_controller_stub, drive
    from spur.rpc.proto import spur_pb2 as pb

    channel = BlockingChannel(address, metadata=identity_metadata())
    stub = blocking_controller_stub(channel)

    def active(job: str) -> int:
        resp = drive(_get_jobs(stub, pb.GetJobsRequest()))
        return sum(1 for j in resp.jobs if str(j.array_job_id or j.job_id) == job and j.state in ACTIVE)

    return active


async def _get_jobs(stub, request):
    """A blocking stub's GetJobs as the coroutine :func:`spur.rpc.blocking.drive` runs."""
    return await stub.GetJobs(request, timeout=30)


def makespan(sbatch: str, active: Callable[[str], int], tasks: int, env: dict[str, str], cwd: Path) -> float:
    """Seconds from submitting a ``tasks``-task array of ``true`` until ``active(job)`` says none is left."""
    began = time.perf_counter()
    cmd = [sbatch, "--parsable", f"--array=0-{tasks - 1}", "-c", "1", "-o", "/dev/null", "--wrap", "true"]
    proc = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd} exited {proc.returncode}: {proc.stderr.strip()}")
    job = proc.stdout.strip().split(";")[0]
    deadline = began + 1800
    while active(job):
        if time.perf_counter() > deadline:
            raise RuntimeError(f"array {job} not done after 30 minutes")
        time.sleep(0.2)
    return time.perf_counter() - began


def measure(
    name: str,
    sbatch: str,
    squeue: str,
    env: dict[str, str],
    cwd: Path,
    args: argparse.Namespace,
    active: Callable[[str], int] | None = None,
) -> dict:
    print(f"{name}: sbatch/squeue x{args.calls} ...", flush=True)
    sbatch_ms = per_call_ms([sbatch, "-o", "/dev/null", "--wrap", "true"], args.calls, env, cwd)
    squeue_ms = per_call_ms([squeue], args.calls, env, cwd)
    wait_idle(squeue, env, cwd)
    print(f"{name}: {args.array}-task array ...", flush=True)
    if active is None:

        def active(job: str) -> int:
            return active_tasks(squeue, job, env, cwd)

    span = makespan(sbatch, active, args.array, env, cwd)
    return {"sbatch": sbatch_ms, "squeue": squeue_ms, "makespan": span}


def run_spur(args: argparse.Namespace) -> dict:
    from bench.latency import start_agent

    with controller(wal_fsync=True, scheduler_interval_secs=1.0) as ctl:
        agent: Proc = start_agent(ctl, args.cpus)
        try:
            env = {**os.environ, "SPUR_CONTROLLER": ctl.address}
            env.pop("SPUR_CONF", None)
            work = ctl.root / "work"
            work.mkdir()
            squeue = str(BIN / "squeue")
            sinfo = str(BIN / "sinfo")

            def idle() -> bool:
                out = subprocess.run([sinfo, "-h", "-o", "%T"], env=env, capture_output=True, text=True).stdout
                return out.strip() == "idle"

            wait_for(idle, timeout=30, what="the Spur node to be idle")
            return measure("Spur", str(BIN / "sbatch"), squeue, env, work, args, spur_active_tasks(ctl.address))
        finally:
            agent.kill()


def run_slurm(args: argparse.Namespace) -> dict:
    bins = ensure_slurm(install=not args.no_install)
    with slurm_cluster(bins, args.cpus, args.keep) as env:
        with tempfile.TemporaryDirectory(prefix="spur-vs-slurm-work-") as work:
            return measure("Slurm", bins["sbatch"], bins["squeue"], env, Path(work), args)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=20, help="fresh sbatch/squeue processes timed per system")
    ap.add_argument("--array", type=int, default=200, help="tasks in the array whose makespan is measured")
    ap.add_argument("--cpus", type=int, default=2, help="CPUs of the one node of each system")
    ap.add_argument("--no-slurm", action="store_true", help="measure Spur only")
    ap.add_argument("--no-install", action="store_true", help="skip Slurm when it is not installed")
    ap.add_argument("--keep", action="store_true", help="keep Slurm's temporary directory (logs)")
    args = ap.parse_args(argv)
    results: dict[str, dict] = {}
    slurm_note = ""
    if not args.no_slurm:
        try:
            results["Slurm 22.05"] = run_slurm(args)
        except Skip as exc:
            slurm_note = f"Slurm skipped: {exc}"
            print(slurm_note, flush=True)
    results["Spur"] = run_spur(args)
    print(f"\nmachine: {os.cpu_count()} CPU cores, load average {os.getloadavg()[0]:.1f}")
    print_table(
        ["system", "sbatch --wrap true ms/call", "squeue ms/call", f"{args.array}-task array makespan s"],
        [(name, r["sbatch"], r["squeue"], r["makespan"]) for name, r in results.items()],
        title=f"one node, {args.cpus} CPUs, one-CPU jobs of true; medians of {args.calls} calls",
    )
    if "Slurm 22.05" in results:
        ratio = results["Spur"]["makespan"] / results["Slurm 22.05"]["makespan"]
        print(f"\nSpur's makespan / Slurm's: {ratio:.3f} (target <= 0.2)")
    elif slurm_note:
        print(f"\n{slurm_note}")


if __name__ == "__main__":
    sys.exit(main())
