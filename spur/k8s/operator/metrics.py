"""The operator's Prometheus metrics and health checks (served on ``--health-addr``).

``/healthz``: the process is serving (always 200 while it runs). ``/readyz``: 200 once the node
watcher, the SpurJob watch and the pod watch have each completed a first list, 503 (naming what is
not ready) before. ``/metrics``: the registry below.
"""

from __future__ import annotations

from typing import Any, Protocol

import trio
from prometheus_client import CollectorRegistry, Counter, Gauge

__all__ = ["OperatorMetrics"]


class Part(Protocol):
    """A part of the operator whose readiness the metrics report (the node watcher, the SpurJob
    controller, the virtual agent): set once its first list is in."""

    @property
    def synced(self) -> trio.Event: ...


class OperatorMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.rpc_calls = Counter(
            "spur_operator_agent_rpcs",
            "Calls to the virtual agent, by method and status code",
            ["method", "code"],
            registry=self.registry,
        )
        self.transport_errors = Counter(
            "spur_operator_controller_transport_errors",
            "Transport errors on the channels to spurctld (each drops the connection)",
            ["channel"],
            registry=self.registry,
        )
        self._parts: dict[str, Part] = {}
        Gauge("spur_operator_spurjobs", "SpurJob objects watched", registry=self.registry).set_function(
            lambda: len(getattr(self._parts.get("jobs"), "objects", {}))
        )
        Gauge(
            "spur_operator_nodes_registered", "Kubernetes nodes registered with Spur", registry=self.registry
        ).set_function(lambda: len(getattr(self._parts.get("watcher"), "registered", {})))
        Gauge(
            "spur_operator_job_pods", "Pods of Spur jobs the virtual agent tracks", registry=self.registry
        ).set_function(lambda: sum(len(p) for p in getattr(self._parts.get("agent"), "pods", {}).values()))
        Gauge(
            "spur_operator_jobs_submitted",
            "Jobs submitted for SpurJobs by this process",
            registry=self.registry,
        ).set_function(lambda: getattr(self._parts.get("jobs"), "submitted", 0))
        Gauge(
            "spur_operator_node_watcher_restarts",
            "Node watcher restarts after transport errors",
            registry=self.registry,
        ).set_function(lambda: getattr(self._parts.get("watcher"), "restarts", 0))

    def bind(self, **parts: Part) -> None:
        self._parts.update(parts)

    def transport_error(self, channel: str) -> None:
        self.transport_errors.labels(channel).inc()

    def observe_rpc(self, method: str, code: object, *_: object) -> None:
        self.rpc_calls.labels(method.rsplit("/", 1)[-1], getattr(code, "name", str(code))).inc()

    def ready(self) -> tuple[bool, str]:
        waiting = [
            name
            for name in ("watcher", "jobs", "agent")
            if name not in self._parts or not self._parts[name].synced.is_set()
        ]
        return (not waiting, "ok" if not waiting else "waiting for the first list: " + ", ".join(waiting))

    def routes(self) -> dict[str, Any]:
        return {"/healthz": lambda: (True, "ok"), "/readyz": self.ready}
