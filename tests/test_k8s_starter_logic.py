"""The starter's pure rules (spur.k8s.cluster.starter) and how the reconcile decision applies them:
one test per numbered rule of the starter's docstring, then the decision per cluster phase."""

from __future__ import annotations

import pytest

from spur.k8s.cluster import reconcile as r
from spur.k8s.cluster import starter as s
from spur.state import k8s_cluster as k

# ---------------------------------------------------------------------------- the rules


def test_rule1_never_a_second_start_while_one_is_in_flight():
    st = s.start_sent(s.IDLE, 10.0)
    assert st.in_flight_since == 10.0
    for state in ("pending", "absent", "inactive", "failed"):
        assert not s.start_due(st, state, 10.0 + 899.0)
    # readings during the start change nothing (the agent is busy starting it)
    assert s.observed(st, "failed", "k0s unit failed (exit-code)", 20.0) == (st, False)
    assert s.observed(st, "active", "", 20.0) == (st, False)
    # a node coming back from down keeps its start in flight
    assert s.back_from_down(st).in_flight_since == 10.0


def test_rule2_a_failed_start_keeps_its_reason_and_waits():
    st = s.start_failed(s.start_sent(s.IDLE, 100.0), "node w1: a k0s worker needs a join token", 105.0)
    assert st == s.StartState(failures=1, reason="node w1: a k0s worker needs a join token", retry_at=165.0)
    assert not s.start_due(st, "pending", 164.9)
    assert s.start_due(st, "pending", 165.0)
    assert s.START_TIMEOUT == 900.0


def test_rule3_an_accepted_start_that_does_not_bring_the_node_up_is_a_failure():
    sent = s.start_sent(s.IDLE, 0.0)
    # the unit failed at once: a failure, counted
    st, counted = s.start_answered(sent, "failed", "k0s unit failed (exit-code)", 1.0)
    assert counted and st.failures == 1 and st.reason == "k0s unit failed (exit-code)" and st.retry_at == 61.0
    # accepted, still coming up: open until a reading tells
    st, counted = s.start_answered(sent, "activating", "", 1.0)
    assert not counted and st.open_attempt and st.in_flight_since is None
    assert s.observed(st, "starting", "", 3.0) == (st, False)
    assert s.observed(st, "unreachable", "agent not reachable", 3.0) == (st, False)
    failed, counted = s.observed(st, "inactive", "", 5.0)
    assert counted and failed.failures == 1 and failed.reason == "k0s is inactive after the start"
    assert failed.retry_at == 65.0
    # ... and once failed, the same reading is not counted again
    assert s.observed(failed, "inactive", "", 7.0) == (failed, False)
    assert s.observed(failed, "failed", "k0s unit failed (exit-code)", 7.0) == (failed, False)


def test_rule4_a_unit_systemd_gave_up_on_waits_a_minute_first_and_is_not_a_start_failure():
    assert not s.start_due(s.IDLE, "failed", 0.0), "not before the leader has read it and given it a wait"
    st, counted = s.observed(s.IDLE, "failed", "k0s unit failed (exit-code)", 30.0)
    assert not counted
    assert st == s.StartState(failures=1, reason="k0s unit failed (exit-code)", retry_at=90.0)
    assert not s.start_due(st, "failed", 89.0) and s.start_due(st, "failed", 90.0)
    # a stopped (not failed) unit is started at once
    assert s.start_due(s.IDLE, "inactive", 0.0) and s.start_due(s.IDLE, "absent", 0.0)


def test_rule5_the_wait_is_60s_doubling_to_600s():
    assert [s.retry_delay(n) for n in range(0, 9)] == [0, 60, 120, 240, 480, 600, 600, 600, 600]
    assert s.retry_delay(10_000) == 600
    st, t, waits = s.IDLE, 0.0, []
    for _ in range(6):
        st = s.start_failed(s.start_sent(st, t), "refused", t)
        waits.append(st.retry_at - t)
        t = st.retry_at
    assert waits == [60, 120, 240, 480, 600, 600]


