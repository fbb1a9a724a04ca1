"""Membership drift and stray correction, rule by rule (spur/k8s/cluster/drift.py, rules 1-10)."""

from __future__ import annotations

import math

from spur.k8s.cluster import drift as d
from spur.k8s.cluster.drift import Drift, DriftTracker, Limits, Reading
from spur.state.k8s_cluster import DEGRADED, DOWN, PROVISIONING, READY, K8sClusterRecord, K8sNode

WORKER = Reading(running=True, role="worker", claimed=True)
STOPPED = Reading(running=False)


def scoped(members: dict[str, str], phase: str = READY, **kw) -> K8sClusterRecord:
    """A scoped cluster whose members are ``members`` (name -> role)."""
    return K8sClusterRecord(
        phase=phase, scoped=True, members=sorted(members), control_planes=[n for n, r in members.items() if r != "worker"],
        nodes={n: K8sNode(role=r, component_state="active") for n, r in members.items()}, **kw,
    )


def idle(*names: str) -> dict[str, str]:
    return dict.fromkeys(names, "idle")


# --------------------------------------------------------------------------- rule 1


def test_rule1_candidates_are_role_nodes_plus_nodes_outside_a_scoped_cluster():
    rec = scoped({"cp": "controller", "w1": "worker"})
    assert d.candidates(rec, idle("cp", "w1", "out1", "out2")) == ["cp", "out1", "out2", "w1"]


def test_rule1_whole_inventory_candidates_are_only_nodes_with_a_role():
    rec = scoped({"cp": "single"})
    rec.scoped, rec.members = False, []
    assert d.candidates(rec, idle("cp", "new")) == ["cp"]


def test_rule1_skips_down_drained_draining_error_suspended_unknown_and_removing():
    rec = scoped({"cp": "controller", "w1": "worker", "w2": "worker"})
    rec.nodes["w2"].removing = True
    states = {"cp": "idle", "w1": "mixed", "w2": "idle", "a": "down", "b": "drained", "c": "draining",
              "e": "error", "f": "suspended", "g": "unknown", "h": "allocated"}
    assert d.candidates(rec, states) == ["cp", "h", "w1"]
    del states["w1"]  # a node with a role that is not registered: unknown state
    assert d.candidates(rec, states) == ["cp", "h"]


def test_rule1_nothing_is_read_outside_ready_and_degraded():
    for phase in (DOWN, PROVISIONING):
        assert d.candidates(scoped({"cp": "single"}, phase=phase), idle("cp", "x")) == []
    assert d.candidates(scoped({"cp": "single"}, phase=DEGRADED), idle("cp", "x")) == ["cp", "x"]


# --------------------------------------------------------------------------- rule 2


def test_rule2_sweep_period_is_ten_minutes_or_ceil_candidates_over_16_ticks():
    assert d.sweep_period(1) == 600
    assert d.sweep_period(320) == 600  # 20 ticks of 16 = exactly ten minutes
    assert d.sweep_period(321) == 21 * 30
    assert d.sweep_period(1000) == math.ceil(1000 / 16) * 30 == 1890


def test_rule2_at_most_16_reads_per_tick_never_read_first_then_longest_unread():
    names = [f"n{i:03d}" for i in range(40)]
    first = d.due_reads(names, {}, 0.0)
    assert first == names[:16]
    last = dict.fromkeys(first, 0.0) | {"n020": -5.0}
    assert d.due_reads(names, last, 0.0)[:1] == ["n016"]  # never read before those read (any time)
    later = {n: float(i) for i, n in enumerate(names)}
    assert d.due_reads(names, later, 600.0 + 3) == ["n000", "n001", "n002", "n003"]  # due after 600 s


def test_rule2_a_node_is_not_read_again_before_its_period():
    assert d.due_reads(["a"], {"a": 0.0}, 599.0) == []
    assert d.due_reads(["a"], {"a": 0.0}, 600.0) == ["a"]


# --------------------------------------------------------------------------- rule 3


def test_rule3_out_of_scope_is_k0s_running_outside_a_scoped_clusters_members():
    rec = scoped({"cp": "controller"})
    assert d.classify(rec, "x", WORKER) == Drift(d.OUT_OF_SCOPE, "", "worker", stoppable=True)
    assert d.classify(rec, "x", STOPPED) is None


