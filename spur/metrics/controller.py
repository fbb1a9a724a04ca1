"""spurctld's metrics. Gauges are computed at scrape time from the replicated state (nothing is
counted in the scheduler's or the apply path's hot loops); the two observers the controller calls
(:meth:`ControllerMetrics.observe_rpc`, :meth:`ControllerMetrics.observe_scheduler_cycle`) only
update plain counters (:mod:`spur.metrics.rpc_meter`) and a prometheus_client histogram.

Names (all ``spur_``): jobs by state and partition, pending jobs by reason, nodes by state; job
submit/start/completion counters (cluster lifetime, from the replicated state); scheduler cycle
duration histogram; gRPC requests and latency by method and status; Raft role/term/commit/applied;
accounting outbox depth (when the ``outbox`` state domain exists).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Protocol

from prometheus_client import CollectorRegistry, Histogram, disable_created_metrics
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from spur.metrics.rpc_meter import RpcMeter

if TYPE_CHECKING:
    from spur.raft.node import RaftNode
    from spur.state.machine import ClusterState


class MetricsHost(Protocol):
    """What the metrics read of spurctld's controller (``spur.controller.app.Controller``)."""

    @property
    def state(self) -> ClusterState: ...

    @property
    def raft(self) -> RaftNode: ...

disable_created_metrics()  # no *_created series: counters are plain totals

_ROLES = ("leader", "follower", "candidate")
_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class _StateCollector(Collector):
    def __init__(self, ctl: MetricsHost) -> None:
        self.ctl = ctl

    def collect(self) -> Iterator[Metric]:
        state = self.ctl.state
        jobs = GaugeMetricFamily("spur_jobs", "Jobs held in state, by state and partition", labels=["state", "partition"])
        reasons = GaugeMetricFamily("spur_jobs_pending_reason", "Pending jobs by reason", labels=["reason"])
        by_key: dict[tuple[str, str], int] = {}
        by_reason: dict[str, int] = {}
        live_started = 0
        for job in state.jobs.values():
            key = (job.state.value, job.partition)
            by_key[key] = by_key.get(key, 0) + 1
            if job.state.value == "PENDING":
                by_reason[job.reason] = by_reason.get(job.reason, 0) + 1
            elif not job.state.is_terminal and job.start_time:
                live_started += 1
        for (st, part), n in sorted(by_key.items()):
            jobs.add_metric([st, part], n)
        for reason, n in sorted(by_reason.items()):
            reasons.add_metric([reason], n)
        yield jobs
        yield reasons
        nodes = GaugeMetricFamily("spur_nodes", "Nodes by Slurm state", labels=["state"])
        node_states: dict[str, int] = {}
        for name in state.nodes:
            st = state.node_state(name)
            node_states[st] = node_states.get(st, 0) + 1
        for st, n in sorted(node_states.items()):
            nodes.add_metric([st], n)
        yield nodes
        stats = state.domains.get("job_stats")
        finished: dict[str, int] = dict(getattr(stats, "finished", {}))
        after_start = int(getattr(stats, "finished_after_start", 0))
        yield CounterMetricFamily(
            "spur_jobs_submitted", "Jobs submitted (job ids handed out, array tasks included)",
            value=max(state.next_job_id - 1, 0),
        )
        yield CounterMetricFamily(
            "spur_jobs_started", "Jobs started (finished after running, plus those running now)",
            value=after_start + live_started,
        )
        completed = CounterMetricFamily("spur_jobs_completed", "Jobs that reached a final state", labels=["state"])
        for st, n in sorted(finished.items()):
            completed.add_metric([st], n)
        yield completed
        raft = self.ctl.raft.status()
        role = GaugeMetricFamily("spur_raft_role", "1 for this controller's current Raft role", labels=["role"])
        current = str(raft["role"]).lower().rsplit(".", 1)[-1]
        for r in _ROLES:
            role.add_metric([r], 1.0 if current == r else 0.0)
        yield role
        yield GaugeMetricFamily("spur_raft_term", "Current Raft term", value=raft["term"])
        yield GaugeMetricFamily("spur_raft_commit_index", "Raft commit index", value=raft["commit_index"])
        yield GaugeMetricFamily("spur_raft_applied_index", "Raft applied index", value=raft["applied_index"])
        if "outbox" in state.domains:
            depth = state.domains["outbox"].depth  # type: ignore[attr-defined]
            yield GaugeMetricFamily("spur_accounting_outbox_depth", "Records waiting for the database", value=depth)


class ControllerMetrics:
    """One controller's registry (not the process-global one, so several can live in a process)."""

    def __init__(self, ctl: MetricsHost) -> None:
        self.ctl = ctl
        self.registry = CollectorRegistry(auto_describe=False)
        self.rpc = RpcMeter(
            "spur_rpc_requests", "gRPC calls served, by method and status",
            "spur_rpc_duration_seconds", "gRPC call handling time by method", _LATENCY_BUCKETS,
        )  # fmt: skip
        self.registry.register(self.rpc)
        self.scheduler_cycle = Histogram(
            "spur_scheduler_cycle_duration_seconds", "Duration of one scheduler pass",
            buckets=_LATENCY_BUCKETS, registry=self.registry,
        )  # fmt: skip
        self.registry.register(_StateCollector(ctl))
        from spur.metrics.k8s import K8sMetrics

        self.k8s = K8sMetrics(self.registry, lambda: ctl.state)
        self._cycles = [0, 0.0, 0.0, 0.0]  # count, total, max, last (seconds)

    def observe_rpc(self, method: str, code: str, seconds: float) -> None:
        self.rpc.observe(method, code, seconds)

    def observe_scheduler_cycle(self, seconds: float) -> None:
        self.scheduler_cycle.observe(seconds)
        c = self._cycles
        c[0] += 1
        c[1] += seconds
        c[2] = max(c[2], seconds)
        c[3] = seconds

    def diag_counters(self) -> dict[str, int]:
        """Counters for slurm/v0.0.38/diag (microseconds for cycle times)."""
        state = self.ctl.state
        stats = state.domains.get("job_stats")
        live = sum(1 for j in state.jobs.values() if j.start_time and not j.state.is_terminal)
        count, total, longest, last = self._cycles
        out = {
            "jobs_submitted": max(state.next_job_id - 1, 0),
            "jobs_started": int(getattr(stats, "finished_after_start", 0)) + live,
            "schedule_cycle_total": int(count),
            "schedule_cycle_max_us": int(longest * 1e6),
            "schedule_cycle_last_us": int(last * 1e6),
            "schedule_cycle_mean_us": int(total / count * 1e6) if count else 0,
        }
        if "outbox" in state.domains:
            out["outbox_depth"] = int(state.domains["outbox"].depth)  # type: ignore[attr-defined]
        return out

    def rpc_stats(self) -> list[tuple[str, int, int, int]]:
        """(method, count, average us, total us) per gRPC method, for slurmdb/v0.0.38/diag."""
        out = []
        for name, (count, total) in sorted(self.rpc.totals().items()):
            n = int(count)
            out.append((name, n, int(total / n * 1e6) if n else 0, int(total * 1e6)))
        return out
