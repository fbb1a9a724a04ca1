"""Spur beside real Slurm 22.05 on this machine, same resources: CLI ms per call and an array's makespan.

    python -m bench.vs_slurm [--calls 20] [--interactive-calls 7] [--array 200] [--no-slurm] [--no-install] [--keep]

Both clusters get one node with 2 CPUs and run one-CPU jobs of ``true``:

- Slurm: Debian's ``slurm-wlm`` (22.05), installed with ``apt-get install -y slurm-wlm`` when
  ``slurmctld``/``slurmd``/``munged`` are missing (as root; otherwise, or when the install fails,
  Slurm is skipped with a message and Spur's figures are still printed). A private munged, then
  slurmctld on port 7817 and slurmd on 7818, all under a temporary directory, tuned for throughput
  as Slurm's high-throughput guide says: ``SchedulerParameters=batch_sched_delay=0,
  sched_min_interval=0,sched_interval=1``, ``select/cons_tres`` with ``CR_CPU``, no accounting.
- Spur: a local spurctld (scheduler interval 1 s, WAL fsync on) and one spurd (``--cpus 2``,
  process backend) on free loopback ports.

For each: ``sbatch --wrap true`` and ``squeue`` ms per call (median of ``--calls`` fresh processes);
the interactive commands ``srun true``, ``salloc -n1 true`` and ``sbatch --wait --wrap true``, whole
command wall time (median of ``--interactive-calls``); then the makespan of one ``sbatch --array=0-<N-1> --wrap true`` (``--array`` tasks): from the
submission until no task is left pending or running, polled every 0.2 s (Slurm with ``squeue -j``,
which costs it ~5 ms; Spur with GetJobs on one held connection, so that the observer's Python
start-up does not take the 2-core machine's CPU from the cluster being measured). Prints
both and Spur's makespan as a fraction of Slurm's (the issue's target: <= 0.2). Every daemon is stopped
and every temporary directory removed on the way out (``--keep`` keeps the directories for their logs).
Spur's commands run with their bytecode compiled and without ``PYTHONDONTWRITEBYTECODE``, as an
installed Spur's do. Figures only; nothing here asserts.
"""

from __future__ import annotations

import argparse
import compileall
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench.common import controller, median, print_table
from integration.harness import BIN, Proc, wait_for
from integration.slurm_real import Skip, SlurmLayout, ensure_slurm, slurm_cluster

SLURM_PORTS = (7817, 7818)
# The interactive rows: what a user at a terminal waits for, whole command.
INTERACTIVE = {
    "srun true": ["srun", "true"],
    "salloc -n1 true": ["salloc", "-n1", "true"],
    "sbatch --wait --wrap true": ["sbatch", "--wait", "-o", "/dev/null", "--wrap", "true"],
}
ACTIVE = {"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING", "PD", "R", "CG", "CF", "S"}


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
    print(f"{name}: srun/salloc/sbatch --wait x{args.interactive_calls} ...", flush=True)
    bindir = Path(sbatch).parent
    interactive = {
        label: per_call_ms([str(bindir / cmd[0]), *cmd[1:]], args.interactive_calls, env, cwd)
        for label, cmd in INTERACTIVE.items()
    }
    wait_idle(squeue, env, cwd)
    print(f"{name}: {args.array}-task array ...", flush=True)
    if active is None:

        def active(job: str) -> int:
            return active_tasks(squeue, job, env, cwd)

    span = makespan(sbatch, active, args.array, env, cwd)
    return {"sbatch": sbatch_ms, "squeue": squeue_ms, "makespan": span, **interactive}


def run_spur(args: argparse.Namespace) -> dict:
    from bench.latency import start_agent

    with controller(wal_fsync=True, scheduler_interval_secs=1.0) as ctl:
        agent: Proc = start_agent(ctl, args.cpus)
        try:
            env = {**os.environ, "SPUR_CONTROLLER": ctl.address}
            env.pop("SPUR_CONF", None)
            env.pop("PYTHONDONTWRITEBYTECODE", None)  # as an installed Spur runs, bytecode compiled
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
    layout = SlurmLayout(ports=SLURM_PORTS, cpus=args.cpus)
    with slurm_cluster(bins, layout, args.keep) as env:
        with tempfile.TemporaryDirectory(prefix="spur-vs-slurm-work-") as work:
            return measure("Slurm", bins["sbatch"], bins["squeue"], env, Path(work), args)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=20, help="fresh sbatch/squeue processes timed per system")
    ap.add_argument("--interactive-calls", type=int, default=7, help="runs of each interactive command")
    ap.add_argument("--array", type=int, default=200, help="tasks in the array whose makespan is measured")
    ap.add_argument("--cpus", type=int, default=2, help="CPUs of the one node of each system")
    ap.add_argument("--no-slurm", action="store_true", help="measure Spur only")
    ap.add_argument("--no-install", action="store_true", help="skip Slurm when it is not installed")
    ap.add_argument("--keep", action="store_true", help="keep Slurm's temporary directory (logs)")
    args = ap.parse_args(argv)
    root = Path(__file__).resolve().parent.parent
    compileall.compile_dir(str(root / "spur"), quiet=1)
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
    print_table(
        ["system", *INTERACTIVE],
        [(name, *(r[label] for label in INTERACTIVE)) for name, r in results.items()],
        title=f"interactive commands, whole-command wall ms; medians of {args.interactive_calls} runs",
    )
    if "Slurm 22.05" in results:
        slurm, spur = results["Slurm 22.05"], results["Spur"]
        for label in INTERACTIVE:
            print(f"{label}: Spur / Slurm = {spur[label] / slurm[label]:.2f}")
        ratio = results["Spur"]["makespan"] / results["Slurm 22.05"]["makespan"]
        print(f"\nSpur's makespan / Slurm's: {ratio:.3f} (target <= 0.2)")
    elif slurm_note:
        print(f"\n{slurm_note}")


if __name__ == "__main__":
    sys.exit(main())
