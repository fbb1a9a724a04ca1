"""Compute hosts as they really are: spurd as a systemd service (the shipped unit) on real systemd 252
hosts, jobs as real ``systemd-run`` units (integration/systemd_hosts.py).

One controller on this machine (on the bridge address) and two containers, ``sd1`` and ``sd2``, each
booted with systemd as PID 1, its own address, the test user ``alice`` (uid 2001) and spurd enabled
from ``contrib/systemd/spurd.service``. Jobs are submitted inside a host by alice, as on a login node.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from integration.harness import BIN, wait_for
from integration.mesh_hosts import BridgeCluster
from integration.systemd_hosts import UNITS, SystemdHost, SystemdHosts, systemd_unavailable

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(systemd_unavailable() is not None, reason=f"real systemd hosts: {systemd_unavailable()}"),
]

USER, UID = "alice", 2001


def agent_conf(cluster: BridgeCluster, host: SystemdHost) -> str:
    return (
        'cluster_name = "itest"\n'
        "[agent]\n"
        f'controller = ["{cluster.address}"]\n'
        f'listen_addr = "{host.ip}:{host.net.agent_port}"\n'
        f'node_name = "{host.name}"\n'
    )


class Env:
    def __init__(self, cluster: BridgeCluster, hosts: SystemdHosts) -> None:
        self.cluster = cluster
        self.hosts = hosts
        self.sd1, self.sd2 = hosts.hosts

    def sbatch(self, host: SystemdHost, script: str, *args: str) -> int:
        """Submit ``script`` as alice from ``host`` in the shared work directory; the job id."""
        path = self.hosts.work / f"job-{time.monotonic_ns()}.sh"
        path.write_text(script)
        path.chmod(0o755)
        out = host.run(
            "sh",
            "-c",
            'cd "$0" && exec "$@"',
            str(self.hosts.work),
            "env",
            f"SPUR_CONTROLLER={self.cluster.address}",
            str(BIN / "sbatch"),
            "--parsable",
            *args,
            str(path),
            user=USER,
        ).stdout
        return int(out.strip().split(";")[0])

    def unit(self, job_id: int) -> str:
        return f"spur-itest-job-{job_id}.service"


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    root = tmp_path_factory.mktemp("sdhosts")
    hosts = SystemdHosts(root)
    # node_timeout 15 s, not 4: spurd restarted by systemd (RestartSec=2s, then its start on a loaded
    # 2-core test machine) must not be declared DOWN, which would end the jobs the test follows.
    cluster = BridgeCluster(
        root, conf_extra=f'[auth]\nbroker_socket = "{root / "auth.sock"}"\n', node_timeout_secs=15
    )
    try:
        hosts.create(2)
        cluster.listen_host = hosts.bridge_ip
        cluster.start_controller()
        for host in hosts.hosts:
            host.add_user(USER, UID)
            host.install_spurd(agent_conf(cluster, host), "--kill-grace 2")
        cluster.wait_nodes("sd1", "sd2")
        yield Env(cluster, hosts)
    finally:
        for host in hosts.hosts:
            (root / f"journal-{host.name}.log").write_text(host.journal("spurd"))
        cluster.stop()
        hosts.cleanup()


def test_spurd_is_a_notify_service_from_the_shipped_unit(env: Env) -> None:
    for host in (env.sd1, env.sd2):
        assert host.unit_property("spurd", "Type") == "notify"
        assert host.unit_property("spurd", "ActiveState") == "active"
        assert host.unit_property("spurd", "FragmentPath") == "/etc/systemd/system/spurd.service"
        assert host.unit_property("spurd", "KillMode") == "process"
        assert host.systemctl("is-enabled", "spurd").stdout.strip() == "enabled"
        # READY=1 arrived from spurd itself (Type=notify would otherwise still be "activating").
        assert "serving on port" in host.unit_property("spurd", "StatusText")
    nodes = {n.name: n for n in env.cluster.nodes()}
    assert nodes["sd1"].address == env.sd1.ip and nodes["sd2"].address == env.sd2.ip


def test_a_job_is_a_unit_of_its_own_running_as_the_user_with_slurms_environment(env: Env) -> None:
    out = env.hosts.work / "env.out"
    job = env.sbatch(
        env.sd1,
        "#!/bin/bash\n"
        'echo "user=$(id -un) uid=$(id -u)"\n'
        'echo "job=$SLURM_JOB_ID cluster=$SLURM_CLUSTER_NAME nodelist=$SLURM_JOB_NODELIST"\n'
        'echo "cgroup=$(sed -n "s/^0:://p" /proc/self/cgroup)"\n'
        "sleep 3\n",
        "-w",
        "sd2",
        "-o",
        str(out),
    )
    unit = env.unit(job)
    wait_for(lambda: env.sd2.unit_property(unit, "ActiveState") == "active", what=f"{unit} active on sd2")
    assert f"spur job {job}" in env.sd2.unit_property(unit, "Description")
    assert env.sd1.unit_property(unit, "LoadState") == "not-found"  # only where the job runs
    env.cluster.wait_job(job, "COMPLETED")
    lines = dict(line.split("=", 1) for line in out.read_text().split() if "=" in line)
    assert lines["user"] == USER and lines["uid"] == str(UID)
    assert lines["job"] == str(job) and lines["cluster"] == "itest" and lines["nodelist"] == "sd2"
    assert lines["cgroup"] == f"/system.slice/{unit}"
    assert out.stat().st_uid == UID  # written as alice, where she asked
    # an ended unit is gone (collected when inactive; reset by spurd once read when failed).
    wait_for(lambda: env.sd2.unit_property(unit, "LoadState") == "not-found", what=f"{unit} collected")


@pytest.mark.parametrize(
    ("body", "state", "exit_code", "signal"),
    [("exit 3", "FAILED", 3, 0), ("kill -KILL $$", "FAILED", 0, 9), ("true", "COMPLETED", 0, 0)],
)
def test_exit_codes_and_signals(env: Env, body: str, state: str, exit_code: int, signal: int) -> None:
    job = env.sbatch(env.sd1, f"#!/bin/bash\n{body}\n", "-w", "sd1", "-o", "/dev/null")
    info = env.cluster.wait_job(job, state)
    assert (info.exit_code, info.signal) == (exit_code, signal)


def test_cancel_ends_every_process_of_the_job_even_strays(env: Env) -> None:
    marker = f"stray-{time.monotonic_ns()}"
    started = env.hosts.work / f"{marker}.started"
    job = env.sbatch(
        env.sd2,
        "#!/bin/bash\n"
        f"setsid bash -c 'trap \"\" TERM; exec -a {marker} sleep 1000' &\n"
        f"touch {started}\n"
        "sleep 1000\n",
        "-w",
        "sd2",
        "-o",
        "/dev/null",
    )
    wait_for(started.exists, what="the job to start its stray")
    wait_for(lambda: env.sd2.pids(marker), what="the stray (own session, ignores SIGTERM)")
    unit = env.unit(job)
    assert env.sd2.unit_property(unit, "ActiveState") == "active"
    env.sd1.run("env", f"SPUR_CONTROLLER={env.cluster.address}", str(BIN / "scancel"), str(job), user=USER)
    env.cluster.wait_job(job, "CANCELLED")
    # By the time the controller heard of the end, nothing of the job is left: not the stray that left
    # the process group and ignores SIGTERM, not the unit.
    assert env.sd2.pids(marker) == []
    assert env.sd2.unit_property(unit, "LoadState") == "not-found"


def _wait_flag_job(env: Env, host: SystemdHost, name: str) -> tuple[int, Path, Path]:
    flag = env.hosts.work / f"{name}.go"
    out = env.hosts.work / f"{name}.out"
    job = env.sbatch(
        host,
        "#!/bin/bash\n"
        f"echo started $$\n"
        f"while [ ! -e {flag} ]; do sleep 0.1; done\n"
        "echo done\n"
        "exit 7\n",
        "-w",
        host.name,
        "-o",
        str(out),
    )
    wait_for(lambda: out.exists() and "started" in out.read_text(), what=f"job {job} to start")
    return job, flag, out


def test_jobs_survive_systemctl_restart_spurd_and_are_reported_by_the_new_one(env: Env) -> None:
    host = env.sd1
    job, flag, out = _wait_flag_job(env, host, f"restart-{time.monotonic_ns()}")
    unit = env.unit(job)
    main_pid = host.unit_property(unit, "MainPID")
    spurd_before = host.spurd_pid()
    host.systemctl("restart", "spurd")  # Type=notify: returns once the new spurd re-adopted and serves
    assert host.spurd_pid() != spurd_before
    assert host.unit_property(unit, "ActiveState") == "active"
    assert host.unit_property(unit, "MainPID") == main_pid  # the same shim, untouched
    assert env.cluster.job(job).state == "RUNNING"
    flag.touch()
    info = env.cluster.wait_job(job, "FAILED")
    assert info.exit_code == 7 and "done" in out.read_text()
    assert "re-adopting" in host.journal("spurd")


def test_jobs_survive_kill_9_of_spurd_which_systemd_restarts(env: Env) -> None:
    host = env.sd2
    job, flag, out = _wait_flag_job(env, host, f"kill9-{time.monotonic_ns()}")
    unit = env.unit(job)
    restarts = int(host.unit_property("spurd", "NRestarts"))
    spurd_before = host.spurd_pid()
    host.kill(spurd_before)
    # Restart=on-failure (RestartSec=2s) brings a new spurd; Type=notify: active means READY=1 again.
    wait_for(
        lambda: int(host.unit_property("spurd", "NRestarts")) == restarts + 1
        and host.unit_property("spurd", "ActiveState") == "active",
        timeout=30,
        what="systemd to restart spurd",
    )
    assert host.spurd_pid() != spurd_before
    assert host.unit_property(unit, "ActiveState") == "active"
    flag.touch()
    info = env.cluster.wait_job(job, "FAILED")
    assert info.exit_code == 7 and "done" in out.read_text()


def test_the_agent_says_memory_limits_are_not_enforced_here(env: Env) -> None:
    """This host's cgroup v1 memory hierarchy is read-only inside the containers: job units carry
    MemoryMax= but the kernel does not apply it, and spurd says so instead of pretending."""
    job = env.sbatch(env.sd1, "#!/bin/bash\nsleep 2\n", "-w", "sd1", "--mem=64", "-o", "/dev/null")
    unit = env.unit(job)
    wait_for(lambda: env.sd1.unit_property(unit, "ActiveState") == "active", what=f"{unit} active")
    assert env.sd1.unit_property(unit, "MemoryMax") == str(64 * 1024 * 1024)
    env.cluster.wait_job(job, "COMPLETED")
    assert "job memory limits not enforced" in env.sd1.journal("spurd")


def test_spurctld_runs_as_a_notify_service_in_its_sandbox(env: Env) -> None:
    """The shipped spurctld.service on a real systemd: READY=1 after its state is loaded, the WAL under
    StateDirectory= with ProtectSystem=strict, a clean stop; a configuration error (exit 78) is not
    retried by Restart=on-failure."""
    host = env.sd2
    port, rest, metrics = 47817, 47820, 47822  # inside sd2's own network namespace: nothing else there
    conf = (
        'cluster_name = "unit"\n[controller]\n'
        f'listen_addr = "127.0.0.1:{port}"\nrest_addr = "127.0.0.1:{rest}"\nmetrics_addr = "127.0.0.1:{metrics}"\n'
    )
    host.write("/etc/spur/ctld.conf", conf)
    host.write("/etc/systemd/system/spurctld.service", (UNITS / "spurctld.service").read_text())
    host.write(
        "/etc/systemd/system/spurctld.service.d/prefix.conf",
        f"[Service]\nExecStart=\nExecStart={BIN / 'spurctld'} -D -f /etc/spur/ctld.conf\n",
    )
    host.systemctl("daemon-reload")
    try:
        host.systemctl("start", "spurctld")  # returns only after READY=1
        assert host.unit_property("spurctld", "ActiveState") == "active"
        assert host.unit_property("spurctld", "StatusText") == "serving"
        assert host.run("sh", "-c", "ls /var/lib/spur/raft").stdout.strip()  # the WAL, in StateDirectory
        # private WAL (UMask=0077), yet /var/lib/spur passable: spurd's jobs run from /var/lib/spur/agent
        modes = host.run("stat", "-c", "%a %n", "/var/lib/spur", "/var/lib/spur/raft").stdout.split("\n")
        assert modes[:2] == ["711 /var/lib/spur", "700 /var/lib/spur/raft"]
        sinfo = host.run("env", f"SPUR_CONTROLLER=127.0.0.1:{port}", str(BIN / "sinfo"), "-h", user=USER)
        assert "default" in sinfo.stdout
        host.systemctl("stop", "spurctld")
        assert host.unit_property("spurctld", "Result") == "success"
        host.write("/etc/spur/ctld.conf", conf + "no_such_key = 1\n")
        failed = host.systemctl("start", "spurctld", check=False)
        assert failed.returncode != 0
        wait_for(lambda: host.unit_property("spurctld", "ActiveState") == "failed", what="spurctld failed")
        assert host.unit_property("spurctld", "ExecMainStatus") == "78"
        assert host.unit_property("spurctld", "NRestarts") == "0"
        assert "no_such_key" in host.journal("spurctld")
    finally:
        host.systemctl("stop", "spurctld", check=False)


def test_scontrol_show_node_says_what_the_host_cannot_enforce(env: Env) -> None:
    out = env.sd1.run(
        "env", f"SPUR_CONTROLLER={env.cluster.address}", str(BIN / "scontrol"), "show", "node", "sd2", user=USER
    ).stdout
    assert "Comment=job memory limits not enforced: the cgroup v1 memory hierarchy is read-only" in out


def test_job_steps_are_units_of_their_own_cancelled_one_by_one_and_with_the_job(env: Env) -> None:
    """srun inside an sbatch allocation: each step runs in its own transient unit
    ``spur-itest-job-<id>-step-<step>.service`` beside the batch unit; a step's exit code is the
    step's; ``scancel <job>.<step>`` ends that step's unit alone; ``scancel <job>`` ends every step
    unit and the batch unit, strays included."""
    host, name = env.sd2, f"steps-{time.monotonic_ns()}"
    work = env.hosts.work
    out = work / f"{name}.out"
    srun = BIN / "srun"
    job = env.sbatch(
        env.sd1,
        "#!/bin/bash\n"
        f"{srun} bash -c 'echo \"step=$SLURM_STEP_ID cgroup=$(sed -n \"s/^0:://p\" /proc/self/cgroup)\"'\n"
        f"{srun} bash -c 'exit 5'\n"
        'echo "step1-srun=$?"\n'
        f"{srun} bash -c 'touch {work}/{name}.s2; exec -a {name}-s2 sleep 1000'\n"
        'echo "step2-srun=$?"\n'
        f"{srun} bash -c 'setsid bash -c \"trap \\\"\\\" TERM; exec -a {name}-stray sleep 1000\" & "
        f"touch {work}/{name}.s3; exec -a {name}-s3 sleep 1000'\n"
        'echo "not reached"\n',
        "-w",
        host.name,
        "-o",
        str(out),
    )
    batch = env.unit(job)

    def step_unit(step: int) -> str:
        return f"spur-itest-job-{job}-step-{step}.service"

    wait_for((work / f"{name}.s2").exists, what="step 2 to start")
    assert host.unit_property(step_unit(2), "ActiveState") == "active"
    assert host.unit_property(batch, "ActiveState") == "active"
    steps = {s.step_id: s for s in env.cluster.job(job).steps}
    assert steps[1].exit_code == 5 and steps[1].state == "FAILED"
    assert steps[0].state == "COMPLETED"
    text = out.read_text()
    assert f"step=0 cgroup=/system.slice/{step_unit(0)}" in text and "step1-srun=5" in text
    assert host.unit_property(step_unit(0), "LoadState") == "not-found"  # ended and collected

    # scancel <job>.2: that step's unit ends; the batch script goes on to step 3
    env.sd1.run("env", f"SPUR_CONTROLLER={env.cluster.address}", str(BIN / "scancel"), f"{job}.2", user=USER)
    wait_for((work / f"{name}.s3").exists, what="step 3 to start after step 2's cancel")
    assert host.unit_property(step_unit(2), "LoadState") == "not-found"
    assert host.pids(f"{name}-s2") == []
    assert env.cluster.job(job).state == "RUNNING"
    assert {s.step_id: s for s in env.cluster.job(job).steps}[2].state == "CANCELLED"
    wait_for(lambda: "step2-srun=143" in out.read_text(), what="srun of step 2 to end (SIGTERM: 128+15)")
    wait_for(lambda: host.pids(f"{name}-stray"), what="step 3's stray (own session, ignores SIGTERM)")
    assert host.unit_property(step_unit(3), "ActiveState") == "active"

    # scancel <job>: every step unit and the batch unit end, with everything in them
    env.sd1.run("env", f"SPUR_CONTROLLER={env.cluster.address}", str(BIN / "scancel"), str(job), user=USER)
    env.cluster.wait_job(job, "CANCELLED")
    wait_for(
        lambda: all(s.state != "RUNNING" for s in env.cluster.job(job).steps), what="every step ended"
    )
    for unit in (step_unit(3), batch):
        wait_for(lambda u=unit: host.unit_property(u, "LoadState") == "not-found", what=f"{unit} gone")
    assert host.pids(f"{name}-s3") == [] and host.pids(f"{name}-stray") == []
    assert "not reached" not in out.read_text()


def test_a_failed_unit_is_kept_until_spurd_has_read_how_it_ended(env: Env) -> None:
    """Job units are not ``--collect``ed: a unit that ends ``failed`` stays until spurd has recorded its
    ``Result=`` (``oom-kill`` is Slurm's OUT_OF_MEMORY; the host cannot enforce memory limits, so this
    test fails the unit another way: ``kill -9`` of its main process, the job's supervisor) and reset
    it. A unit that ends ``inactive`` goes at once (the other tests)."""
    host = env.sd1
    job, flag, out = _wait_flag_job(env, host, f"failed-{time.monotonic_ns()}")
    unit = env.unit(job)
    host.kill(int(host.unit_property(unit, "MainPID")))
    info = env.cluster.wait_job(job, "FAILED")
    assert "ended without recording an exit status" in info.reason or info.exit_code == 1
    assert host.unit_property(unit, "LoadState") == "not-found", "reset once read"
    assert f"{unit}: systemd ended the unit with Result=signal (ExecMainStatus=9)" in host.journal("spurd")
    flag.touch()
