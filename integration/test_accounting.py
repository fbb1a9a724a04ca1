"""Accounting against a real spurctld (+ spurd): sacctmgr, limits held by the scheduler, sshare/sprio.

The sacctmgr session of ``shared/reference/sacctmgr-22.05.txt`` (real Slurm 22.05) is replayed and
its output and exit codes compared, with the cluster name of the harness (``itest``) for Slurm's
``anchor``.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from integration.harness import BIN, Cluster, wait_for

REFERENCE = Path(__file__).resolve().parents[2] / "shared" / "reference" / "sacctmgr-22.05.txt"
ENFORCE = '[accounting]\nenforce = ["associations", "limits", "qos"]\n'


def _reference_blocks() -> list[tuple[str, str, int]]:
    """(command, output, exit code) of each ``$`` block of the reference session."""
    text = REFERENCE.read_text()
    blocks = []
    for m in re.finditer(r"^\$ ([^\n]*)\n(.*?)^\[exit (\d+)\]$", text, re.S | re.M):
        blocks.append((m.group(1), m.group(2), int(m.group(3))))
    return blocks


def _local(text: str) -> str:
    """The reference's cluster name ``anchor`` as the harness's ``itest`` (same column widths)."""
    return text.replace("anchor    ", "itest     ").replace("anchor", "itest")


def _sacctmgr(cluster: Cluster, command: str) -> subprocess.CompletedProcess:
    argv = shlex.split(command)
    return cluster.cli(*argv, check=False)


@pytest.mark.skipif(not REFERENCE.exists(), reason="shared/reference not present")
def test_reference_sacctmgr_session_replays_with_the_same_output_and_exit_codes(cluster: Cluster):
    blocks = _reference_blocks()
    assert len(blocks) > 20
    for command, expected, code in blocks:
        if command.startswith("sacctmgr show account"):
            # The reference cluster already had a "research" account holding user root.
            if (
                _sacctmgr(
                    cluster, "sacctmgr -i add account research Description=research Organization=lab"
                ).returncode
                == 0
            ):
                assert _sacctmgr(cluster, "sacctmgr -i add user root Account=research").returncode == 0
        got = _sacctmgr(cluster, command.replace("physics dept", "'physics dept'"))
        out = got.stdout + got.stderr
        if "grptres=cpu=abc" in command:
            # Slurm 22.05 half-accepts this (warns, then "modifies"); Spur refuses it, changing nothing.
            assert got.returncode == 1
            assert "Invalid count 'abc' for TRES 'cpu'" in got.stderr
            continue
        if "controlhost" in command:
            assert got.returncode == 0
            assert out.splitlines()[1] == f"itest|127.0.0.1|{cluster.port}"
            continue
        if command == "sacctmgr show tres":
            # Spur also lists gres/gpu (id 1001, as slurmdbd numbers gres TRES).
            assert out == _local(expected) + "    gres             gpu   1001 \n"
            continue
        assert (out, got.returncode) == (_local(expected), code), command


def test_seed_grptres_command_shows_back_as_slurm_prints_it(cluster: Cluster):
    cluster.cli("sacctmgr", "-i", "add", "account", "myaccount")
    got = cluster.cli(
        "sacctmgr", "modify", "account", "name=myaccount", "set", "grptres=cpu=16,mem=32768,gres/gpu=8"
    )
    assert got.stdout.splitlines() == [
        " Modified account associations...",
        "  C = itest      A = myaccount of root",
    ]
    shown = cluster.cli(
        "sacctmgr", "show", "assoc", "where", "account=myaccount", "format=account,user,grptres%30", "-P"
    )
    assert shown.stdout.splitlines() == ["Account|User|GrpTRES", "myaccount||cpu=16,gres/gpu=8,mem=32G"]
    table = cluster.cli("sacctmgr", "show", "assoc", "where", "account=myaccount", "format=account,grptres")
    assert table.stdout.splitlines()[2] == " myaccount cpu=16,gres/+ "


def test_bad_input_is_refused_and_changes_nothing(cluster: Cluster):
    cluster.cli("sacctmgr", "-i", "add", "account", "physics")
    cluster.cli("sacctmgr", "-i", "add", "account", "theory", "parent=physics")
    before = cluster.cli("sacctmgr", "show", "assoc", "-P").stdout
    cases = {
        "sacctmgr -i modify account physics set grptres=cpu=abc": "Invalid count 'abc'",
        "sacctmgr -i modify account physics set grptres=frob=2": "Invalid TRES name 'frob'",
        "sacctmgr -i modify account nosuch set grptres=cpu=2": " Nothing modified",
        "sacctmgr -i delete account physics": "still has account theory",
        "sacctmgr -i add account x parent=nosuch": "Parent account 'nosuch' doesn't exist",
        "sacctmgr -i add account y frob=1": " Unknown option: frob",
        "sacctmgr -i modify account physics set parent=theory": "would make a loop",
        "sacctmgr frob account": "Invalid keyword: frob",
        "sacctmgr -i modify user root set adminlevel=Boss": "Invalid AdminLevel 'Boss'",
    }
    for command, message in cases.items():
        got = _sacctmgr(cluster, command)
        assert got.returncode == 1, command
        assert message in got.stdout + got.stderr, (command, got.stdout, got.stderr)
    cluster.cli("sacctmgr", "-i", "add", "qos", "low")
    cluster.cli("sacctmgr", "-i", "add", "qos", "high", "preempt=low")
    loop = _sacctmgr(cluster, "sacctmgr -i modify qos low set preempt=high")
    assert loop.returncode == 1 and "preemption loop (low -> high -> low)" in loop.stdout
    assert cluster.cli("sacctmgr", "show", "qos", "format=name,preempt", "-P", "-n").stdout.splitlines() == [
        "normal|",
        "low|",
        "high|low",
    ]
    assert cluster.cli("sacctmgr", "show", "assoc", "-P").stdout == before


def _as_user(cluster: Cluster, user: str, *args: str) -> subprocess.CompletedProcess:
    """Run a CLI command as another local user (the tests run as root)."""
    import pwd

    entry = pwd.getpwnam(user)
    return subprocess.run(
        [
            "setpriv",
            f"--reuid={entry.pw_uid}",
            f"--regid={entry.pw_gid}",
            "--clear-groups",
            str(BIN / args[0]),
            *args[1:],
        ],
        env={**cluster.env, "HOME": "/"},
        cwd="/",
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.skipif(os.geteuid() != 0, reason="switching users needs root")
def test_only_administrators_change_accounting_and_users_may_show(cluster: Cluster):
    refused = _as_user(cluster, "nobody", "sacctmgr", "-i", "add", "account", "physics")
    assert refused.returncode == 1
    assert refused.stdout == " Your user doesn't have privilege to perform this action\n"
    shown = _as_user(cluster, "nobody", "sacctmgr", "show", "account", "-P", "-n")
    assert shown.returncode == 0 and shown.stdout == "root|default root account|root\n"
    cluster.cli("sacctmgr", "-i", "add", "account", "ops")
    cluster.cli("sacctmgr", "-i", "add", "user", "daemon", "account=ops", "adminlevel=Administrator")
    allowed = _as_user(cluster, "daemon", "sacctmgr", "-i", "add", "account", "physics")
    assert allowed.returncode == 0, allowed.stdout + allowed.stderr
    assert allowed.stdout.splitlines()[:2] == [" Adding Account(s)", "  physics"]
    cluster.cli("sacctmgr", "-i", "modify", "user", "daemon", "set", "adminlevel=None")
    again = _as_user(cluster, "daemon", "sacctmgr", "-i", "add", "account", "chemistry")
    assert again.returncode == 1


@pytest.fixture
def enforcing(tmp_path):
    c = Cluster(tmp_path, conf_extra=ENFORCE)
    c.start_controller()
    try:
        yield c
    finally:
        c.stop()


def _reason(cluster: Cluster, job_id: str) -> list[str]:
    return cluster.cli("squeue", "-h", "-j", job_id, "-o", "%t %r").stdout.split()


def test_job_pends_on_grp_cpu_limit_and_runs_once_it_is_raised(enforcing: Cluster, tmp_path: Path):
    c = enforcing
    c.start_agent("node1", cpus=4)
    c.wait_nodes("node1")
    c.cli("sacctmgr", "-i", "add", "account", "myaccount")
    c.cli("sacctmgr", "-i", "add", "user", "root", "account=myaccount")
    c.cli("sacctmgr", "-i", "modify", "account", "myaccount", "set", "grptres=cpu=1")
    job = c.cli(
        "sbatch", "--parsable", "-A", "myaccount", "-c", "2", "--wrap", "true", cwd=tmp_path
    ).stdout.strip()
    wait_for(lambda: _reason(c, job) == ["PD", "AssocGrpCpuLimit"], what="job pending on AssocGrpCpuLimit")
    assert (
        c.cli(
            "sacctmgr", "show", "assoc", "where", "account=myaccount", "user=", "format=grptres", "-n", "-P"
        ).stdout
        == "cpu=1\n"
    )
    c.cli("sacctmgr", "-i", "modify", "account", "myaccount", "set", "grptres=cpu=4")
    c.wait_job(int(job), "COMPLETED")


def test_running_jobs_count_against_the_limit_of_later_jobs(enforcing: Cluster, tmp_path: Path):
    c = enforcing
    c.start_agent("node1", cpus=4)
    c.wait_nodes("node1")
    c.cli("sacctmgr", "-i", "add", "account", "physics", "grpjobs=1")
    c.cli("sacctmgr", "-i", "add", "user", "root", "account=physics")
    first = c.cli("sbatch", "--parsable", "-A", "physics", "--wrap", "sleep 300", cwd=tmp_path).stdout.strip()
    second = c.cli("sbatch", "--parsable", "-A", "physics", "--wrap", "true", cwd=tmp_path).stdout.strip()
    c.wait_job(int(first), "RUNNING")
    wait_for(lambda: _reason(c, second) == ["PD", "AssocGrpJobsLimit"], what="AssocGrpJobsLimit")
    c.cli("scancel", first)
    c.wait_job(int(second), "COMPLETED")


def test_submit_is_checked_against_associations_qos_and_submit_limits(enforcing: Cluster, tmp_path: Path):
    c = enforcing
    c.cli("sacctmgr", "-i", "add", "account", "physics")
    c.cli("sacctmgr", "-i", "add", "user", "root", "account=physics", "maxsubmitjobs=1")

    def sbatch(*args: str) -> subprocess.CompletedProcess:
        return c.cli("sbatch", "--parsable", "--hold", *args, "--wrap", "true", cwd=tmp_path, check=False)

    unknown = sbatch("-A", "nosuch")
    assert unknown.returncode == 1
    assert unknown.stderr.strip() == (
        "sbatch: error: Batch job submission failed: "
        "Invalid account or account/partition combination specified"
    )
    bad_qos = sbatch("-A", "physics", "--qos", "nosuch")
    assert bad_qos.returncode == 1 and bad_qos.stderr.strip().endswith("Invalid qos specification")
    default = sbatch()  # root's default account is root
    assert default.returncode == 0
    assert c.cli("squeue", "-h", "-j", default.stdout.strip(), "-o", "%a %q").stdout.split() == [
        "root",
        "normal",
    ]
    assert sbatch("-A", "physics").returncode == 0
    over = sbatch("-A", "physics")
    assert over.returncode == 1
    assert over.stderr.strip().endswith(
        "Job violates accounting/QOS policy (job submit limit, user's size and/or time limits)"
    )


def test_sprio_and_sshare_layouts(tmp_path: Path):
    extra = "[priority]\nweight_age = 1000\nweight_fairshare = 10000\nweight_qos = 1000\n"
    c = Cluster(tmp_path, conf_extra=ENFORCE + extra)
    c.start_controller()
    try:
        c.cli("sacctmgr", "-i", "add", "account", "physics")
        c.cli("sacctmgr", "-i", "add", "user", "root", "account=physics")
        job = c.cli("sbatch", "--parsable", "-A", "physics", "--wrap", "true", cwd=tmp_path).stdout.strip()
        out = c.cli("sprio").stdout.splitlines()
        assert out[0] == (
            "          JOBID PARTITION   PRIORITY       SITE        AGE  FAIRSHARE    JOBSIZE  PARTITION        QOS "
        )
        fields = out[2].split()
        assert fields[0] == job and fields[1] == "default"
        assert fields[5] == "10000"  # no usage yet: fair-share factor 1.0 times its weight
        assert int(fields[2]) >= 10000
        longer = c.cli("sprio", "-l", "-h").stdout.split()
        assert longer[:4] == [job, "default", "root", "physics"]
        shares = c.cli("sshare", "-a").stdout.splitlines()
        assert shares[0] == (
            "Account                    User  RawShares  NormShares    RawUsage  EffectvUsage  FairShare "
        )
        assert [line.split()[:2] for line in shares[2:]] == [
            ["root", "1.000000"],
            ["root", "root"],
            ["physics", "1"],
            ["physics", "root"],
        ]
        parsable = c.cli("sshare", "-P", "-n", "-a", "-o", "Account,User,FairShare").stdout.splitlines()
        assert parsable[-1] == "  physics|root|1.000000"
    finally:
        c.stop()


def test_followers_forward_accounting_calls_and_entities_survive_failover(tmp_path: Path):
    from integration.ha_harness import HACluster

    ha = HACluster(tmp_path, size=3)
    ha.start()
    try:
        leader = ha.wait_leader()
        follower = next(m for m in ha.members if m.node_id != leader)

        def sacctmgr(address: str, *args: str) -> subprocess.CompletedProcess:
            env = {**ha.env, "SPUR_CONTROLLER": address}
            return subprocess.run(
                [str(BIN / "sacctmgr"), *args], env=env, capture_output=True, text=True, timeout=60
            )

        added = sacctmgr(follower.address, "-i", "add", "account", "physics", "grptres=cpu=8")
        assert added.returncode == 0, added.stdout + added.stderr
        assert added.stdout.splitlines()[:2] == [" Adding Account(s)", "  physics"]
        shown = sacctmgr(
            follower.address,
            "show",
            "assoc",
            "where",
            "account=physics",
            "format=account,grptres",
            "-P",
            "-n",
        )
        assert shown.stdout == "physics|cpu=8\n"
        ha.kill(leader)
        survivors = [m.node_id for m in ha.members if m.node_id != leader]
        new_leader = ha.wait_leader(among=survivors)
        address = ha.member(new_leader).address
        again = sacctmgr(
            address, "show", "assoc", "where", "account=physics", "format=account,grptres", "-P", "-n"
        )
        assert again.stdout == "physics|cpu=8\n"
        refused = sacctmgr(address, "-i", "add", "account", "physics")
        assert (refused.returncode, refused.stdout) == (1, " Nothing new added.\n")
    finally:
        ha.stop()
