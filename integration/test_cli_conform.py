"""Slurm 22.05 forms against a real spurctld + spurd: ``scontrol -o``, the date line of ``sinfo -l``,
``sacct -j ID.STEP`` and ``sshare -U``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from integration.harness import Cluster

pytestmark = pytest.mark.integration

DATE = re.compile(r"(Mon|Tue|Wed|Thu|Fri|Sat|Sun) [A-Z][a-z]{2} \d\d \d\d:\d\d:\d\d \d{4}")


@pytest.fixture(scope="module")
def one_node(tmp_path_factory):
    c = Cluster(
        tmp_path_factory.mktemp("cliconform"), conf_extra='[accounting]\nenforce = ["associations"]\n'
    )
    c.start_controller()
    try:
        c.cli("sacctmgr", "-i", "add", "account", "physics")
        c.cli("sacctmgr", "-i", "add", "user", "root", "account=physics")
        c.start_agent("node1", cpus=2, memory_mb=4000)
        c.wait_nodes("node1")
        yield c
    finally:
        c.stop()


def _multi_to_tokens(text: str) -> list[list[str]]:
    return [record.split() for record in text.split("\n\n") if record.strip()]


def test_scontrol_oneliner_prints_one_line_per_record(one_node: Cluster, tmp_path: Path) -> None:
    ids = [
        one_node.cli("sbatch", "--parsable", "-H", "-A", "physics", "--wrap", "true", cwd=tmp_path).stdout.strip()
        for _ in range(2)
    ]
    try:
        for args in (["show", "job"], ["show", "node"], ["show", "partition"], ["show", "job", ids[0]]):
            multi = one_node.cli("scontrol", *args).stdout
            for one in (one_node.cli("scontrol", "-o", *args).stdout, one_node.cli("scontrol", *args, "--oneliner").stdout):
                lines = one.splitlines()
                assert [line.split() for line in lines] == _multi_to_tokens(multi), args
                assert not one.endswith("\n\n")
        jobs = one_node.cli("scontrol", "-o", "show", "job").stdout.splitlines()
        assert [re.match(r"JobId=(\d+) ", line).group(1) for line in jobs] == ids
        assert jobs[0].endswith(" Power= ")
        assert one_node.cli("scontrol", "-o", "show", "node").stdout.startswith(
            "NodeName=node1 Arch=x86_64 CoresPerSocket="
        )
        # show config has no one-line form in Slurm: -o leaves it as it is.
        config = one_node.cli("scontrol", "-o", "show", "config").stdout.splitlines()
        assert config[0].startswith("Configuration data as of ") and len(config) > 2
    finally:
        one_node.cli("scancel", *ids, check=False)


def test_sinfo_long_starts_with_the_date(one_node: Cluster) -> None:
    lines = one_node.cli("sinfo", "-N", "-l").stdout.splitlines()
    assert DATE.fullmatch(lines[0]), lines[0]
    assert lines[1].split() == [
        "NODELIST", "NODES", "PARTITION", "STATE", "CPUS", "S:C:T", "MEMORY", "TMP_DISK", "WEIGHT", "AVAIL_FE", "REASON",
    ]  # fmt: skip
    assert lines[2].split()[:4] == ["node1", "1", "default*", "idle"]
    partitions = one_node.cli("sinfo", "-l").stdout.splitlines()
    assert DATE.fullmatch(partitions[0]) and partitions[1].split()[:3] == ["PARTITION", "AVAIL", "TIMELIMIT"]
    assert one_node.cli("sinfo", "-l", "-h").stdout.splitlines()[0].split()[0] == "default*"
    assert not DATE.match(one_node.cli("sinfo", "-N").stdout)


def test_sacct_step_ids_select_only_those_steps(one_node: Cluster, tmp_path: Path) -> None:
    job_id = one_node.cli(
        "sbatch", "--parsable", "-A", "physics", "--wrap", "srun -n1 true; srun -n1 true", cwd=tmp_path
    ).stdout.strip()
    assert one_node.wait_job(int(job_id), "COMPLETED", "FAILED", timeout=60).state == "COMPLETED"

    def ids(*selectors: str) -> list[str]:
        out = one_node.cli("sacct", "-n", "-P", "-o", "JobID", "-j", ",".join(selectors)).stdout
        return out.splitlines()

    j = job_id
    assert ids(j) == [j, f"{j}.batch", f"{j}.0", f"{j}.1"]
    assert ids(f"{j}.1") == [f"{j}.1"]
    assert ids(f"{j}.batch") == [f"{j}.batch"]
    assert ids(f"{j}.batch", f"{j}.0") == [f"{j}.batch", f"{j}.0"]
    assert ids(f"{j}.extern") == []  # this job has no extern step
    assert ids(j, f"{j}.1") == [j, f"{j}.batch", f"{j}.0", f"{j}.1"]
    assert one_node.cli("sacct", "-X", "-n", "-P", "-o", "JobID", "-j", f"{j}.0").stdout == ""
    bad = one_node.cli("sacct", "-j", f"{j}.nope", check=False)
    assert bad.returncode == 1 and bad.stderr.strip() == f"sacct: fatal: Bad job/step specified: {j}.nope"


def test_sshare_users_lists_only_the_callers_user_associations(one_node: Cluster) -> None:
    full = [line.split()[:2] for line in one_node.cli("sshare").stdout.splitlines()[2:]]
    assert ["physics", "root"] in full and ["physics", "1"] in full  # the account lines are there
    users = one_node.cli("sshare", "-U").stdout.splitlines()
    assert users[0].split()[:2] == ["Account", "User"]
    assert [line.split()[:2] for line in users[2:]] == [["root", "root"], ["physics", "root"]]
    assert all(not line.startswith(" ") for line in users[2:])
    parsable = one_node.cli("sshare", "-U", "-P", "-n", "-o", "Account,User").stdout.splitlines()
    assert parsable == ["root|root", "physics|root"]
