"""Checked by mypy only (no ``test_`` prefix: pytest never collects it): each concrete class still
matches the Protocol its consumers are typed against, so an interface that drifts breaks the build."""

from __future__ import annotations

from spur.accounting.shares import JobSource, ShareSource
from spur.auth.admin import DomainSource
from spur.controller.accounting_db_service import AccountingDbHost
from spur.controller.accounting_flusher import FlusherHost
from spur.controller.app import Controller
from spur.controller.duties import Dispatcher
from spur.controller.host import ControllerHost, HeartbeatWatch
from spur.controller.launch_batch import BatchDispatcher
from spur.controller.launch_watch import LaunchWatch
from spur.k8s.cluster.drift_task import DriftHost, DriftMetrics
from spur.k8s.cluster.host import ClusterServiceHost, K8sControllerHost
from spur.k8s.cluster.service import K8sClusterService
from spur.k8s.cluster.task import ReconcileMetrics
from spur.k8s.operator.agent import VirtualAgent
from spur.k8s.operator.jobs import JobController
from spur.k8s.operator.metrics import Part
from spur.k8s.operator.watcher import NodeWatcher
from spur.metrics.controller import MetricsHost
from spur.metrics.k8s import K8sMetrics
from spur.rest.app import RestApi
from spur.rest.host import RestHost
from spur.rest.output import RestApi as OutputApi
from spur.rpc.forwarding import LeaderGate
from spur.state.accounting import AccountingDomain
from spur.state.domain import StateQueries
from spur.state.machine import ClusterState, Usage
from spur.state.sched_index import IndexedState, NodeUsage


def controller_parts(ctl: Controller) -> None:
    host: ControllerHost = ctl
    flusher: FlusherHost = ctl
    acctdb: AccountingDbHost = ctl
    rest: RestHost = ctl
    metrics: MetricsHost = ctl
    gate: LeaderGate = ctl
    k8s: K8sControllerHost = ctl
    drift: DriftHost = ctl
    del host, flusher, acctdb, rest, metrics, gate, k8s, drift


def metrics_parts(k8s: K8sMetrics) -> None:
    reconcile: ReconcileMetrics = k8s
    sweep: DriftMetrics = k8s
    del reconcile, sweep


def state_parts(state: ClusterState, usage: Usage, accounting: AccountingDomain) -> None:
    queries: StateQueries = state
    indexed: IndexedState = state
    node_usage: NodeUsage = usage
    shares: ShareSource = accounting
    sprio_jobs: JobSource = state
    admin_domains: DomainSource = state
    del queries, indexed, node_usage, shares, sprio_jobs, admin_domains


def service_parts(
    watch: LaunchWatch, dispatcher: Dispatcher, k8s: K8sClusterService, api: RestApi
) -> None:
    heartbeat: HeartbeatWatch = watch
    batch: BatchDispatcher = dispatcher
    cluster: ClusterServiceHost = k8s
    output: OutputApi = api
    del heartbeat, batch, cluster, output


def operator_parts(agent: VirtualAgent, jobs: JobController, watcher: NodeWatcher) -> None:
    parts: list[Part] = [agent, jobs, watcher]
    del parts
