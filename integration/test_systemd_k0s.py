"""spurd's k0s units on a real systemd 252 (integration/systemd_hosts.py): ``spur k8s up``/``down``/
``add-nodes``/``remove-nodes``, re-adoption across ``systemctl restart spurd``, the starter and the
drift sweep's stray stop, with every unit written into ``/etc/systemd/system`` and run by PID 1.

Three containers, ``sd1``..``sd3``, each with spurd enabled from ``contrib/systemd/spurd.service`` and
``[cluster]`` at its production defaults (``systemctl`` from PATH, units in /etc/systemd/system, k0s
at /usr/local/bin/k0s, data in /var/lib/k0s). That k0s is the fake (integration/doubles/fake_k0s.py)
behind a launcher that carries the double's settings: a unit run by systemd gets systemd's
environment, not spurd's. One spurctld with ``[cluster]`` enabled runs on the bridge address, with
the drift sweep on a shortened tick (``SPUR_TEST_K8S_DRIFT_LIMITS``), next to the Kubernetes API
double (drains for ``remove-nodes``). Every test leaves the cluster down and reset.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from integration.harness import wait_for
from integration.k0s_harness import CLUSTER_ON, DOUBLES, node_line
from integration.k8s_harness import kubeapi_process
from integration.mesh_hosts import BridgeCluster
from integration.systemd_hosts import SystemdHost, SystemdHosts, systemd_unavailable
from spur.k8s.cluster.drift_task import LIMITS_ENV
from spur.rpc.proto import k0s_pb2

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(systemd_unavailable() is not None, reason=f"real systemd hosts: {systemd_unavailable()}"),
]

UNIT = "spur-k0s.service"
UNIT_FILE = f"/etc/systemd/system/{UNIT}"
WANTS_LINK = f"/etc/systemd/system/multi-user.target.wants/{UNIT}"
#: one tick per half second, every node read each second; a second stop of a node would wait 10 min
LIMITS = {"tick": 0.5, "sweep_min": 1.0, "window": 600.0, "backoff_first": 600.0, "backoff_max": 3600.0}
SHOW = ("LoadState", "ActiveState", "SubState", "UnitFileState", "MainPID", "Result", "FragmentPath")


def k0s_launcher(host: SystemdHost, api_url: str) -> str:
    return (
        "#!/bin/sh\n"
        "# The k0s test double (a unit run by systemd gets systemd's environment, so its settings live here).\n"
        f"export FAKE_K0S_ROOT=/ FAKE_K0S_ADDRESS={host.ip} FAKE_K0S_JOIN_PORT=9443 FAKE_K0S_API_URL={api_url}\n"
        f'exec python3 {DOUBLES / "fake_k0s.py"} "$@"\n'
    )


def agent_conf(cluster: BridgeCluster, host: SystemdHost) -> str:
    return (
        'cluster_name = "itest"\n'
        "[agent]\n"
        f'controller = ["{cluster.address}"]\n'
        f'listen_addr = "{host.ip}:{host.net.agent_port}"\n'
        f'node_name = "{host.name}"\n'
        "[cluster]\n"
        "enabled = true\n"
    )


class Env:
    def __init__(self, cluster: BridgeCluster, hosts: SystemdHosts, api_url: str) -> None:
        self.cluster = cluster
        self.api_url = api_url
        self.hosts = {h.name: h for h in hosts.hosts}

    def spur(self, *args: str, check: bool = True, timeout: float = 180) -> subprocess.CompletedProcess:
        r = self.cluster.cli("spur", *args, check=False, timeout=timeout)
        if check and r.returncode != 0:
            raise AssertionError(f"spur {' '.join(args)} -> {r.returncode}\n{r.stdout}\n{r.stderr}")
        return r

    def up(self, *args: str) -> str:
        """``spur k8s up ARGS`` once the last ``down`` is through on every node (the CLI's own answer:
        "still stopping k0s on ...; retry shortly"); its output."""
        result: list[str] = []

        def attempt() -> bool:
            r = self.spur("k8s", "up", *args, check=False)
            if r.returncode != 0 and "still stopping" in r.stderr:
                return False
            if r.returncode != 0:
                raise AssertionError(f"spur k8s up {' '.join(args)} -> {r.returncode}\n{r.stdout}\n{r.stderr}")
            result.append(r.stdout)
            return True

        wait_for(attempt, timeout=120, interval=0.5, what="spur k8s up")
        return result[0]

    def status(self) -> str:
        return self.spur("k8s", "status").stdout

    def unit(self, name: str) -> dict[str, str]:
        """``systemctl show`` of spurd's k0s unit on host ``name`` (real systemd's answer)."""
        out = self.hosts[name].systemctl("show", UNIT, "-p", ",".join(SHOW)).stdout
        return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)

    def k0s(self, name: str) -> Any:
        """What spurd on ``name`` answers the controller about its k0s (K0sAgent.Status)."""
        import trio

        from spur.rpc.channel import open_channel
        from spur.rpc.stub import Stub

        host = self.hosts[name]
        service = k0s_pb2.DESCRIPTOR.services_by_name["K0sAgent"]

        async def call() -> Any:
            async with open_channel(f"{host.ip}:{host.net.agent_port}") as ch:
                return await Stub(ch, service).Status(k0s_pb2.K0sStatusRequest(), timeout=30)

        return trio.run(call)

    def exists(self, name: str, path: str) -> bool:
        return self.hosts[name].run("test", "-e", path, check=False).returncode == 0

    def joined(self, name: str) -> list[str]:
        out = self.hosts[name].run("cat", "/var/lib/k0s/fake/joined.json", check=False).stdout
        return sorted(j["role"] for j in json.loads(out)) if out else []

    def reset_all(self) -> None:
        """Leave the cluster down and every node's k0s reset (the next test starts clean)."""
        if "phase: down" not in self.status():
            self.spur("k8s", "down", "--reset")
        else:
            for name in self.hosts:
                self.hosts[name].systemctl("stop", UNIT, check=False)
        wait_for(lambda: "phase: down" in self.status(), timeout=60, what="cluster down")


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    root = tmp_path_factory.mktemp("sdk0s")
    hosts = SystemdHosts(root)
    os.environ[LIMITS_ENV] = json.dumps(LIMITS)  # read by the spurctld started below (its environment)
    cluster = BridgeCluster(
        root, conf_extra=CLUSTER_ON + f'[auth]\nbroker_socket = "{root / "auth.sock"}"\n'
    )
    try:
        with kubeapi_process(root) as api_url:
            hosts.create(3)
            cluster.listen_host = hosts.bridge_ip
            cluster.start_controller()
            os.environ.pop(LIMITS_ENV, None)
            for host in hosts.hosts:
                host.write("/usr/local/bin/k0s", k0s_launcher(host, api_url), "0755")
                host.install_spurd(agent_conf(cluster, host))
            cluster.wait_nodes("sd1", "sd2", "sd3")
            yield Env(cluster, hosts, api_url)
    finally:
        os.environ.pop(LIMITS_ENV, None)
        for host in hosts.hosts:
            (root / f"journal-{host.name}.log").write_text(host.journal("spurd") + host.journal(UNIT))
        cluster.stop()
        hosts.cleanup()


