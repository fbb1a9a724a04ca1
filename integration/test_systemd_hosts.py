"""Compute hosts as they really are: spurd as a systemd service (the shipped unit) on real systemd 252
hosts, jobs as real ``systemd-run`` units (integration/systemd_hosts.py).

One controller on this machine (on the bridge address) and two containers, ``sd1`` and ``sd2``, each
booted with systemd as PID 1, its own address, the test user ``alice`` (uid 2001) and spurd enabled
from ``contrib/systemd/spurd.service``. Jobs are submitted inside a host by alice, as on a login node.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from integration.harness import BIN
from integration.mesh_hosts import BridgeCluster
from integration.systemd_hosts import SystemdHost, SystemdHosts, systemd_unavailable

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
    cluster = BridgeCluster(root, conf_extra=f'[auth]\nbroker_socket = "{root / "auth.sock"}"\n')
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
