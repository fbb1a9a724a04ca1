"""Real Slurm 22.05 and Spur side by side on this machine, each one node of the same size.

:func:`running_pair` starts both (Slurm through :mod:`integration.slurm_real` on free ports, Spur
through :class:`integration.harness.Cluster`) and yields the two :class:`System` sides. Both run the
cases' jobs as the calling user; each side's PATH finds only its own commands.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

from integration.conformance.systems import FIRST_JOB_ID, Outcome, System, run_snippet
from integration.harness import BIN, Cluster, wait_for
from integration.reaper import MARKER
from integration.slurm_real import SlurmLayout, ensure_slurm, free_port_pair, slurm_cluster

CPUS = 4
MEMORY_MB = 900  # below FIRST_JOB_ID, so that no memory figure reads as a job id

# Of equal lengths on both sides, so that padded columns line up the same after normalization.
SLURM_NAMES = {"sltst": "<CLUSTER>", "slpart": "<PART>", "slnode": "<NODE>"}
SPUR_NAMES = {"itest": "<CLUSTER>", "sppart": "<PART>", "spnode": "<NODE>"}

_SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"


def base_env() -> dict[str, str]:
    """The caller's environment without any scheduler's variables (set again per side)."""
    drop = ("SLURM_", "SBATCH_", "SRUN_", "SALLOC_", "SQUEUE_", "SINFO_", "SACCT_", "SPUR_", "SCONTROL_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env.pop("VIRTUAL_ENV", None)
    if MARKER in os.environ:  # what the test session's reaper finds its processes by
        env[MARKER] = os.environ[MARKER]
    # The suite's thousands of short commands are not measured in a coverage run (CI): each would
    # start the tracer and write a data file, for lines the CLI tests already cover.
    env.pop("COVERAGE_PROCESS_START", None)
    env.pop("COVERAGE_PROCESS_CONFIG", None)
    env["LC_ALL"] = "C"
    env["TZ"] = "UTC"
    return env


@contextmanager
def running_pair(root: Path) -> Iterator[tuple[System, System]]:
    """(slurm, spur), both up and idle, Slurm with accounting (slurmdbd, MariaDB) as Spur always has;
    raises :class:`integration.slurm_real.Skip` without Slurm."""
    bins = ensure_slurm(install=True, accounting=True)
    ctld_port, slurmd_port = free_port_pair()
    layout = SlurmLayout(
        ports=(ctld_port, slurmd_port),
        dbd_port=_free_port(),
        cpus=CPUS,
        memory_mb=MEMORY_MB,
        cluster="sltst",
        partition="slpart",
        node="slnode",
        config_overrides=True,
        extra=(f"FirstJobId={FIRST_JOB_ID}", "MinJobAge=3600", "KillWait=2"),
    )
    spur_root = root / "spur"
    spur_root.mkdir()
    cluster = Cluster(
        spur_root,
        conf_extra='[[partitions]]\nname = "sppart"\ndefault = true\nnodes = "ALL"\n',
    )
    with slurm_cluster(bins, layout) as slurm_env:
        try:
            cluster.start_controller()
            cluster.start_agent("spnode", cpus=CPUS, memory_mb=MEMORY_MB)
            cluster.wait_nodes("spnode")
            _move_ids_past(cluster)
            slurm = System(
                "slurm",
                {**base_env(), "SLURM_CONF": slurm_env["SLURM_CONF"], "PATH": _SYSTEM_PATH},
                root / "slurm-cases",
                dict(SLURM_NAMES),
                spool=r"/\S*/spool/job(\d+)/",
            )
            spur_env = {**base_env(), "PATH": f"{BIN}:{_SYSTEM_PATH}"}
            spur_env.update({k: v for k, v in cluster.env.items() if k.startswith("SPUR_")})
            spur = System(
                "spur",
                spur_env,
                root / "spur-cases",
                dict(SPUR_NAMES),
                spool=r"/\S*/agent-[^/\s]+/clusters/\w+/jobs/(\d+)/",
            )
            yield slurm, spur
        finally:
            cluster.stop()
            _kill_leftover_jobs(cluster)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _move_ids_past(cluster: Cluster) -> None:
    """Spend Spur's job ids below FIRST_JOB_ID (Slurm starts there by FirstJobId) with one held
    array, cancelled at once."""
    first = cluster.submit_spec(script="#!/bin/sh\ntrue\n", array=f"1-{FIRST_JOB_ID - 1}", hold=True)
    if first != 1:
        raise AssertionError(f"a fresh Spur cluster gave job id {first}, expected 1")
    cluster.cli("scancel", str(first))
    wait_for(lambda: cluster.job(FIRST_JOB_ID - 1).state == "CANCELLED", what="the id spender cancelled")


def _kill_leftover_jobs(cluster: Cluster) -> None:
    import signal

    for agent_dir in cluster.root.glob("agent-*/jobs/*"):
        for name in ("pgid", "pid"):
            f = agent_dir / name
            if f.exists():
                try:
                    os.killpg(int(f.read_text().split()[0]), signal.SIGKILL)
                except (OSError, ValueError):
                    pass


def which_side(system: System, command: str) -> str | None:
    """Where ``command`` resolves on ``system``'s PATH."""
    return shutil.which(command, path=system.env["PATH"])


def run_both(pair: tuple[System, System], case_id: str, snippet: str) -> tuple[Outcome, Outcome]:
    """Run ``snippet`` on both systems at the same time; (slurm's outcome, spur's)."""
    slurm, spur = pair
    for system in pair:
        partition = next(k for k, v in system.names.items() if v == "<PART>")
        system.env["PART"] = partition
    with ThreadPoolExecutor(2) as pool:
        a = pool.submit(run_snippet, slurm, case_id, snippet)
        b = pool.submit(run_snippet, spur, case_id, snippet)
        return a.result(), b.result()