def test_up_writes_enables_and_starts_units_that_outlive_spurd_and_down_stops_and_disables(env: Env) -> None:
    try:
        assert "phase: ready" in env.up()
        st = env.status()
        assert node_line(st, "sd1")[1:4] == ["controller", "active", "enabled=true"]
        for name, role in (("sd1", "controller"), ("sd2", "worker"), ("sd3", "worker")):
            unit = env.unit(name)
            assert unit["LoadState"] == "loaded" and unit["FragmentPath"] == UNIT_FILE
            assert (unit["ActiveState"], unit["SubState"], unit["UnitFileState"]) == ("active", "running", "enabled")
            assert env.hosts[name].systemctl("is-enabled", UNIT).stdout.strip() == "enabled"
            assert env.exists(name, WANTS_LINK), "enable linked it into multi-user.target.wants"
            assert env.hosts[name].unit_property(UNIT, "Description") == f"k0s {role} (managed by spurd)"
            # the unit's main process is k0s itself, in the unit's own cgroup (not spurd's)
            cgroup = env.hosts[name].run("cat", f"/proc/{unit['MainPID']}/cgroup").stdout
            assert f"/system.slice/{UNIT}" in cgroup
        assert env.joined("sd1") == ["worker", "worker"]

        # systemctl restart spurd: k0s is its own unit and keeps running; the new spurd re-adopts it
        pid = env.unit("sd2")["MainPID"]
        env.hosts["sd2"].systemctl("restart", "spurd")
        assert env.unit("sd2")["MainPID"] == pid
        assert "re-adopted k0s worker unit /etc/systemd/system/spur-k0s.service: active" in env.hosts[
            "sd2"
        ].journal("spurd")
        st2 = env.k0s("sd2")
        assert (st2.component_state, st2.main_pid, st2.claimed) == ("active", int(pid), True)

        # plain down: every unit stopped and disabled, the unit file and k0s's data kept
        env.spur("k8s", "down")
        assert "phase: down" in env.status()
        for name in env.hosts:
            wait_for(lambda n=name: env.unit(n)["UnitFileState"] == "disabled", what=f"{name}'s unit disabled")
            unit = env.unit(name)
            assert (unit["LoadState"], unit["ActiveState"], unit["MainPID"]) == ("loaded", "inactive", "0")
            # KillMode=process sends SIGTERM to k0s alone, which exits 0: a clean stop, not a failure
            assert unit["Result"] == "success"
            enabled = env.hosts[name].systemctl("is-enabled", UNIT, check=False)
            assert (enabled.returncode, enabled.stdout.strip()) == (1, "disabled")
            active = env.hosts[name].systemctl("is-active", UNIT, check=False)
            assert (active.returncode, active.stdout.strip()) == (3, "inactive")
            assert not env.exists(name, WANTS_LINK) and env.exists(name, UNIT_FILE)
        assert env.exists("sd1", "/var/lib/k0s/pki/ca.fingerprint"), "down without --reset keeps k0s state"

        # down --reset from down: k0s reset, the unit file gone, systemd no longer knows the unit
        assert "phase: ready" in env.up()
        env.spur("k8s", "down", "--reset")
        for name in env.hosts:
            wait_for(lambda n=name: not env.exists(n, UNIT_FILE), what=f"{name}'s unit removed")
            wait_for(lambda n=name: env.unit(n)["LoadState"] == "not-found", what=f"{name}'s unit unloaded")
            assert not env.exists(name, "/var/lib/k0s/pki")
    finally:
        env.reset_all()


