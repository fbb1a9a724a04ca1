"""spurd's metrics: running jobs (at scrape time, from the executor), launches and launch failures
(from the agent gRPC server's observer: LaunchJob/LaunchStep calls by outcome), RPC counts."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, disable_created_metrics
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

disable_created_metrics()  # no *_created series: counters are plain totals

_LAUNCH_METHODS = {"LaunchJob": "job", "LaunchStep": "step"}


class _RunningCollector(Collector):
    def __init__(self, jobs: Callable[[], Any]) -> None:
        self.jobs = jobs

    def collect(self) -> Iterator[Metric]:
        running = sum(1 for j in self.jobs() if not j.finished.is_set())
        yield GaugeMetricFamily("spur_agent_running_jobs", "Jobs and steps running on this node", value=running)


class AgentMetrics:
    """``jobs``: a callable listing the executor's tracked jobs (objects with a ``finished`` Event)."""

    def __init__(self, jobs: Callable[[], Any]) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.launches = Counter(
            "spur_agent_launches", "Launches accepted by this agent", ["kind"], registry=self.registry
        )
        self.launch_failures = Counter(
            "spur_agent_launch_failures", "Launches this agent refused or failed", ["kind"], registry=self.registry
        )
        self.rpc_requests = Counter(
            "spur_agent_rpc_requests", "gRPC calls served, by method and status", ["method", "code"],
            registry=self.registry,
        )  # fmt: skip
        self.registry.register(_RunningCollector(jobs))

    def observe_rpc(self, method: str, code: str, seconds: float) -> None:
        name = method.rsplit("/", 1)[-1]
        self.rpc_requests.labels(name, code).inc()
        kind = _LAUNCH_METHODS.get(name)
        if kind is not None:
            self.observe_launch(kind, code == "OK")

    def observe_launch(self, kind: str, ok: bool) -> None:
        """One launch of ``kind`` (job | step) served, by its own call or as an item of a batch."""
        (self.launches if ok else self.launch_failures).labels(kind).inc()