def test_rule3_out_of_scope_never_happens_on_a_whole_inventory_cluster():
    rec = scoped({"cp": "single"})
    rec.scoped, rec.members = False, []
    assert d.classify(rec, "x", WORKER) is None


def test_rule3_role_mismatch_but_single_running_controller_is_not_one():
    rec = scoped({"cp": "single", "w": "worker", "c2": "controller"})
    assert d.classify(rec, "cp", Reading(True, "controller", True)) is None
    assert d.classify(rec, "w", Reading(True, "controller", True)) == Drift(d.ROLE_MISMATCH, "worker", "controller")
    assert d.classify(rec, "c2", Reading(True, "single", True)) == Drift(d.ROLE_MISMATCH, "controller", "single")
    assert d.classify(rec, "w", WORKER) is None


def test_rule3_not_running_only_in_degraded_clusters_for_nodes_that_ran():
    assert d.classify(scoped({"w": "worker"}), "w", STOPPED) is None
    rec = scoped({"w": "worker"}, phase=DEGRADED)
    assert d.classify(rec, "w", STOPPED) == Drift(d.NOT_RUNNING, "worker", "")
    assert d.classify(rec, "w", STOPPED, ran_at_degrade=False) is None


def test_rule3_not_running_compares_with_the_nodes_running_when_the_cluster_degraded():
    rec = scoped({"cp": "controller", "w1": "worker", "w2": "worker"}, phase=DEGRADED, phase_since=100.0)
    rec.nodes["w2"].component_state = "failed"  # never came up: the reason the cluster degraded
    t = DriftTracker()
    t.plan_reads(rec, idle("cp", "w1", "w2"), 130)
    assert confirmed(t, rec, "w1", STOPPED).kind == d.NOT_RUNNING
    assert confirmed(t, rec, "w2", STOPPED) is None


# --------------------------------------------------------------------------- rule 4


def test_rule4_reported_once_after_two_agreeing_readings():
    rec, t = scoped({"cp": "controller"}), DriftTracker()
    assert t.observe(rec, "x", WORKER, 0).report is None
    second = t.observe(rec, "x", WORKER, 600).report
    assert second is not None and second.drift.kind == d.OUT_OF_SCOPE
    assert all(t.observe(rec, "x", WORKER, 600 * i).report is None for i in range(2, 6))


def test_rule4_an_agreeing_reading_ends_the_episode_and_a_new_kind_is_a_new_episode():
    rec, t = scoped({"cp": "controller", "w": "worker"}), DriftTracker()
    ctl = Reading(True, "controller", True)
    t.observe(rec, "w", ctl, 0)
    assert t.observe(rec, "w", ctl, 1).report is not None
    t.observe(rec, "w", WORKER, 2)  # agrees: episode over
    t.observe(rec, "w", ctl, 3)
    assert t.observe(rec, "w", ctl, 4).report is not None
    single = Reading(True, "single", True)
    assert t.observe(rec, "w", single, 5).report is None  # differs from the last: not yet confirmed
    assert t.observe(rec, "w", single, 6).report is not None


def test_rule4_readings_start_over_when_a_node_stops_being_checked():
    rec, t = scoped({"cp": "controller"}), DriftTracker()
    t.observe(rec, "x", WORKER, 0)
    t.plan_reads(rec, idle("cp") | {"x": "down"}, 30)  # x is skipped now
    t.observe(rec, "x", WORKER, 60)
    assert t.tracks["x"].reported is None and not t.tracks["x"].confirmed


def test_rule4_readings_start_over_when_the_cluster_leaves_ready_or_degraded_or_leadership_changes():
    rec, t = scoped({"cp": "controller"}), DriftTracker()
    t.observe(rec, "x", WORKER, 0)
    t.plan_reads(scoped({"cp": "controller"}, phase=DOWN), {}, 30)
    assert t.observe(rec, "x", WORKER, 60).report is None
    t.reset_readings()  # new leadership
    assert t.observe(rec, "x", WORKER, 90).report is None
    assert t.observe(rec, "x", WORKER, 120).report is not None
    assert DriftTracker().tracks == {}  # a restarted controller starts with nothing


def test_rule4_unreachable_is_no_reading():
    rec, t = scoped({"cp": "controller"}), DriftTracker()
    t.observe(rec, "x", WORKER, 0)
    t.unreachable("x", 600)
    assert t.observe(rec, "x", WORKER, 1200).report is not None