def test_rule6_the_wait_is_dropped_once_the_node_runs():
    st = s.StartState(failures=4, reason="refused", retry_at=1000.0)
    assert s.observed(st, "active", "", 500.0) == (s.IDLE, False)
    sent = s.start_sent(st, 1000.0)
    assert s.start_answered(sent, "active", "", 1001.0) == (s.IDLE, False)
    # the next failure waits one minute again
    assert s.start_failed(s.IDLE, "refused", 2000.0).retry_at == 2060.0


def test_rule6_the_wait_is_dropped_when_the_node_comes_back_from_down():
    st = s.StartState(failures=5, reason="refused", retry_at=5000.0)
    back = s.back_from_down(st)
    assert back == s.IDLE and s.start_due(back, "inactive", 100.0)


@pytest.mark.parametrize("state", ["active", "activating", "starting", "unreachable"])
def test_rule7_running_starting_and_unreachable_nodes_are_not_started(state):
    assert not s.needs_start(state)
    assert not s.start_due(s.IDLE, state, 0.0)
    assert not s.start_due(s.StartState(failures=1, retry_at=0.0), state, 10.0)


@pytest.mark.parametrize("state", ["pending", "absent", "inactive", "failed"])
def test_rule7_the_other_states_need_a_start(state):
    assert s.needs_start(state)


# ---------------------------------------------------------------------------- the decision per phase


def cluster(phase: str, states: dict[str, str], cps=("cp",), roles=None) -> k.K8sClusterRecord:
    roles = roles or {}
    return k.K8sClusterRecord(
        phase=phase,
        phase_since=0.0,
        control_planes=list(cps),
        scoped=True,
        members=sorted(states),
        nodes={
            n: k.K8sNode(role=roles.get(n, "controller" if n in cps else "worker"), component_state=st)
            for n, st in states.items()
        },
    )


def applies(actions) -> list[r.ApplyNode]:
    return [a for a in actions if isinstance(a, r.ApplyNode)]


def test_ready_cluster_starts_a_worker_whose_k0s_stopped():
    rec = cluster("ready", {"cp": "active", "w1": "inactive", "w2": "active", "w3": "absent"})
    assert r.decide(rec, [], 100.0, 600) == [
        r.ApplyNode("w1", "worker", "worker"), r.ApplyNode("w3", "worker", "worker")]


def test_ready_cluster_starts_a_control_plane_with_a_token_from_any_running_one():
    rec = cluster("ready", {"c1": "inactive", "c2": "inactive", "c3": "active", "w": "active"}, cps=("c1", "c2", "c3"))
    assert r.decide(rec, [], 100.0, 600) == [
        r.ApplyNode("c1", "controller", None), r.ApplyNode("c2", "controller", "controller")]
    # no control plane running: only the bootstrap one is started (it needs no token); workers wait
    rec = cluster("ready", {"c1": "inactive", "c2": "inactive", "c3": "inactive", "w": "inactive"},
                  cps=("c1", "c2", "c3"))
    assert r.decide(rec, [], 100.0, 600) == [r.ApplyNode("c1", "controller", None)]


def test_single_node_cluster_is_started_again_as_single():
    rec = cluster("ready", {"solo": "inactive"}, cps=("solo",), roles={"solo": "single"})
    assert r.decide(rec, [], 5.0, 600) == [r.ApplyNode("solo", "single", None)]


