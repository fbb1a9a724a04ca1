"""MPI programs on Spur: Debian's Open MPI and MPICH across netns hosts, each with its own spurd.

A ring program (integration/mpi/ring.c, compiled at test time) passes a token through every rank;
rank 0 prints the sum. ``mpirun`` inside an allocation starts its remote daemons with ``srun`` steps
(Open MPI's orted, Hydra's proxies), so these tests exercise steps with --nodes/--nodelist/
--ntasks-per-node/--kill-on-bad-exit, the compressed SLURM_* variables and output forwarding.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
from pathlib import Path

import pytest

from integration.harness import BIN, wait_for
from integration.mesh_hosts import Hosts
from integration.mpi_hosts import (
    MPICH,
    OPENMPI,
    BridgeCluster,
    MpiStack,
    compile_ring,
    mpi_missing,
    remove_hosts_files,
    start_host_spurd,
    write_hosts_files,
)

pytestmark = [pytest.mark.integration]


def netns_missing() -> str | None:
    if os.geteuid() != 0:
        return "needs root (network and UTS namespaces)"
    return None


@pytest.fixture
def mpi_cluster(tmp_path):
    reason = netns_missing()
    if reason:
        pytest.skip(reason)
    hosts = Hosts(tmp_path)
    cluster = BridgeCluster(tmp_path, conf_extra=f'[auth]\nbroker_socket = "{tmp_path / "auth.sock"}"\n')
    etc: list[Path] = []
    try:
        hosts.create(3)
        etc = write_hosts_files(hosts)
        cluster.listen_host = hosts.bridge_ip
        cluster.start_controller()
        for host in hosts.hosts:
            start_host_spurd(hosts, host, cluster, cpus=2)
        cluster.wait_nodes(*(h.name for h in hosts.hosts))
        yield cluster, hosts
    finally:
        cluster.stop()
        hosts.cleanup()
        remove_hosts_files(etc)


# Open MPI refuses to run as root without these; the tests run jobs as root.
ROOT_OK = "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"


def running(pid: int) -> bool:
    """The process exists and is not a zombie (every host shares this PID namespace)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def ring(stack: MpiStack, tmp_path: Path) -> Path:
    reason = mpi_missing(stack)
    if reason:
        pytest.skip(reason)
    return compile_ring(stack, tmp_path)


@pytest.mark.parametrize("stack", [OPENMPI, MPICH], ids=lambda s: s.name)
def test_mpirun_inside_an_allocation_runs_the_ring_across_hosts(mpi_cluster, tmp_path, stack):
    cluster, hosts = mpi_cluster
    exe = ring(stack, tmp_path)
    wrap = f"{ROOT_OK} {stack.launcher} {exe} --exit 7"
    out = cluster.cli(
        "sbatch",
        "--parsable",
        "-N2",
        "--ntasks-per-node=2",
        "-o",
        "ring-%j.out",
        "--wrap",
        wrap,
        cwd=tmp_path,
    )
    job_id = int(out.stdout.strip())
    job = cluster.wait_job(job_id, "COMPLETED", "FAILED", "CANCELLED", timeout=90)
    text = (tmp_path / f"ring-{job_id}.out").read_text()
    nodes = [a.node for a in job.allocation]
    assert len(nodes) == 2, job
    ranks = sorted(line for line in text.splitlines() if line.startswith("rank "))
    assert len(ranks) == 4, text
    assert "ring sum 10 over 4 ranks" in text, text
    per_host = {n: sum(line.endswith(f" on {n}") for line in ranks) for n in nodes}
    assert per_host == {n: 2 for n in nodes}, text
    assert (job.state, job.exit_code) == ("FAILED", 7), text


LAUNCHER_VIEW = """#!/bin/sh
echo "tasks=$SLURM_TASKS_PER_NODE cpus=$SLURM_JOB_CPUS_PER_NODE"
scontrol show hostnames | tr '\\n' ' '; echo
second=$(scontrol show hostnames $SLURM_JOB_NODELIST | tail -n 1)
srun --ntasks-per-node=1 --kill-on-bad-exit --cpu_bind=none --nodes=1 --nodelist=$second --ntasks=1 \\
  sh -c 'echo orted-like on $(hostname) rank $SLURM_PROCID of $SLURM_NTASKS'
srun -N2 --ntasks-per-node=2 sh -c 'echo task $SLURM_PROCID on $(hostname)' | sort
"""