# --------------------------------------------------------------------------- rule 5


def confirmed(t: DriftTracker, rec: K8sClusterRecord, name: str, reading: Reading, now: float = 0.0) -> Drift | None:
    t.observe(rec, name, reading, now)
    obs = t.observe(rec, name, reading, now)
    return obs.report.drift if obs.report else None


def test_rule5_only_a_claimed_worker_outside_a_scoped_cluster_with_no_role_is_stoppable():
    rec = scoped({"cp": "controller", "w": "worker"})
    rec.nodes["gone"] = K8sNode(role="worker")  # half-finished remove-nodes: outside members, role kept
    t = DriftTracker()
    assert confirmed(t, rec, "x", WORKER).stoppable
    assert not confirmed(t, rec, "ctl", Reading(True, "controller", True)).stoppable  # may hold etcd quorum
    assert not confirmed(t, rec, "foreign", Reading(True, "worker", False)).stoppable  # k0s install / old agent
    assert not confirmed(t, rec, "gone", WORKER).stoppable
    assert not confirmed(t, rec, "w", Reading(True, "controller", True)).stoppable  # role_mismatch
    assert t.in_view() == ["x"]
    assert t.choose_stop(rec, 0, True).node == "x"


def test_rule5_not_running_is_never_stopped():
    rec, t = scoped({"w": "worker", "cp": "controller"}, phase=DEGRADED), DriftTracker()
    t.plan_reads(rec, idle("w", "cp"), 0)
    assert confirmed(t, rec, "w", STOPPED).kind == d.NOT_RUNNING
    assert t.choose_stop(rec, 0, True) is None


# --------------------------------------------------------------------------- rule 6


def strays(t: DriftTracker, rec: K8sClusterRecord, names: list[str]) -> None:
    for n in names:
        confirmed(t, rec, n, WORKER)


def big(n_workers: int) -> K8sClusterRecord:
    return scoped({"cp": "controller"} | {f"w{i:03d}": "worker" for i in range(n_workers)})


def test_rule6_at_most_one_stop_per_tick():
    rec, t = big(40), DriftTracker()
    strays(t, rec, ["s1", "s2"])
    first = t.choose_stop(rec, 0, True)
    t.stopped(first.node, 0)
    assert t.choose_stop(rec, 0, True) is None and t.blocked == "one stop per tick"
    assert t.choose_stop(rec, 30, True).node == "s2"


def test_rule6_at_most_five_stops_per_rolling_ten_minutes():
    rec, t = big(100), DriftTracker()
    names = [f"s{i}" for i in range(7)]
    strays(t, rec, names)
    stops = []
    for tick in range(40):
        now = tick * 30.0
        dec = t.choose_stop(rec, now, True)
        if dec:
            t.stopped(dec.node, now)
            stops.append(now)
            t.tracks[dec.node].last, t.tracks[dec.node].confirmed = WORKER_DRIFT, True  # still a stray
    assert stops[:5] == [0, 30, 60, 90, 120]
    assert stops[5] == 600  # the sixth waits until the first leaves the window
    for s in stops:
        assert sum(1 for u in stops if s - 600 < u <= s) <= 5


WORKER_DRIFT = Drift(d.OUT_OF_SCOPE, "", "worker", stoppable=True)


# --------------------------------------------------------------------------- rule 7


def test_rule7_hold_back_threshold_3_4_and_25_percent():
    assert not d.held_back(3, 4)  # three strays always go (one per tick)
    assert d.held_back(4, 15)  # 4 > 3 and 4 > 3.75
    assert not d.held_back(4, 16)  # 4 is not more than a quarter of 16
    assert d.held_back(5, 19) and not d.held_back(5, 20)


def test_rule7_compared_counts_role_nodes_plus_outside_nodes_seen_running():
    rec, t = big(10), DriftTracker()  # 11 nodes with a role
    strays(t, rec, ["s1", "s2", "s3", "s4"])
    t.observe(rec, "idle-out", STOPPED, 0)
    assert t.compared(rec) == 15
    assert d.held_back(4, 15)
    assert t.choose_stop(rec, 0, True) is None and t.blocked.startswith("held back")
    t.observe(rec, "s4", STOPPED, 1)  # one stray stopped by itself: 3 in view -> they go
    assert t.choose_stop(rec, 1, True) is not None