def test_waiting_and_in_flight_nodes_are_not_started():
    rec = cluster("ready", {"cp": "active", "w1": "inactive", "w2": "inactive", "w3": "failed"})
    starts = {
        "w1": s.StartState(failures=2, reason="x", retry_at=220.0),
        "w2": s.start_sent(s.IDLE, 100.0),
        "w3": s.StartState(failures=1, reason="k0s unit failed", retry_at=160.0),
    }
    assert r.decide(rec, [], 150.0, 600, starts) == []
    assert applies(r.decide(rec, [], 160.0, 600, starts)) == [r.ApplyNode("w3", "worker", "worker")]
    assert applies(r.decide(rec, [], 220.0, 600, starts)) == [
        r.ApplyNode("w1", "worker", "worker"), r.ApplyNode("w3", "worker", "worker")]


def test_down_unregistered_and_removing_nodes_are_not_started():
    rec = cluster("ready", {"cp": "active", "w1": "inactive", "w2": "inactive", "w3": "inactive"})
    rec.nodes["w3"].removing = True
    assert r.decide(rec, [], 10.0, 600, {}, unavailable={"w1"}) == [r.ApplyNode("w2", "worker", "worker")]


def test_degraded_cluster_starts_nothing():
    rec = cluster("degraded", {"cp": "inactive", "w1": "inactive", "w2": "pending"})
    assert r.decide(rec, [], 10_000.0, 600) == []


def test_provisioning_starts_stopped_nodes_in_bring_up_order():
    rec = cluster("provisioning", {"c1": "inactive", "c2": "pending", "w": "absent"}, cps=("c1", "c2"))
    assert r.decide(rec, [], 1.0, 600) == [r.ApplyNode("c1", "controller", None)]
    rec.nodes["c1"].component_state = "active"
    assert r.decide(rec, [], 2.0, 600) == [
        r.ApplyNode("c2", "controller", "controller"), r.ApplyNode("w", "worker", "worker")]


def test_provisioning_timeout_applies_before_the_start_timeout():
    rec = cluster("provisioning", {"cp": "active", "w1": "pending"})
    starts = {"w1": s.start_sent(s.IDLE, 1.0)}  # a k0s download still running
    assert r.decide(rec, [], 599.0, 600, starts) == []
    assert r.decide(rec, [], 600.0, 600, starts) == [
        r.SetPhase("degraded", {"w1": "k0s is pending after 600s of provisioning"})]
    # a failed start's reason is what the degraded node shows
    rec.nodes["w1"].reason = "node w1: installing k0s: download failed"
    # ... and a start due in the tick that degrades the cluster is not sent
    assert r.decide(rec, [], 600.0, 600, {}) == [
        r.SetPhase("degraded", {"w1": "node w1: installing k0s: download failed"})]


# ---------------------------------------------------------------------------- what spur k8s status prints


def test_status_line_shows_the_start_state_then_the_reason():
    import time

    from spur.cli.k8s import format_status
    from spur.rpc.proto import k8s_pb2

    t = time.mktime((2026, 12, 3, 14, 1, 2, 0, 0, -1))
    when = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(t))
    retry = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(t + 240))
    st = k8s_pb2.K8sClusterStatus(phase="ready", control_planes=["cp"], nodes=[
        k8s_pb2.K8sNodeInfo(name="cp", role="controller", component_state="active", enabled=True),
        k8s_pb2.K8sNodeInfo(name="w1", role="worker", component_state="inactive", enabled=True,
                            start_in_flight_since=t),
        k8s_pb2.K8sNodeInfo(name="w2", role="worker", component_state="failed", enabled=True,
                            start_failures=3, start_failure="node w2: k0s start failed", start_retry_at=t + 240,
                            reason="k0s unit failed (exit-code)"),
    ])
    lines = format_status(st).splitlines()
    assert lines[3].split() == ["cp", "controller", "active", "enabled=true"]
    assert lines[4].split() == ["w1", "worker", "inactive", "enabled=true", "start=in-flight", f"since={when}"]
    assert lines[5].split()[:7] == ["w2", "worker", "failed", "enabled=true", "start=waiting", "failures=3",
                                    f"retry={retry}"]
    assert lines[5].endswith("start-failure: node w2: k0s start failed  reason: k0s unit failed (exit-code)")
