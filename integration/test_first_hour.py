"""A new user's first hour, against a real controller and agent (one node: 2 CPUs, 4000 MB, no GPUs).

The table: for every command, --help, --usage, --version, a bad option, an impossible request and an
unknown id, with the exit code and first line a user sees (Slurm 22.05's, from
shared/reference/slurm-22.05-outputs.txt and impossible-requests-22.05.txt, where Slurm defines one).
Then the srun/salloc cases that wait: srun must say why and end cleanly on Ctrl-C, within a timeout.
"""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import time
from pathlib import Path

import pytest

from integration.harness import BIN, Cluster, wait_for

pytestmark = pytest.mark.integration

VERSION = re.compile(r"^slurm 22\.05\.\d+ \(spur \S+\)$")


def first_line(proc: subprocess.CompletedProcess) -> str:
    text = proc.stdout if proc.stdout.strip() else proc.stderr
    return text.splitlines()[0] if text.strip() else ""


COMMANDS = ["sbatch", "srun", "salloc", "squeue", "scancel", "sinfo", "sacct", "scontrol"]

# (argv, exit code, first line: exact text, or a compiled pattern)
TABLE: list[tuple[list[str], int, object]] = []
for _cmd in COMMANDS:
    TABLE += [
        ([_cmd, "--help"], 0, re.compile(rf"^Usage: {_cmd} ")),
        ([_cmd, "--usage"], 0, re.compile(rf"^Usage: {_cmd} ")),
        ([_cmd, "--version"], 0, VERSION),
        ([_cmd, "-V"], 0, VERSION),
    ]
TABLE += [
    # bad options: GNU getopt's words; sbatch, srun and salloc exit 255, the others 1 (as Slurm's do)
    (["sbatch", "--bogus", "x.sh"], 255, "sbatch: unrecognized option '--bogus'"),
    (["srun", "--bogus", "true"], 255, "srun: unrecognized option '--bogus'"),
    (["salloc", "--bogus"], 255, "salloc: unrecognized option '--bogus'"),
    (["squeue", "--bogus"], 1, "squeue: unrecognized option '--bogus'"),
    (["scancel", "--bogus"], 1, "scancel: unrecognized option '--bogus'"),
    (["sinfo", "--bogus"], 1, "sinfo: unrecognized option '--bogus'"),
    (["sacct", "--bogus"], 1, "sacct: unrecognized option '--bogus'"),
    (["scontrol", "--bogus"], 1, "scontrol: unrecognized option '--bogus'"),
    (["sbatch", "-t", "abc", "--wrap", "true"], 255, "sbatch: error: Invalid --time specification"),
    # impossible requests (impossible-requests-22.05.txt)
    (
        ["sbatch", "--mem=100G", "--wrap", "true"],
        1,
        "sbatch: error: Memory specification can not be satisfied",
    ),
    (
        ["sbatch", "-w", "nosuchnode", "--wrap", "true"],
        1,
        "sbatch: error: Batch job submission failed: Invalid node name specified",
    ),
    (
        ["sbatch", "--gres=gpu:1", "--wrap", "true"],
        1,
        "sbatch: error: Batch job submission failed: Requested node configuration is not available",
    ),
    (
        ["sbatch", "-p", "nosuchpart", "--wrap", "true"],
        1,
        "sbatch: error: invalid partition specified: nosuchpart",
    ),
    (
        ["sbatch", "--test-only", "--mem=100G", "--wrap", "true"],
        1,
        "sbatch: error: Memory specification can not be satisfied",
    ),
    (["srun", "--mem=100G", "true"], 1, "srun: error: Memory specification can not be satisfied"),
    (
        ["srun", "--test-only", "--gres=gpu:1", "true"],
        1,
        "srun: error: Unable to allocate resources: Requested node configuration is not available",
    ),
    (["salloc", "--mem=100G", "true"], 1, "salloc: error: Memory specification can not be satisfied"),
    (
        ["salloc", "-w", "nosuchnode", "true"],
        1,
        "salloc: error: Job submit/allocate failed: Invalid node name specified",
    ),
    (["sinfo", "-t", "bogus"], 1, 'sinfo: error: Bad state string: "bogus"'),
    (["squeue", "-t", "BOGUS"], 1, "squeue: error: Invalid job state specified: BOGUS"),
    # unknown ids
    (["scontrol", "show", "job", "999999"], 1, "slurm_load_jobs error: Invalid job id specified"),
    (["scancel", "999999"], 0, ""),
    (["squeue", "-j", "999999"], 1, "slurm_load_jobs error: Invalid job id specified"),
    (["scontrol", "show", "node", "nosuch"], 1, "Node nosuch not found"),
    (["sacct", "-n", "-j", "999999"], 0, ""),
    # spur itself: never a traceback
    (["spur"], 0, "Usage: spur COMMAND"),
    (["spur", "--help"], 0, "Usage: spur COMMAND"),
    (["spur", "-h"], 0, "Usage: spur COMMAND"),
    (["spur", "help"], 0, "Usage: spur COMMAND"),
    (["spur", "--version"], 0, VERSION),
    (["spur", "bogus"], 1, "spur: error: unknown command 'bogus' (see 'spur --help')"),
    (
        ["spur", "qeue"],
        1,
        "spur: error: unknown command 'qeue'; did you mean 'spur queue'? (see 'spur --help')",
    ),
    (["spur", "show", "--help"], 0, re.compile(r"^Usage: scontrol ")),
    (["spur", "help", "submit"], 0, re.compile(r"^Usage: sbatch ")),
    (["spur", "submit", "--help"], 0, re.compile(r"^Usage: sbatch ")),
    (["spur", "doctor", "--help"], 0, "Usage: spur doctor"),
]