def test_rule7_a_few_strays_on_a_small_cluster_still_go_one_per_tick():
    rec, t = scoped({"cp": "single"}), DriftTracker()
    strays(t, rec, ["s1", "s2", "s3"])  # 3 strays vs 4 compared: 75 %, but only three
    got = []
    for tick in range(3):
        dec = t.choose_stop(rec, tick * 30.0, True)
        t.stopped(dec.node, tick * 30.0)
        got.append(dec.node)
    assert got == ["s1", "s2", "s3"]


# --------------------------------------------------------------------------- rule 8


def test_rule8_backoff_ten_minutes_doubling_to_an_hour():
    assert [d.backoff(n) for n in range(1, 7)] == [600, 1200, 2400, 3600, 3600, 3600]


def test_rule8_a_stopped_node_waits_its_backoff_before_another_stop():
    rec, t = scoped({"cp": "single"}), DriftTracker()
    strays(t, rec, ["s"])
    t.stopped("s", 0)
    strays(t, rec, ["s"])  # came back
    assert t.choose_stop(rec, 599, True) is None and t.blocked == "waiting out the per-node backoff"
    assert t.choose_stop(rec, 600, True).node == "s"
    t.stopped("s", 600)
    strays(t, rec, ["s"])
    assert t.choose_stop(rec, 600 + 1199, True) is None
    assert t.choose_stop(rec, 600 + 1200, True) is not None


# --------------------------------------------------------------------------- rule 9


def test_rule9_a_stop_is_done_after_two_stopped_checks():
    rec, t = scoped({"cp": "single"}), DriftTracker()
    strays(t, rec, ["s"])
    t.stopped("s", 0)
    assert not t.observe(rec, "s", STOPPED, 600).stop_done
    assert t.observe(rec, "s", STOPPED, 1200).stop_done
    assert t.tracks["s"].done == 1 and t.tracks["s"].returns == 0
    assert not t.observe(rec, "s", STOPPED, 1800).stop_done  # counted once


def test_rule9_a_unit_that_comes_back_is_a_return_and_the_backoff_keeps_growing():
    rec, t = scoped({"cp": "single"}), DriftTracker()
    strays(t, rec, ["s"])
    t.stopped("s", 0)
    assert t.observe(rec, "s", STOPPED, 600).returned is False
    assert t.observe(rec, "s", WORKER, 1200).returned  # back before the second stopped check
    assert t.tracks["s"].done == 0 and t.tracks["s"].returns == 1
    assert not t.observe(rec, "s", WORKER, 1800).returned  # counted once
    assert t.choose_stop(rec, 1800, True).node == "s"
    t.stopped("s", 1800)
    assert t.next_stop_at("s") == 1800 + 1200


def test_rule9_a_failed_stop_counts_against_limits_but_is_not_verified():
    rec, t = scoped({"cp": "single"}), DriftTracker()
    strays(t, rec, ["s"])
    t.stopped("s", 0, sent=False)
    assert not t.observe(rec, "s", WORKER, 600).returned
    assert t.next_stop_at("s") == 600


# --------------------------------------------------------------------------- rule 10


def test_rule10_report_only_when_correction_is_off_and_a_reload_applies_at_once():
    rec, t = scoped({"cp": "single"}), DriftTracker()
    strays(t, rec, ["s"])
    assert t.choose_stop(rec, 0, False) is None and "report-only" in t.blocked
    assert t.choose_stop(rec, 30, True).node == "s"


# --------------------------------------------------------------------------- status text


def test_describe_names_the_drift_and_the_stray_state():
    rec, t = scoped({"cp": "single"}), DriftTracker()
    t.observe(rec, "s", WORKER, 0)
    assert "possible drift" in t.describe("s", 0)
    t.observe(rec, "s", WORKER, 600)
    assert t.describe("s", 600) == "drift out_of_scope: recorded no role, running worker"
    t.stopped("s", 600)
    text = t.describe("s", 700)
    assert "stray: stopped 1x, 0 done, 0 return(s), verifying (2 stopped reading(s) to go)" in text
    assert "next stop not before 500s" in text
    t.observe(rec, "s", STOPPED, 1200)
    t.observe(rec, "s", STOPPED, 1800)
    assert t.describe("s", 1800) == "stray: stopped 1x, 1 done, 0 return(s), stopped"
    t.observe(rec, "s", WORKER, 2400)
    assert t.describe("s", 2400).endswith("stray: stopped 1x, 1 done, 1 return(s), running again")
    assert t.describe("never-seen", 0) == ""