def test_the_starter_starts_a_ready_workers_stopped_unit_again(env: Env) -> None:
    try:
        assert "phase: ready" in env.up("--nodes", "sd[1-2]")
        before = env.unit("sd2")["MainPID"]
        env.hosts["sd2"].systemctl("stop", UNIT)  # an admin (or a crash it does not restart from) stops it
        assert env.unit("sd2")["ActiveState"] in ("inactive", "active")  # the leader may already be at it
        wait_for(
            lambda: env.unit("sd2")["ActiveState"] == "active" and env.unit("sd2")["MainPID"] not in ("0", before),
            timeout=30,
            what="sd2's k0s unit started again by the leader",
        )
        wait_for(lambda: node_line(env.status(), "sd2")[1:3] == ["worker", "active"], what="status shows sd2")
        assert env.unit("sd2")["UnitFileState"] == "enabled"
    finally:
        env.reset_all()


def test_add_nodes_and_remove_nodes_write_and_remove_real_units(env: Env) -> None:
    try:
        assert "phase: ready" in env.up("--nodes", "sd[1-2]")
        assert env.unit("sd3")["LoadState"] == "not-found"
        assert "added as worker(s): sd3" in env.spur("k8s", "add-nodes", "--nodes", "sd3").stdout
        wait_for(lambda: node_line(env.status(), "sd3")[1:3] == ["worker", "active"], timeout=60, what="sd3 joined")
        unit = env.unit("sd3")
        assert (unit["ActiveState"], unit["UnitFileState"]) == ("active", "enabled")
        assert env.joined("sd1") == ["worker", "worker"]

        from integration.kubeapi.kubelet import HttpKubelet

        kubelet = HttpKubelet(env.api_url)  # sd3's kubelet registers its Node (the drain has one to cordon)
        try:
            kubelet.add_node("sd3", {"cpu": "2", "memory": "4Gi"})
        finally:
            kubelet.close()
        r = env.spur("k8s", "remove-nodes", "--nodes", "sd3", timeout=300)
        assert "removed sd3: drained" in r.stdout
        assert "sd3" not in env.status()
        assert not env.exists("sd3", UNIT_FILE) and not env.exists("sd3", WANTS_LINK)
        assert env.unit("sd3")["LoadState"] == "not-found"
        assert not env.exists("sd3", "/var/lib/k0s/pki")
        assert env.unit("sd2")["ActiveState"] == "active", "the other worker is untouched"
    finally:
        env.reset_all()


