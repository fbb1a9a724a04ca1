"""Membership drift end to end: a real spurctld (its drift sweep on a shortened tick, set through the
test-only SPUR_TEST_K8S_DRIFT_LIMITS), real spurd hosts on loopback with the k0s and systemctl
doubles, driven through the spur CLI.

- A node whose spurd was down during ``spur k8s down`` keeps its k0s worker running (systemd keeps
  the unit up); when it comes back outside the re-created scoped cluster, the sweep reports it and
  stops (and disables) its unit within two checks, without ``k0s reset``.
- A k0s controller running outside the cluster is only reported.
- ``[cluster] k8s_drift_correction = false`` makes it report-only, switched by ``scontrol reconfigure``.

The systemctl double keeps these runnable where no systemd container can run (no root, no rootfs); the
same unit operations against a real systemd 252 are integration/test_systemd_k0s.py.
"""

from __future__ import annotations

import json

import httpx
import pytest

from integration.harness import wait_for
from integration.k0s_harness import CLUSTER_ON, Env, node_line
from spur.k8s.cluster.drift_task import LIMITS_ENV
from spur.rpc.proto import k0s_pb2

pytestmark = pytest.mark.integration

#: one tick per half second, every node read each second; a second stop of a node would wait 10 min
LIMITS = {"tick": 0.5, "sweep_min": 1.0, "window": 600.0, "backoff_first": 600.0, "backoff_max": 3600.0}


def scrape(port: int) -> dict[str, float]:
    from prometheus_client.parser import text_string_to_metric_families

    values: dict[str, float] = {}
    for family in text_string_to_metric_families(httpx.get(f"http://127.0.0.1:{port}/metrics").text):
        for sample in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
            values[f"{sample.name}{{{labels}}}"] = sample.value
    return values


def k0s_state(host) -> k0s_pb2.K0sStatus:
    return host.k0s_call("Status", k0s_pb2.K0sStatusRequest())


def test_node_left_behind_by_down_is_stopped_and_an_outside_controller_only_reported(tmp_path, monkeypatch):
    monkeypatch.setenv(LIMITS_ENV, json.dumps(LIMITS))
    e = Env(tmp_path)
    try:
        e.hosts_up("d1", "d2", "d3", "d4")
        assert "phase: ready" in e.spur("k8s", "up", "--nodes", "d[1-3]").stdout
        left = e.hosts["d3"]
        assert k0s_state(left).component_state == "active"

        # d3's spurd is unreachable during down: its k0s worker keeps running
        left.proc.kill()
        e.spur("k8s", "down")
        wait_for(lambda: "phase: down" in e.status(), what="cluster down")
        wait_for(lambda: e.spur("k8s", "up", "--nodes", "d[1-2]", "--no-wait", check=False).returncode == 0,
                 timeout=60, what="up again once the teardown is through")
        wait_for(lambda: "phase: ready" in e.status(), timeout=60, what="scoped cluster d1,d2 ready")

        # d4 runs a k0s controller outside the cluster (reported, never stopped)
        e.hosts["d4"].k0s_call("Apply", k0s_pb2.K0sApplyRequest(role="controller", control_plane_count=1))

        # report-only first, switched by scontrol reconfigure (no restart)
        e.cluster.conf_extra = CLUSTER_ON + "k8s_drift_correction = false\n"
        e.cluster.write_conf()
        assert "cluster.k8s_drift_correction" in e.cluster.cli("scontrol", "reconfigure").stdout
        left.start()  # back, outside the cluster, worker still running
        e.cluster.wait_nodes("d3")
        wait_for(lambda: "stop waits: report-only" in e.status(), timeout=30, what="d3 reported, not stopped")
        assert k0s_state(left).running
        e.cluster.conf_extra = CLUSTER_ON
        e.cluster.write_conf()
        e.cluster.cli("scontrol", "reconfigure")
        log = e.cluster.root / "spurctld.log"
        wait_for(lambda: "stopping the stray k0s worker on d3" in log.read_text(), timeout=30,
                 what="the stray stopped")
        text = log.read_text()
        assert "k8s drift on d3: out_of_scope (recorded role: none; running: worker); a stray" in text
        # within two checks: the report and the stop come from the same (second) reading's tick
        def stopped_and_disabled() -> bool:
            st = k0s_state(left)
            return st.component_state == "inactive" and not st.enabled and not st.running

        wait_for(stopped_and_disabled, timeout=30, what="d3's unit stopped and disabled")
        assert (left.unit_dir / "spur-k0s.service").exists() and left.data_dir.exists(), "stop, not reset"

        wait_for(lambda: "k8s drift on d4: out_of_scope (recorded role: none; running: controller); reported only"
                 in log.read_text(), timeout=30, what="the outside controller reported")
        wait_for(lambda: "stray: stopped 1x, 1 done" in e.status(), timeout=30, what="the stop confirmed")
        status = e.status()
        outside = status.split("outside the cluster:")[1]
        assert "d4" in outside and "drift out_of_scope: recorded no role, running controller" in outside
        assert k0s_state(e.hosts["d4"]).running, "a controller outside the cluster is left alone"
        stops = [line for line in log.read_text().splitlines() if "stopping the stray k0s" in line]
        assert len(stops) == 1 and "worker on d3" in stops[0]
        metrics = scrape(e.cluster.metrics_port)
        assert metrics["spur_k8s_drift_detected_total{kind=out_of_scope}"] == 2
        assert metrics["spur_k8s_stray_stops_total{}"] == 1
        assert metrics.get("spur_k8s_stray_returns_total{}", 0) == 0
        assert "d1" in status and node_line(status, "d1")[1:3] == ["controller", "active"]
    finally:
        e.stop()