def test_limits_are_the_contracts_numbers():
    lim = Limits()
    assert (lim.tick, lim.reads_per_tick, lim.sweep_min) == (30, 16, 600)
    assert (lim.stops_per_window, lim.window, lim.hold_min, lim.hold_fraction) == (5, 600, 3, 0.25)
    assert (lim.backoff_first, lim.backoff_max, lim.checks_to_confirm_stop) == (600, 3600, 2)


def test_status_shows_each_nodes_drift_line_and_the_nodes_outside():
    from spur.cli.k8s import format_status
    from spur.rpc.proto import k8s_pb2 as kpb

    st = kpb.K8sClusterStatus(
        phase="ready", control_planes=["cp"], scoped=True,
        nodes=[
            kpb.K8sNodeInfo(name="cp", role="controller", component_state="active", enabled=True),
            kpb.K8sNodeInfo(name="w1", role="worker", component_state="active", enabled=True,
                            drift="drift role_mismatch: recorded worker, running controller"),
        ],
        outside=[kpb.K8sNodeInfo(name="s1", drift="drift out_of_scope: recorded no role, running worker")],
    )
    assert format_status(st).splitlines() == [
        "phase: ready",
        "control-plane: cp",
        "scope: scoped",
        "  cp    controller  active        enabled=true",
        "  w1    worker      active        enabled=true",
        "        drift role_mismatch: recorded worker, running controller",
        "outside the cluster:",
        "  s1    drift out_of_scope: recorded no role, running worker",
    ]


# --------------------------------------------------------------------------- agent side


def test_agent_reads_the_role_a_unit_runs_from_its_execstart():
    from spur.agent.k0s import exec_role, render_unit

    assert exec_role(render_unit(["/usr/local/bin/k0s", "worker", "--token-file", "/t"], "worker")) == "worker"
    assert exec_role("[Service]\nExecStart=/usr/local/bin/k0s controller --single=true\n") == "single"
    assert exec_role("[Service]\nExecStart=/usr/local/bin/k0s controller --single\n") == "single"
    assert exec_role("[Service]\nExecStart=-/usr/bin/k0s controller --config=/etc/k0s/k0s.yaml\n") == "controller"
    assert exec_role("[Service]\nExecStart=/bin/sleep 100\n") == ""
    assert exec_role("[Service]\nExecStart=/bin/k0s 'unterminated\n") == ""


def test_an_older_agent_never_claims_and_its_running_unit_is_read_from_its_state():
    from spur.k8s.cluster.drift_task import reading_of
    from spur.rpc.proto import k0s_pb2

    old = k0s_pb2.K0sStatus(component_state="active", role="worker", spur_owned=True)  # no fields >= 150
    assert reading_of(old) == Reading(running=True, role="worker", claimed=False)
    new = k0s_pb2.K0sStatus(component_state="inactive", running=True, running_role="controller",
                            running_unit="k0scontroller.service")
    assert reading_of(new) == Reading(running=True, role="controller", claimed=False)
    assert reading_of(k0s_pb2.K0sStatus(component_state="absent")) == Reading(running=False)


def test_test_only_limits_come_from_the_environment():
    from spur.k8s.cluster.drift_task import LIMITS_ENV, limits_from_env

    assert limits_from_env({}) == Limits()
    assert limits_from_env({LIMITS_ENV: '{"tick": 0.5, "sweep_min": 1.0}'}) == Limits(tick=0.5, sweep_min=1.0)


def test_drift_metrics_names():
    from prometheus_client import CollectorRegistry, generate_latest

    from spur.metrics.k8s import K8sMetrics
    from spur.state.machine import ClusterState

    registry = CollectorRegistry()
    m = K8sMetrics(registry, ClusterState)
    m.drift_detected("out_of_scope")
    m.drift_detected("role_mismatch")
    m.stray_stop()
    m.stray_return()
    text = generate_latest(registry).decode()
    assert 'spur_k8s_drift_detected_total{kind="out_of_scope"} 1.0' in text
    assert 'spur_k8s_drift_detected_total{kind="role_mismatch"} 1.0' in text
    assert "spur_k8s_stray_stops_total 1.0" in text
    assert "spur_k8s_stray_returns_total 1.0" in text