@pytest.mark.parametrize(("argv", "code", "first"), TABLE, ids=[" ".join(t[0]) for t in TABLE])
def test_cli_table(one_node: Cluster, tmp_path: Path, argv, code, first) -> None:
    before = set(one_node.jobs())
    proc = one_node.cli(*argv, cwd=tmp_path, check=False, timeout=30)
    line = first_line(proc)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == code, (proc.stdout, proc.stderr)
    if isinstance(first, re.Pattern):
        assert first.match(line), line
    else:
        assert line == first, (proc.stdout, proc.stderr)
    if code != 0 or "--help" in argv or "--usage" in argv or "-V" in argv or "--version" in argv:
        assert set(one_node.jobs()) == before  # nothing submitted, allocated or changed


def test_memory_refusal_is_slurms_two_lines(one_node: Cluster, tmp_path: Path) -> None:
    proc = one_node.cli("sbatch", "--mem=100G", "--wrap", "true", cwd=tmp_path, check=False)
    assert proc.stderr.splitlines() == [
        "sbatch: error: Memory specification can not be satisfied",
        "sbatch: error: Batch job submission failed: Requested node configuration is not available",
    ]


def test_sinfo_bad_state_lists_the_valid_ones(one_node: Cluster) -> None:
    proc = one_node.cli("sinfo", "-t", "bogus", check=False)
    assert proc.stdout == ""
    assert proc.stderr.splitlines()[1].startswith("sinfo: error: valid states: unknown,down,idle,allocated,")


def test_beyond_the_partition_pends_with_slurms_reasons(one_node: Cluster, tmp_path: Path) -> None:
    ids = {}
    for flag, reason in (
        ("-c64", "PartitionConfig"),
        ("-n8", "PartitionConfig"),
        ("-N2", "PartitionNodeLimit"),
    ):
        out = one_node.cli("sbatch", "--parsable", flag, "--wrap", "true", cwd=tmp_path)
        ids[int(out.stdout.strip())] = reason
    try:
        for job_id, reason in ids.items():
            row = one_node.cli("squeue", "-h", "-j", str(job_id), "-o", "%t %R").stdout.strip()
            assert row == f"PD ({reason})"
        # and they stay so after scheduler passes
        time.sleep(0)  # (no sleep needed: the reason is set at submission and kept by every pass)
        wait_for(lambda: all(one_node.job(j).reason == r for j, r in ids.items()), timeout=10, what="reasons")
    finally:
        one_node.cli("scancel", *map(str, ids))