def test_steps_honour_what_mpi_launchers_ask(mpi_cluster, tmp_path):
    """The srun forms Open MPI and Hydra use, and the compressed SLURM_* forms they parse."""
    cluster, _hosts = mpi_cluster
    (tmp_path / "view.sh").write_text(LAUNCHER_VIEW)
    out = cluster.cli(
        "sbatch", "--parsable", "-N2", "--ntasks-per-node=2", "-o", "view.out", "view.sh", cwd=tmp_path
    )
    job = cluster.wait_job(int(out.stdout), "COMPLETED", "FAILED", timeout=60)
    text = (tmp_path / "view.out").read_text()
    first, second = [a.node for a in job.allocation]
    assert job.state == "COMPLETED", text
    assert text.splitlines() == [
        "tasks=2(x2) cpus=2(x2)",
        f"{first} {second} ",
        f"orted-like on {second} rank 0 of 1",
        f"task 0 on {first}",
        f"task 1 on {first}",
        f"task 2 on {second}",
        f"task 3 on {second}",
    ]


KILL_ON_BAD_EXIT = """#!/bin/sh
mkdir -p pids
srun -K -N2 --ntasks-per-node=2 sh -c '
  if [ $SLURM_PROCID = 3 ]; then while [ $(ls pids | wc -l) -lt 3 ]; do sleep 0.1; done; exit 5; fi
  echo $(hostname) $$ > pids/$SLURM_PROCID; exec sleep 300'
echo srun-rc=$?
srun -N1 -n1 true
"""


def test_a_failing_rank_with_kill_on_bad_exit_ends_the_step_on_every_host(mpi_cluster, tmp_path):
    cluster, _hosts = mpi_cluster
    (tmp_path / "k.sh").write_text(KILL_ON_BAD_EXIT)
    out = cluster.cli(
        "sbatch", "--parsable", "-N2", "--ntasks-per-node=2", "-o", "k.out", "k.sh", cwd=tmp_path
    )
    job_id = int(out.stdout)
    job = cluster.wait_job(job_id, "COMPLETED", "FAILED", timeout=60)
    text = (tmp_path / "k.out").read_text()
    first, second = [a.node for a in job.allocation]
    # Slurm 22.05's -K (conformance case srun/mpi_pmi2_die_kill_on_bad_exit): the failed task first,
    # then the step is terminated (SIGTERM) everywhere, and srun exits 128 + SIGTERM.
    lines = text.splitlines()
    assert lines.index(f"srun: error: {second}: task 3: Exited with exit code 5") < lines.index(
        f"srun: launch/slurm: _step_signal: Terminating StepId={job_id}.0"
    ), text
    assert f"srun: error: {second}: task 2: Terminated" in lines, text
    assert f"srun: error: {first}: tasks 0-1: Terminated" in lines, text
    assert lines[lines.index("srun-rc=143") - 1] == f"srun: Force Terminated StepId={job_id}.0", text
    for rank in range(3):
        host, pid = (tmp_path / "pids" / str(rank)).read_text().split()
        assert host == (first if rank < 2 else second)
        assert not running(int(pid)), f"rank {rank} ({pid} on {host}) outlived the step"
    steps = {s.step_id: s for s in cluster.job(job_id).steps}
    assert sorted(steps) == [0, 1]
    assert (steps[0].state, steps[0].exit_code, steps[1].state) == ("FAILED", 5, "COMPLETED")
    sacct = cluster.cli("sacct", "-j", str(job_id), "-n", "-P", "--format=JobID,State,ExitCode").stdout
    rows = [line.split("|")[:2] for line in sacct.splitlines()]
    assert [f"{job_id}.0", "FAILED"] in rows and [f"{job_id}.1", "COMPLETED"] in rows, sacct


DIRECT = """#!/bin/sh
srun --mpi=pmi2 -N2 -n4 {exe} {args}
echo srun-rc=$?
"""


def direct_launch(cluster, tmp_path: Path, exe: Path, args: str, name: str) -> tuple[object, str]:
    """sbatch a script that direct-launches ``exe args`` with srun --mpi=pmi2 on 2 hosts x 2 ranks."""
    (tmp_path / f"{name}.sh").write_text(DIRECT.format(exe=exe, args=args))
    out = cluster.cli(
        "sbatch", "--parsable", "-N2", "--ntasks-per-node=2", "-o", f"{name}.out", f"{name}.sh", cwd=tmp_path
    )
    job = cluster.wait_job(int(out.stdout), "COMPLETED", "FAILED", "CANCELLED", timeout=90)
    return job, (tmp_path / f"{name}.out").read_text()


