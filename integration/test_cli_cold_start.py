"""What the Slurm commands scripts call in loops load: only their own code and the wire layer.

Each command runs its real code path against a live spurctld (a submission, a queue listing, a
job shown) in a fresh interpreter, exactly as the console script starts it (``spur.cli.main``
dispatching on argv[0]); afterwards the process reports ``sys.modules``. None of them may import
the controller package, the state machine, Trio (unary calls use the blocking client), the config
schema stack, plugin/entry-point machinery or protobuf (they speak the wire through
``spur.rpc.lite``). ``squeue`` and ``scontrol show job`` do not load the domain dataclasses,
``typing`` or the ``socket`` module either. Import cost is the whole of a query command's time
(see ``bench.cli_loop``), so a new eager import of any of these is a regression this test names.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from integration.harness import Cluster

# Top-level packages (or dotted prefixes) no sbatch/squeue/scontrol path may load.
FORBIDDEN = (
    "spur.controller",
    "spur.state",
    "spur.config",
    "spur.plugins",
    "trio",
    "cyclopts",
    "pluggy",
    "marshmallow",
    "grpc",
    "pkg_resources",
    "importlib.metadata",
    "quart",
    "hypercorn",
    "prometheus_client",
    "google.protobuf",  # ~20 ms of a call: spur.rpc.lite encodes and decodes these commands' messages
)
# What the query commands do not load either (sbatch still builds its request through the domain).
QUERY_FORBIDDEN = ("dataclasses", "inspect", "spur.core.job", "spur.core.job_options", "typing", "socket")
# sbatch: its options and JobSpec, without the state's records, typing, socket, argparse, or what
# ``inspect`` pulls in (spur.lazymodule keeps ``inspect`` a stand-in).
SBATCH_FORBIDDEN = ("spur.core.job", "typing", "socket", "argparse", "ast", "tokenize", "dis")

_REPORT = "\nLOADED-MODULES "

_RUNNER = (
    "import sys\n"
    "from spur.cli.main import main\n"
    "rc = main(sys.argv[1:])\n"
    f"sys.stderr.write({_REPORT!r} + ' '.join(sorted(sys.modules)) + '\\n')\n"
    "sys.exit(rc)\n"
)


def run_cli(cluster: Cluster, *argv: str) -> tuple[subprocess.CompletedProcess, set[str]]:
    """Run ``argv`` (argv[0] is the Slurm command's name) as the console script does; (result, modules)."""
    proc = subprocess.run(
        [sys.executable, "-c", _RUNNER, *argv],
        cwd=cluster.root,
        env=cluster.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    head, _, modules = proc.stderr.partition(_REPORT)
    assert proc.returncode == 0, f"{argv} exited {proc.returncode}:\n{proc.stdout}\n{head}"
    return proc, set(modules.split())


def forbidden_in(modules: set[str], forbidden: tuple[str, ...] = FORBIDDEN) -> list[str]:
    return sorted(m for m in modules if any(m == f or m.startswith(f + ".") for f in forbidden))


@pytest.mark.timeout(120)
def test_slurm_commands_load_no_controller_trio_or_plugin_machinery(cluster: Cluster) -> None:
    submitted, modules = run_cli(cluster, "sbatch", "-J", "cold", "--wrap", "true")
    assert submitted.stdout == "Submitted batch job 1\n"
    assert "spur.rpc.lite" in modules  # the submission went through the lite wire codec
    assert forbidden_in(modules, FORBIDDEN + SBATCH_FORBIDDEN) == []

    queue, modules = run_cli(cluster, "squeue")
    lines = queue.stdout.splitlines()
    assert lines[0].split() == ["JOBID", "PARTITION", "NAME", "USER", "ST", "TIME", "NODES", "NODELIST(REASON)"]
    assert lines[1].split()[0] == "1" and lines[1].split()[2] == "cold"
    assert forbidden_in(modules, FORBIDDEN + QUERY_FORBIDDEN) == []

    shown, modules = run_cli(cluster, "scontrol", "show", "job", "1")
    assert shown.stdout.startswith("JobId=1 JobName=cold\n")
    assert forbidden_in(modules, FORBIDDEN + QUERY_FORBIDDEN) == []


def listed(cluster: Cluster) -> dict[str, str]:
    """``squeue -t all`` as job id -> "name STATE reason"."""
    out = run_cli(cluster, "squeue", "-h", "-t", "all", "-o", "%i %j %T %r")[0].stdout
    return dict(line.split(" ", 1) for line in out.splitlines())


@pytest.mark.timeout(120)
def test_listings_follow_every_change_of_a_job(cluster: Cluster) -> None:
    """The controller answers GetJobs from cached encodings: each change of a listed job shows."""
    run_cli(cluster, "sbatch", "-J", "first", "--hold", "--wrap", "true")
    run_cli(cluster, "sbatch", "-J", "other", "--wrap", "true")
    assert listed(cluster)["1"] == "first PENDING JobHeldUser"
    run_cli(cluster, "scontrol", "update", "JobId=1", "Name=renamed")
    assert listed(cluster)["1"] == "renamed PENDING JobHeldUser"
    run_cli(cluster, "scancel", "1")
    jobs = listed(cluster)
    assert jobs["1"].startswith("renamed CANCELLED") and jobs["2"].startswith("other PENDING")
    shown = run_cli(cluster, "scontrol", "show", "job", "1")[0].stdout
    assert "JobName=renamed" in shown and "JobState=CANCELLED" in shown