def test_agent_reports_a_foreign_k0s_unit_as_running_and_unclaimed(tmp_path):
    """What the sweep needs from spurd: whether k0s runs, which role, and whether the unit is
    spurd's own (a unit ``k0s install`` wrote is never claimed; spurd's own is)."""
    import subprocess

    from integration.doubles import fake_systemd
    from integration.harness import Cluster
    from integration.k0s_harness import DOUBLES, K0sHost, cleanup_hosts

    (tmp_path / "ctl").mkdir()
    cluster = Cluster(tmp_path / "ctl")
    cluster.start_controller()
    host = K0sHost(name="f1", root=tmp_path / "f1", cluster=cluster)
    try:
        host.start()
        assert not k0s_state(host).running
        (host.unit_dir / "k0sworker.service").write_text(
            "[Unit]\nDescription=k0s - Zero Friction Kubernetes\n[Service]\n"
            "ExecStart=/bin/sh -c 'exec sleep 600' k0s worker --token-file=/etc/k0s/token\n"
            "[Install]\nWantedBy=multi-user.target\n"
        )
        for args in (["daemon-reload"], ["start", "k0sworker.service"]):
            subprocess.run([str(DOUBLES / "bin/systemctl"), *args], env=host.env(), check=True)
        wait_for(lambda: k0s_state(host).running, timeout=20, what="the foreign unit running")
        st = k0s_state(host)
        assert (st.running_role, st.claimed, st.running_unit) == ("worker", False, "k0sworker.service")
        assert st.component_state == "absent"  # spurd's own unit is still absent
        subprocess.run([str(DOUBLES / "bin/systemctl"), "stop", "k0sworker.service"], env=host.env(), check=True)
        host.k0s_call("Apply", k0s_pb2.K0sApplyRequest(role="controller", control_plane_count=1))
        wait_for(lambda: k0s_state(host).running, timeout=20, what="spurd's controller running")
        st = k0s_state(host)
        assert (st.running_role, st.claimed, st.running_unit) == ("controller", True, "spur-k0s.service")
    finally:
        cleanup_hosts([host])
        fake_systemd.shutdown(host.systemd_root)
        cluster.stop()
