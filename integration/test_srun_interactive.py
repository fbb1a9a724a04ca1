"""srun outside an allocation and salloc, as a user at a terminal meets them: output, labels, exit
codes, waiting, Ctrl-C and SIGTERM while the job runs, a cancelled allocation, and no event loop loaded
(both follow the job on the blocking client: spur.cli.srun_follow, spur.cli.salloc)."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from integration.harness import BIN, Cluster

pytestmark = pytest.mark.timeout(180)


def _srun(cluster: Cluster, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "srun"), *args], cwd=cwd, env=cluster.env, capture_output=True, text=True, timeout=60
    )


def _read_until(proc: subprocess.Popen[bytes], stream: str, marker: bytes, seen: bytearray) -> None:
    """Read ``proc``'s ``stream`` (stdout/stderr) into ``seen`` until ``marker`` shows (bounded)."""
    pipe = getattr(proc, stream)
    deadline = time.monotonic() + 30
    while marker not in seen:
        left = deadline - time.monotonic()
        assert left > 0, bytes(seen)
        ready, _, _ = select.select([pipe], [], [], left)
        if ready:
            chunk = os.read(pipe.fileno(), 4096)
            assert chunk, f"srun ended before {marker!r}: {bytes(seen)!r}"
            seen += chunk


def test_labels_exit_codes_and_signals(one_node: Cluster, tmp_path: Path) -> None:
    labelled = _srun(one_node, tmp_path, "-l", "-n2", "sh", "-c", "echo hi; exit 3")
    assert labelled.returncode == 3, labelled.stderr
    assert sorted(labelled.stdout.splitlines()) == ["0: hi", "1: hi"]
    killed = _srun(one_node, tmp_path, "sh", "-c", "kill -KILL $$")
    assert killed.returncode == 128 + signal.SIGKILL, killed.stderr
    err = _srun(one_node, tmp_path, "sh", "-c", "echo to-stderr >&2")
    assert (err.returncode, err.stdout, err.stderr) == (0, "", "to-stderr\n")


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_while_the_job_runs_cancels_it(one_node: Cluster, tmp_path: Path, signum: int) -> None:
    proc = subprocess.Popen(
        [str(BIN / "srun"), "-J", f"sig{signum}", "sh", "-c", "echo ready; exec sleep 120"],
        cwd=tmp_path,
        env=one_node.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        _read_until(proc, "stdout", b"ready\n", bytearray())
        proc.send_signal(signum)
        _out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    job_id = int(
        one_node.cli("squeue", "-h", "-t", "all", "-o", "%i", "-n", f"sig{signum}").stdout.split()[-1]
    )
    assert proc.returncode == 1
    assert err.decode().splitlines() == [
        "srun: forcing job termination",
        f"srun: Force Terminated JobId={job_id}",
    ]
    assert one_node.wait_job(job_id, "CANCELLED").state == "CANCELLED"


def test_a_waiting_srun_says_so_then_runs_when_cpus_free(one_node: Cluster, tmp_path: Path) -> None:
    holder = int(one_node.cli("sbatch", "--parsable", "-n2", "--wrap", "sleep 120").stdout)
    one_node.wait_job(holder, "RUNNING")
    proc = subprocess.Popen(
        [str(BIN / "srun"), "-n2", "-J", "waiter", "echo", "ran"],
        cwd=tmp_path,
        env=one_node.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        seen = bytearray()
        _read_until(proc, "stderr", b"queued and waiting for resources\n", seen)
        one_node.cli("scancel", str(holder))
        out, rest = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    job_id = int(one_node.cli("squeue", "-h", "-t", "all", "-o", "%i", "-n", "waiter").stdout.split()[-1])
    assert proc.returncode == 0
    assert out == b"ran\nran\n"
    assert (bytes(seen) + rest).decode().splitlines() == [
        f"srun: job {job_id} queued and waiting for resources",
        f"srun: job {job_id} has been allocated resources",
    ]


def _stderr_lines_of(cluster: Cluster, cwd: Path, argv: list[str]) -> list[str]:
    """Run the command ``argv`` in-process under a fresh interpreter; its stderr lines, the last one
    ``<exit code> <whether trio was imported>``."""
    code = (
        f"import sys; from spur.cli.main import main; rc = main({argv!r}); "
        "print(rc, 'trio' in sys.modules, file=sys.stderr)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, env=cluster.env, capture_output=True, text=True, timeout=60
    )
    return out.stderr.splitlines()


def test_srun_loads_no_event_loop(one_node: Cluster, tmp_path: Path) -> None:
    """The interactive path runs on the blocking client: Trio is never imported."""
    assert _stderr_lines_of(one_node, tmp_path, ["srun", "true"]) == ["0 False"]


def test_an_unreachable_controller_is_one_clear_error(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, never listening: refused
        env = dict(os.environ, SPUR_CONTROLLER=f"127.0.0.1:{port}", SPUR_AUTH_TOKEN="unused")
        env.pop("SPUR_CONF", None)
        out = subprocess.run(
            [str(BIN / "srun"), "true"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
        )
    assert out.returncode == 1
    lines = out.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("srun: error: Unable to allocate resources: "), out.stderr
    assert f"127.0.0.1:{port}" in lines[0] and "Connection refused" in lines[0]


# ---------------------------------------------------------------- salloc (the same blocking follow)


def test_salloc_runs_the_command_inside_the_allocation(one_node: Cluster, tmp_path: Path) -> None:
    out = subprocess.run(
        [str(BIN / "salloc"), "-n1", "-J", "alloc-rc", "sh", "-c", 'echo "job=$SLURM_JOB_ID"; exit 5'],
        cwd=tmp_path,
        env=one_node.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    job_id = int(out.stdout.strip().removeprefix("job="))
    assert out.returncode == 5
    assert out.stderr.splitlines() == [
        f"salloc: Granted job allocation {job_id}",
        f"salloc: Relinquishing job allocation {job_id}",
    ]
    assert one_node.wait_job(job_id, "FAILED").exit_code == 5


def _salloc_running(one_node: Cluster, tmp_path: Path, name: str) -> tuple[subprocess.Popen[bytes], int]:
    proc = subprocess.Popen(
        [str(BIN / "salloc"), "-n1", "-J", name, "sh", "-c", 'echo "job=$SLURM_JOB_ID"; exec sleep 120'],
        cwd=tmp_path,
        env=one_node.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    seen = bytearray()
    _read_until(proc, "stdout", b"\n", seen)
    return proc, int(seen.decode().strip().removeprefix("job="))


def test_salloc_says_revoked_and_ends_the_command_when_the_job_is_cancelled(
    one_node: Cluster, tmp_path: Path
) -> None:
    proc, job_id = _salloc_running(one_node, tmp_path, "alloc-revoked")
    try:
        one_node.cli("scancel", str(job_id))
        _out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 128 + signal.SIGTERM
    assert err.decode().splitlines() == [
        f"salloc: Granted job allocation {job_id}",
        f"salloc: Job allocation {job_id} has been revoked.",
    ]
    assert one_node.wait_job(job_id, "CANCELLED").state == "CANCELLED"


def test_salloc_on_sigterm_ends_the_command_and_releases_the_allocation(
    one_node: Cluster, tmp_path: Path
) -> None:
    proc, job_id = _salloc_running(one_node, tmp_path, "alloc-term")
    try:
        proc.send_signal(signal.SIGINT)  # left to the command, which a terminal would have sent it too
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 128 + signal.SIGTERM
    assert err.decode().splitlines() == [
        f"salloc: Granted job allocation {job_id}",
        f"salloc: Relinquishing job allocation {job_id}",
    ]
    assert one_node.wait_job(job_id, "FAILED").state == "FAILED"


def test_salloc_loads_no_event_loop(one_node: Cluster, tmp_path: Path) -> None:
    assert _stderr_lines_of(one_node, tmp_path, ["salloc", "-n1", "true"])[-1] == "0 False"