def test_sbatch_quiet_prints_nothing(one_node: Cluster, tmp_path: Path) -> None:
    proc = one_node.cli("sbatch", "-Q", "-H", "--wrap", "true", "-o", "/dev/null", cwd=tmp_path)
    assert (proc.stdout, proc.stderr) == ("", "")
    held = [j for j in one_node.jobs().values() if j.state == "PENDING" and j.reason == "JobHeldUser"]
    one_node.cli("scancel", *[str(j.job_id) for j in held])


def test_script_directive_error_exits_like_the_command_line(one_node: Cluster, tmp_path: Path) -> None:
    (tmp_path / "bad.sh").write_text("#!/bin/sh\n#SBATCH -t abc\ntrue\n")
    proc = one_node.cli("sbatch", "bad.sh", cwd=tmp_path, check=False)
    assert proc.returncode == 255
    assert proc.stderr.startswith("sbatch: error: Invalid --time specification")


def test_sinfo_reason_timestamp_is_when_it_was_set(one_node: Cluster) -> None:
    one_node.cli("scontrol", "update", "NodeName=node1", "State=DRAIN", "Reason=maintenance")
    try:
        out = one_node.cli("sinfo", "-R", "-h", "-o", "%E|%H").stdout.strip()
        reason, stamp = out.split("|")
        assert reason == "maintenance"
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d", stamp), stamp
    finally:
        one_node.cli("scontrol", "update", "NodeName=node1", "State=RESUME")
        one_node.wait_nodes("node1")


def test_sacctmgr_does_not_crash(one_node: Cluster) -> None:
    proc = one_node.cli("sacctmgr", "list", "accounts", check=False)
    assert "Traceback" not in proc.stderr and "NameError" not in proc.stderr