def test_srun_mpi_pmi2_direct_launch_runs_the_ring_across_hosts(mpi_cluster, tmp_path):
    """MPICH's PMI client over PMI_FD: 4 ranks on 2 hosts wire up through the fences and pass the token."""
    cluster, _hosts = mpi_cluster
    exe = ring(MPICH, tmp_path)
    job, text = direct_launch(cluster, tmp_path, exe, "--exit 7", "direct")
    first, second = [a.node for a in job.allocation]
    ranks = sorted(line for line in text.splitlines() if line.startswith("rank "))
    assert ranks == [
        f"rank 0 of 4 on {first}",
        f"rank 1 of 4 on {first}",
        f"rank 2 of 4 on {second}",
        f"rank 3 of 4 on {second}",
    ], text
    assert "ring sum 10 over 4 ranks" in text, text
    assert f"srun: error: {first}: task 0: Exited with exit code 7" in text, text
    assert "task 1:" not in text, text  # rank 1 ended well: no line for it
    assert "srun-rc=7" in text.splitlines(), text
    steps = {s.step_id: s for s in cluster.job(job.job_id).steps}
    assert (steps[0].spec.mpi, steps[0].state, steps[0].exit_code) == ("pmi2", "FAILED", 7)


def test_mpi_abort_in_a_direct_launched_step_kills_every_rank_with_its_code(mpi_cluster, tmp_path):
    """MPI_Abort -> PMI abort: as Slurm 22.05 does (integration/conformance srun/mpi_pmi2_abort), the
    step is killed on both hosts with SIGKILL, MPICH's aborting rank included, and srun exits 137."""
    cluster, _hosts = mpi_cluster
    exe = ring(MPICH, tmp_path)
    job, text = direct_launch(cluster, tmp_path, exe, "--abort 3 5", "abort")
    first, second = [a.node for a in job.allocation]
    assert "srun: Job step aborted: Waiting up to 32 seconds for job step to finish." in text, text
    assert "application called MPI_Abort(MPI_COMM_WORLD, 5) - process 3" in text, text
    assert f"srun: error: {first}: tasks 0-1: Killed" in text, text
    assert f"srun: error: {second}: tasks 2-3: Killed" in text, text
    assert "srun-rc=137" in text.splitlines(), text  # 128 + SIGKILL, as Slurm's srun
    assert "ring sum" not in text, text
    steps = {s.step_id: s for s in cluster.job(job.job_id).steps}
    # The step's tasks all died of SIGKILL (ExitCode 0:9); srun alone knows the code MPI_Abort gave.
    assert (steps[0].state, steps[0].exit_code, steps[0].signal) == ("FAILED", 0, 9)


def test_a_rank_that_exits_without_finalize_ends_a_kill_on_bad_exit_step(mpi_cluster, tmp_path):
    """A rank dying before MPI_Finalize leaves its peers blocked; with -K the step ends, as in Slurm."""
    cluster, _hosts = mpi_cluster
    exe = ring(MPICH, tmp_path)
    (tmp_path / "die.sh").write_text(
        f"#!/bin/sh\nsrun -K --mpi=pmi2 -N2 -n4 {exe} --die 1 4\necho srun-rc=$?\n"
    )
    out = cluster.cli(
        "sbatch", "--parsable", "-N2", "--ntasks-per-node=2", "-o", "die.out", "die.sh", cwd=tmp_path
    )
    job = cluster.wait_job(int(out.stdout), "COMPLETED", "FAILED", "CANCELLED", timeout=90)
    text = (tmp_path / "die.out").read_text()
    first, second = [a.node for a in job.allocation]
    assert f"srun: error: {first}: task 1: Exited with exit code 4" in text, text
    # Two ways the step can end, both Slurm's: usually -K ends it (srun says so and terminates the
    # step everywhere: 143). But MPICH ranks that lose a peer may call MPI_Abort first, and a PMI abort
    # kills the step with SIGKILL (srun exits 137).
    if f"srun: launch/slurm: _step_signal: Terminating StepId={job.job_id}.0" in text:
        assert f"srun: error: {first}: task 0: Terminated" in text, text
        assert re.search(f"srun: error: {second}: tasks 2-3: (Terminated|Killed)\n", text), text
        assert f"srun: Force Terminated StepId={job.job_id}.0" in text, text
        assert "srun-rc=143" in text.splitlines(), text
    else:
        assert "srun: Job step aborted: Waiting up to 32 seconds for job step to finish." in text, text
        assert f"srun: error: {second}: tasks 2-3: Killed" in text, text
        assert "srun-rc=137" in text.splitlines(), text


