"""Metrics of Spur-managed Kubernetes (k0s), registered in spurctld's registry.

- ``spur_k8s_cluster_phase{phase}``: 1 for the cluster's current phase (down, provisioning, ready,
  degraded), 0 for the others; from the replicated record at scrape time.
- ``spur_k8s_nodes{role,state}``: cluster nodes by k0s role and last known component state.
- ``spur_k8s_provisioning_attempts_total{role}`` / ``spur_k8s_provisioning_failures_total{role}``:
  k0s starts this leader sent to agents, and those that failed.
- ``spur_k8s_start_failures_total{role}``: starts that failed (refused, unanswered within 900 s, or
  the node not running afterwards), including those of a ready cluster's restarts (the starter).
- ``spur_k8s_reconcile_duration_seconds``: duration of one reconcile pass.
- ``spur_k8s_drift_detected_total{kind}``: membership drift reported (out_of_scope, role_mismatch,
  not_running), once per episode; ``spur_k8s_stray_stops_total``: stray workers stopped and found
  stopped by the next two checks; ``spur_k8s_stray_returns_total``: strays running again after a stop.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from spur.state.machine import ClusterState

PHASES = ("down", "provisioning", "ready", "degraded")
_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class _ClusterCollector(Collector):
    def __init__(self, state_of: Callable[[], ClusterState]) -> None:
        self.state_of = state_of

    def collect(self) -> Iterator[Metric]:
        from spur.state.k8s_cluster import K8sClusterDomain

        domain = self.state_of().domains.get(K8sClusterDomain.name)
        if not isinstance(domain, K8sClusterDomain):  # absent: nothing to report
            return
        rec = domain.record
        phase = GaugeMetricFamily("spur_k8s_cluster_phase", "1 for the k0s cluster's current phase", labels=["phase"])
        for p in PHASES:
            phase.add_metric([p], 1.0 if rec.phase == p else 0.0)
        yield phase
        nodes = GaugeMetricFamily("spur_k8s_nodes", "k0s cluster nodes by role and state", labels=["role", "state"])
        counts: dict[tuple[str, str], int] = {}
        for node in rec.nodes.values():
            key = (node.role, node.component_state)
            counts[key] = counts.get(key, 0) + 1
        for (role, st), n in sorted(counts.items()):
            nodes.add_metric([role, st], n)
        yield nodes


class K8sMetrics:
    """The reconcile task's observers (see the module docstring)."""

    def __init__(self, registry: CollectorRegistry, state_of: Callable[[], ClusterState]) -> None:
        self.attempts = Counter(
            "spur_k8s_provisioning_attempts", "k0s starts sent to agents, by role", ["role"], registry=registry
        )
        self.failures = Counter(
            "spur_k8s_provisioning_failures", "k0s starts that failed, by role", ["role"], registry=registry
        )
        self.start_failures = Counter(
            "spur_k8s_start_failures", "k0s starts that failed or got no answer in time, by role", ["role"],
            registry=registry,
        )
        self.reconcile = Histogram(
            "spur_k8s_reconcile_duration_seconds", "Duration of one k8s reconcile pass", buckets=_BUCKETS,
            registry=registry,
        )
        self.drift = Counter(
            "spur_k8s_drift_detected", "Membership drift reported by the drift sweep, by kind", ["kind"],
            registry=registry,
        )
        self.stray_stops = Counter(
            "spur_k8s_stray_stops", "Stray k0s workers stopped (confirmed by two stopped checks)", registry=registry
        )
        self.stray_returns = Counter(
            "spur_k8s_stray_returns", "Stray k0s workers found running again after a stop", registry=registry
        )
        registry.register(_ClusterCollector(state_of))

    def observe_k8s_reconcile(self, seconds: float, record: object = None) -> None:
        self.reconcile.observe(seconds)

    def k8s_attempt(self, role: str) -> None:
        self.attempts.labels(role).inc()

    def k8s_failure(self, role: str) -> None:
        self.failures.labels(role).inc()

    def k8s_start_failure(self, role: str) -> None:
        self.start_failures.labels(role).inc()
    def drift_detected(self, kind: str) -> None:
        self.drift.labels(kind).inc()

    def stray_stop(self) -> None:
        self.stray_stops.inc()

    def stray_return(self) -> None:
        self.stray_returns.inc()
