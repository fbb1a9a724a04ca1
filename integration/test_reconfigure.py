"""`scontrol reconfigure` does what docs/configuration.md's "Takes effect" column says.

Real spurctld processes on loopback; the file is changed on disk, `scontrol reconfigure` is run, and
`scontrol show config` (the answering controller's own view) shows which keys took effect.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import httpx
import pytest

from integration.ha_harness import HACluster
from integration.harness import BIN, Cluster, Proc, wait_for


def show_config(env: dict[str, str], address: str) -> dict[str, str]:
    """`scontrol show config` from the controller at ``address`` as {key: value}."""
    out = scontrol(env, address, "show", "config").stdout
    rows = {}
    for line in out.splitlines()[1:]:
        key, sep, value = line.partition(" = ")
        if sep:
            rows[key.strip()] = value
    return rows


def scontrol(env: dict[str, str], address: str, *args: str) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [str(BIN / "scontrol"), *args],
        env={**env, "SPUR_CONTROLLER": address},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, f"scontrol {args} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    return proc


def submit_status(c: Cluster, body_bytes: int) -> int:
    """HTTP status of a REST job submission whose body is ``body_bytes`` long; the body has no ``job``
    object, so within the size limit it is refused with 400 and nothing is submitted."""
    body = b'{"script": "' + b"x" * (body_bytes - 14) + b'"}'
    r = httpx.post(
        f"http://127.0.0.1:{c.rest_port}/slurm/v0.0.38/job/submit",
        content=body,
        headers={"Content-Type": "application/json", "X-SLURM-USER-NAME": "root"},
        timeout=30,
    )
    return r.status_code


def edit(path: Path, *pairs: tuple[str, str]) -> None:
    """Replace each ``old`` line fragment by ``new`` in the file (each must be there once)."""
    text = path.read_text()
    for old, new in pairs:
        assert text.count(old) == 1, (old, text)
        text = text.replace(old, new)
    path.write_text(text)


@pytest.fixture
def single(tmp_path):
    c = Cluster(tmp_path, conf_extra="[priority]\nweight_age = 1000\n[rest]\nmax_body_bytes = 1048576\n")
    c.start_controller()
    try:
        yield c
    finally:
        c.stop()


def test_live_keys_apply_on_reconfigure_restart_keys_on_restart(single: Cluster) -> None:
    conf = single.root / "spur.conf"
    before = show_config(single.env, single.address)
    assert before["SchedulerParameters"].endswith(",sched_interval=0.5")
    assert before["SlurmdTimeout"] == "4 sec"
    assert before["KillWait"] == "2 sec"
    assert before["PriorityWeightAge"] == "1000"
    assert before["ClusterName"] == "itest"
    assert before["SLURM_CONF"] == str(conf)
    single.wait_rest()
    assert submit_status(single, 8000) == 400  # under max_body_bytes = 1048576 (a bad job: 400)

    edit(
        conf,
        ('cluster_name = "itest"', 'cluster_name = "renamed"'),  # restart spurctld and spurd
        ("node_timeout_secs = 4", "node_timeout_secs = 9"),  # live
        ("kill_grace_secs = 2", "kill_grace_secs = 3"),  # live on the controller (cancels)
        ("interval_secs = 0.5", "interval_secs = 0.25\nmax_job_test = 7"),  # live
        ("weight_age = 1000", "weight_age = 5"),  # live
        ("max_body_bytes = 1048576", "max_body_bytes = 4096"),  # restart spurctld
    )
    with conf.open("a") as f:
        f.write('\n[[partitions]]\nname = "gpu"\nnodes = "ALL"\n')  # live
    out = scontrol(single.env, single.address, "reconfigure").stdout
    assert out.splitlines() == [
        "reconfigured by controller 1: scheduler, partitions, controller.node_timeouts, "
        "accounting.enforce, priority, cluster.k8s_drift_correction",
        "not applied until a restart: cluster_name (restart spurctld and spurd), "
        "rest.max_body_bytes (restart spurctld)",
    ]
    after = show_config(single.env, single.address)
    assert after["SchedulerParameters"] == "bf_max_job_test=7,sched_interval=0.25"
    assert after["SlurmdTimeout"] == "9 sec"
    assert after["KillWait"] == "3 sec"
    assert after["PriorityWeightAge"] == "5"
    assert after["ClusterName"] == "itest"  # not live
    partitions = scontrol(single.env, single.address, "show", "partition", "gpu").stdout
    assert partitions.startswith("PartitionName=gpu")
    assert submit_status(single, 8000) == 400  # rest.max_body_bytes waits for a restart

    # A changed scheduler plugin is refused as a whole: nothing else of that file is applied.
    good = conf.read_text()
    edit(conf, ("max_job_test = 7", 'max_job_test = 8\nplugin = "other"'))
    refused = subprocess.run(
        [str(BIN / "scontrol"), "reconfigure"], env=single.env, capture_output=True, text=True, timeout=60
    )
    assert refused.returncode != 0
    assert "scheduler.plugin cannot change while running; restart spurctld" in refused.stderr
    assert show_config(single.env, single.address)["SchedulerParameters"].startswith("bf_max_job_test=7,")

    # A bad file changes nothing and names the problem.
    conf.write_text(good)
    edit(conf, ("node_timeout_secs = 9", "node_timeout_secs = -1"))
    bad = subprocess.run(
        [str(BIN / "scontrol"), "reconfigure"], env=single.env, capture_output=True, text=True, timeout=60
    )
    assert bad.returncode != 0 and "node_timeout_secs" in bad.stderr
    assert show_config(single.env, single.address)["SlurmdTimeout"] == "9 sec"
    conf.write_text(good)

    # The restart keys take effect when spurctld restarts with the same file.
    assert single.controller is not None
    argv = list(single.controller.argv)
    single.controller.kill()
    single.controller = Proc(argv, single.root / "spurctld2.log", single.env).start()
    wait_for(single._controller_up, timeout=20, what="spurctld to answer again")
    restarted = wait_for(
        lambda: (rows := show_config(single.env, single.address)).get("ClusterName") == "renamed" and rows,
        timeout=20,
        what="the restarted controller to show its config",
    )
    assert restarted["SlurmdTimeout"] == "9 sec"
    assert restarted["SchedulerParameters"] == "bf_max_job_test=7,sched_interval=0.25"
    single.wait_rest()
    assert submit_status(single, 8000) == 413  # now over max_body_bytes = 4096
    again = scontrol(single.env, single.address, "reconfigure").stdout
    assert "not applied until a restart" not in again


# The rows that come from the shared file (the others name each member's own paths).
SHARED_ROWS = ("SchedulerParameters", "SlurmdTimeout", "KillWait", "PriorityWeightAge", "SchedulerType")


@pytest.fixture
def ha(tmp_path):
    c = HACluster(tmp_path, size=3, conf_extra="max_job_test = 50\n")
    c.start()
    try:
        yield c
    finally:
        c.stop()


def test_reconfigure_on_a_follower_runs_on_the_leader_and_a_restarted_follower_converges(ha: HACluster) -> None:
    leader = ha.wait_leader()
    follower, other = (m.node_id for m in ha.members if m.node_id != leader)
    fa, la = ha.member(follower).address, ha.member(leader).address
    assert show_config(ha.env, fa)["SchedulerParameters"] == "bf_max_job_test=50,sched_interval=0.2"

    # One file for every controller (as a Kubernetes Secret is): change a live key everywhere.
    ha.conf_extra = 'max_job_test = 9\n[priority]\nweight_age = 7\n[[partitions]]\nname = "gpu"\nnodes = "ALL"\n'
    for m in ha.members:
        ha.write_conf(m)
    out = scontrol(ha.env, fa, "reconfigure").stdout.splitlines()
    assert out[0] == (
        f"reconfigure runs on the leader only: controller {follower} forwarded it to controller {leader} "
        f"(leader); controller {follower} keeps the configuration it read until it restarts or leads"
    )
    assert out[1].startswith(f"reconfigured by controller {leader}: scheduler, partitions")
    assert len(out) == 2

    on_leader = show_config(ha.env, la)
    assert on_leader["SchedulerParameters"] == "bf_max_job_test=9,sched_interval=0.2"
    assert on_leader["PriorityWeightAge"] == "7"
    assert show_config(ha.env, fa)["SchedulerParameters"] == "bf_max_job_test=50,sched_interval=0.2"

    # The leader fails: both followers still hold the old settings, so whichever takes over shows that
    # a controller re-reads the file when it starts to lead (partitions included: nothing reverts).
    ha.kill(leader)
    new_leader = ha.wait_leader(among=[follower, other])
    stale = follower if new_leader == other else other
    na = ha.member(new_leader).address
    on_new_leader = show_config(ha.env, na)
    assert on_new_leader["SchedulerParameters"] == "bf_max_job_test=9,sched_interval=0.2"
    assert scontrol(ha.env, na, "show", "partition", "gpu").stdout.startswith("PartitionName=gpu")
    sa = ha.member(stale).address
    assert show_config(ha.env, sa)["SchedulerParameters"] == "bf_max_job_test=50,sched_interval=0.2"

    # A follower killed and restarted reads the same file and agrees with the leader; so does the old
    # leader, back as a follower.
    ha.start_member(leader)
    ha.wait_converged()
    ha.kill(stale)
    ha.start_member(stale)
    ha.wait_converged()
    for node_id in (stale, leader):
        rows = show_config(ha.env, ha.member(node_id).address)
        assert {k: rows[k] for k in SHARED_ROWS} == {k: on_new_leader[k] for k in SHARED_ROWS}, node_id
    assert show_config(ha.env, ha.member(ha.wait_leader()).address)["PriorityWeightAge"] == "7"