def test_srun_mpi_pmi2_outside_an_allocation_takes_one_and_runs_the_ring_as_its_step(mpi_cluster, tmp_path):
    """As with Slurm, srun --mpi=pmi2 from a login host (here the bridge's namespace) allocates, runs
    the program as step 0 with srun serving the fences, and releases the allocation."""
    cluster, _hosts = mpi_cluster
    exe = ring(MPICH, tmp_path)
    out = cluster.cli("srun", "--mpi=pmi2", "-N2", "-n4", str(exe), "--exit", "3", cwd=tmp_path, check=False)
    assert out.returncode == 3, out.stderr
    assert "ring sum 10 over 4 ranks" in out.stdout, out.stdout
    assert len([line for line in out.stdout.splitlines() if line.startswith("rank ")]) == 4, out.stdout
    [job] = [j for j in cluster.jobs().values() if j.spec.allocation_only]
    job = cluster.wait_job(job.job_id, "COMPLETED", "FAILED", timeout=30)
    assert (job.state, job.exit_code) == ("FAILED", 3)
    assert [(s.step_id, s.spec.mpi) for s in job.steps] == [(0, "pmi2")]


def held_ranks(hold: Path, count: int) -> dict[int, tuple[str, int]]:
    """rank -> (host, pid) once all ``count`` ranks of ring --hold wrote their files."""
    wait_for(lambda: len(list(hold.glob("rank-*"))) == count, timeout=60, what=f"{count} ranks holding")
    out = {}
    for f in hold.glob("rank-*"):
        host, pid = f.read_text().split()
        out[int(f.name.split("-")[1])] = (host, int(pid))
    return out


@pytest.mark.parametrize(
    ("launch", "how"),
    [("pmi2", "scancel"), ("pmi2", "ctrl-c"), ("openmpi", "scancel")],
    ids=["direct-scancel", "direct-ctrl-c", "mpirun-scancel"],
)
def test_scancel_and_ctrl_c_reach_every_rank_on_every_host(mpi_cluster, tmp_path, launch, how):
    """Ranks holding after the ring on two hosts (2 each) are all gone after ``scancel JOB`` or a
    user's Ctrl-C to srun: the step ends on every host, not only where srun runs."""
    cluster, _hosts = mpi_cluster
    stack = OPENMPI if launch == "openmpi" else MPICH
    exe = ring(stack, tmp_path)
    hold = tmp_path / "hold"
    hold.mkdir()
    proc = None
    job_id = 0
    if how == "ctrl-c":
        cmd = [str(BIN / "srun"), "--mpi=pmi2", "-N2", "-n4", str(exe), "--hold", str(hold)]
        proc = subprocess.Popen(
            cmd, cwd=tmp_path, env=cluster.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
    else:
        run = f"srun --mpi=pmi2 -N2 -n4 {exe}" if launch == "pmi2" else f"{ROOT_OK} {stack.launcher} {exe}"
        (tmp_path / "h.sh").write_text(f"#!/bin/sh\n{run} --hold {hold}\n")
        out = cluster.cli(
            "sbatch", "--parsable", "-N2", "--ntasks-per-node=2", "-o", "h.out", "h.sh", cwd=tmp_path
        )
        job_id = int(out.stdout)
    ranks = held_ranks(hold, 4)
    assert len({host for host, _pid in ranks.values()}) == 2, ranks
    if proc is not None:
        # A user's Ctrl-C, twice within a second as Slurm's srun asks for to abort a step.
        proc.send_signal(signal.SIGINT)
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=60)
        assert proc.returncode != 0, err
        [job] = [j for j in cluster.jobs().values() if j.spec.allocation_only]
        job_id = job.job_id
    else:
        cluster.cli("scancel", str(job_id))
    cluster.wait_job(job_id, "CANCELLED", "FAILED", "COMPLETED", timeout=60)
    wait_for(
        lambda: not any(running(pid) for _host, pid in ranks.values()),
        timeout=30,
        what="every rank on both hosts gone",
    )