def test_drift_stops_and_disables_a_stray_worker_and_never_a_foreign_unit(env: Env) -> None:
    """sd3's spurd is stopped during ``down`` (its k0s unit keeps running: systemd runs it, not spurd);
    it comes back outside the re-created scoped cluster and the sweep stops and disables the unit
    spurd wrote -- no ``k0s reset``, the unit file kept. Then a k0s unit that ``k0s install`` wrote
    (no spurd marker) runs on sd3: reported, never stopped."""
    sd3 = env.hosts["sd3"]
    log = env.cluster.root / "spurctld.log"
    try:
        assert "phase: ready" in env.up()
        sd3.systemctl("stop", "spurd")
        assert env.unit("sd3")["ActiveState"] == "active", "k0s is not spurd's child"
        env.spur("k8s", "down")
        wait_for(lambda: "phase: down" in env.status(), what="cluster down")
        wait_for(
            lambda: env.spur("k8s", "up", "--nodes", "sd[1-2]", "--no-wait", check=False).returncode == 0,
            timeout=60,
            what="up again once the teardown is through",
        )
        wait_for(lambda: "phase: ready" in env.status(), timeout=60, what="scoped cluster sd1,sd2 ready")
        sd3.systemctl("start", "spurd")
        env.cluster.wait_nodes("sd3")
        wait_for(lambda: "stopping the stray k0s worker on sd3" in log.read_text(), timeout=30, what="the stop")
        wait_for(
            lambda: (env.unit("sd3")["ActiveState"], env.unit("sd3")["UnitFileState"]) == ("inactive", "disabled"),
            timeout=30,
            what="sd3's unit stopped and disabled",
        )
        assert env.exists("sd3", UNIT_FILE) and env.exists("sd3", "/var/lib/k0s/pki/ca.fingerprint"), "not reset"
        assert env.unit("sd3")["Result"] == "success"
        wait_for(lambda: "stray: stopped 1x, 1 done" in env.status(), timeout=30, what="the stop confirmed")

        # a foreign k0s worker unit (what `k0s install worker` writes; no X-Spur-Owner) on sd3
        sd3.write(
            "/etc/systemd/system/k0sworker.service",
            "[Unit]\nDescription=k0s - Zero Friction Kubernetes\n[Service]\n"
            "ExecStart=/bin/sh -c 'exec sleep 600' k0s worker --token-file=/etc/k0s/token\n"
            "[Install]\nWantedBy=multi-user.target\n",
        )
        sd3.systemctl("daemon-reload")
        sd3.systemctl("enable", "--now", "k0sworker.service")
        wait_for(lambda: env.k0s("sd3").running, what="spurd sees the foreign unit running")
        st = env.k0s("sd3")
        assert (st.running_role, st.claimed, st.running_unit) == ("worker", False, "k0sworker.service")
        wait_for(
            lambda: "k8s drift on sd3: out_of_scope (recorded role: none; running: worker); reported only"
            in log.read_text(),
            timeout=30,
            what="the foreign worker reported",
        )
        assert sd3.unit_property("k0sworker.service", "ActiveState") == "active"
        assert sd3.systemctl("is-enabled", "k0sworker.service").stdout.strip() == "enabled"
        stops = [line for line in log.read_text().splitlines() if "stopping the stray k0s" in line]
        assert len(stops) == 1, stops
    finally:
        sd3.systemctl("disable", "--now", "k0sworker.service", check=False)
        sd3.run("rm", "-f", "/etc/systemd/system/k0sworker.service")
        sd3.systemctl("start", "spurd", check=False)
        env.reset_all()


def test_a_k0s_that_keeps_exiting_is_shown_with_systemds_reason(env: Env) -> None:
    """On a real systemd a ``Restart=always`` k0s that exits is never ``failed``: ``systemctl start``
    returns 0 after the fork and the unit waits as ``activating``/``auto-restart`` (the systemctl
    double reported ``failed`` and a failed start). spurd reads the exit from ``Result=`` and
    ``ExecMainStatus=`` and ``spur k8s status`` shows it; the leader does not start the unit over
    systemd's own restarts."""
    sd2 = env.hosts["sd2"]
    try:
        assert "phase: ready" in env.up("--nodes", "sd[1-2]")
        sd2.write("/etc/spur/k0s/join-token", "not a token\n", "0600")
        sd2.systemctl("restart", UNIT)  # exit 0: the fork succeeded
        wait_for(lambda: env.unit("sd2")["SubState"] == "auto-restart", timeout=30, what="k0s exited, restart due")
        unit = env.unit("sd2")
        assert (unit["ActiveState"], unit["Result"]) == ("activating", "exit-code")
        st = env.k0s("sd2")
        assert st.component_state == "activating"
        assert st.detail.startswith("k0s exited (exit-code, exit status 1); systemd restarts it (restart ")
        wait_for(lambda: "reason: k0s exited (exit-code, exit status 1)" in node_line_text(env.status(), "sd2"),
                 timeout=30, what="the reason in spur k8s status")
        assert "failed to decode join token" in sd2.journal(UNIT)
    finally:
        env.reset_all()


def node_line_text(status: str, name: str) -> str:
    return " ".join(node_line(status, name))