def interrupt_once_waiting(argv: list[str], cluster: Cluster, cwd: Path) -> tuple[list[str], int]:
    """Run ``argv``; once it says it is queued and waiting, send SIGINT. Returns its stderr lines and exit
    code (the wait and the end each bounded)."""
    proc = subprocess.Popen(argv, cwd=cwd, env=cluster.env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = b""
    try:
        deadline = time.monotonic() + 30
        while b"queued and waiting for resources\n" not in err:
            left = deadline - time.monotonic()
            assert left > 0, err
            ready, _, _ = select.select([proc.stderr], [], [], left)
            if ready:
                chunk = os.read(proc.stderr.fileno(), 4096)
                assert chunk, f"{Path(argv[0]).name} ended early: {err!r}"
                err += chunk
        proc.send_signal(signal.SIGINT)
        _out, rest = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return (err + rest).decode().splitlines(), proc.returncode


def test_srun_on_an_idle_node_says_nothing_about_waiting(one_node: Cluster, tmp_path: Path) -> None:
    """Slurm's srun is silent when the allocation is granted at once; so is ours."""
    proc = subprocess.run(
        [str(BIN / "srun"), "hostname"], cwd=tmp_path, env=one_node.env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() and "queued and waiting" not in proc.stderr, proc.stderr


def test_srun_waits_with_slurms_words_and_ctrl_c_revokes(one_node: Cluster, tmp_path: Path) -> None:
    """srun -n3 on a 2-CPU node: Slurm's two waiting lines, then SIGINT cancels the job and srun ends."""
    lines, returncode = interrupt_once_waiting([str(BIN / "srun"), "-n3", "hostname"], one_node, tmp_path)
    job_id = int(re.search(r"job (\d+) queued", lines[1]).group(1))
    assert lines == [
        "srun: Requested partition configuration not available now",
        f"srun: job {job_id} queued and waiting for resources",
        f"srun: Job allocation {job_id} has been revoked",
        f"srun: Force Terminated JobId={job_id}",
    ]
    assert returncode == 1
    assert one_node.wait_job(job_id, "CANCELLED").state == "CANCELLED"


def test_salloc_meta_options_allocate_nothing(one_node: Cluster) -> None:
    before = set(one_node.jobs())
    for flag in ("--usage", "--version", "-V", "--help"):
        proc = one_node.cli("salloc", flag, timeout=20)
        assert proc.stdout and proc.returncode == 0
    assert set(one_node.jobs()) == before


def test_doctor_names_the_controller_and_warns_about_another_slurm(one_node: Cluster, tmp_path: Path) -> None:
    other = tmp_path / "otherslurm"
    other.mkdir()
    fake = other / "sbatch"
    fake.write_text("#!/bin/sh\necho slurm-wlm 22.05.8\n")
    fake.chmod(0o755)
    env = {**one_node.env, "PATH": f"{other}:{one_node.env['PATH']}"}
    proc = subprocess.run([str(BIN / "spur"), "doctor"], env=env, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert f"controller: {one_node.address} ($SPUR_CONTROLLER)" in out
    assert "config file: none found" in out
    assert f"warning: 'sbatch' runs {fake}, which is not Spur's" in out
    assert "'squeue' runs" not in out


def test_doctor_without_a_controller_says_so(tmp_path: Path) -> None:
    from integration.harness import free_port

    env = {**os.environ, "SPUR_CONTROLLER": f"127.0.0.1:{free_port()}", "PATH": f"{BIN}:{os.environ['PATH']}"}
    env.pop("SPUR_CONF", None)
    proc = subprocess.run([str(BIN / "spur"), "doctor"], env=env, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 1
    assert "warning: no controller answers at 127.0.0.1:" in proc.stdout


def test_completion_offers_job_ids_partitions_and_nodes(one_node: Cluster, tmp_path: Path) -> None:
    job_id = int(one_node.cli("sbatch", "--parsable", "-H", "--wrap", "true", cwd=tmp_path).stdout.strip())
    env = one_node.env

    def complete(*words: str) -> list[str]:
        script = (
            "source <(spur completion bash)\n"
            f"COMP_WORDS=({' '.join(repr(w) for w in words)}); COMP_CWORD={len(words) - 1}\n"
            "_spur_complete; printf '%s\\n' \"${COMPREPLY[@]}\""
        )
        out = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        return out.stdout.split()

    try:
        assert str(job_id) in complete("scancel", "")
        assert str(job_id) in complete("spur", "show", "job", "")
        assert complete("sbatch", "-p", "") == ["default"]
        assert complete("srun", "--nodelist", "=", "no") == ["node1"]
        assert complete("scontrol", "show", "node", "") == ["node1"]
        assert complete("sinfo", "--partition", "d") == ["default"]
    finally:
        one_node.cli("scancel", str(job_id))


def test_salloc_waits_with_slurms_words_and_ctrl_c_revokes(one_node: Cluster, tmp_path: Path) -> None:
    lines, returncode = interrupt_once_waiting([str(BIN / "salloc"), "-N2", "true"], one_node, tmp_path)
    job_id = int(re.search(r"allocation (\d+)", lines[1]).group(1))
    assert lines == [
        "salloc: Requested partition configuration not available now",
        f"salloc: Pending job allocation {job_id}",
        f"salloc: job {job_id} queued and waiting for resources",
        f"salloc: Job allocation {job_id} has been revoked.",
    ]
    assert returncode == 1
    assert one_node.wait_job(job_id, "CANCELLED").state == "CANCELLED"
