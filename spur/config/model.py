"""Typed, immutable view of a loaded ``spur.conf``.

Every class here is a frozen dataclass whose defaults are the documented defaults, so
``SpurConfig()`` is exactly the configuration of a single host with no config file (except for
the implicit partition, which the loader adds: see ``SpurConfig.partitions``). Lists from the
file become tuples so configs are hashable and cannot be mutated by a consumer.

Field names equal TOML key names; ``spur.config.schema`` validates the file and builds these.
"""

from __future__ import annotations

import enum
import functools
from dataclasses import dataclass, field
from pathlib import Path

from spur.core.job import UNLIMITED, PartitionState


class AuthMode(enum.StrEnum):
    DISABLED = "disabled"
    PERMISSIVE = "permissive"
    REQUIRED = "required"


class AdmissionMode(enum.StrEnum):
    OPEN = "open"
    TOKEN = "token"


class TlsMode(enum.StrEnum):
    OFF = "off"
    OPTIONAL = "optional"
    REQUIRED = "required"


class AgentBackend(enum.StrEnum):
    AUTO = "auto"
    PROCESS = "process"
    SYSTEMD = "systemd"


@dataclass(frozen=True)
class ControllerConfig:
    """``[controller]``: spurctld addresses, Raft membership and timers."""

    listen_addr: str = "0.0.0.0:6817"
    rest_addr: str = "0.0.0.0:6820"
    metrics_addr: str = "127.0.0.1:6822"
    raft_listen_addr: str = "0.0.0.0:6821"
    agent_port: int = 6818
    state_dir: Path = Path("/var/lib/spur")
    peers: tuple[str, ...] = ()
    node_id: int | None = None
    heartbeat_interval_secs: int = 30
    node_timeout_secs: int = 90
    kill_grace_secs: int = 30
    snapshot_every: int = 10000
    wal_fsync: bool = True
    election_timeout_min_ms: int = 1000
    election_timeout_max_ms: int = 2000
    heartbeat_ms: int = 200
    max_submit_queue: int = 256
    max_job_count: int = 100_000
    mpi_default: str = "none"
    pace_linger_ms: float = 10.0
    pace_busy_fraction: float = 0.5


@dataclass(frozen=True)
class SchedulerConfig:
    """``[scheduler]``: the leader's scheduling loop."""

    interval_secs: float = 2.0
    min_interval_secs: float = 0.05
    plugin: str = "backfill"
    max_job_test: int = 1000
    enforce_part_limits: str = "NO"  # Slurm's EnforcePartLimits: ALL, ANY, NO, YES (= ANY)


@functools.lru_cache(maxsize=64)
def _parse_time(spec: str) -> int:
    """A config time spec in seconds. Cached: the config's specs are few and read on hot paths
    (every submission's priority weights), and parsing one costs microseconds each time."""
    from spur.core.timespec import parse_time_limit  # lazy: spur.core.timespec is optional at import time

    return parse_time_limit(spec)


@dataclass(frozen=True)
class PartitionConfig:
    """One ``[[partitions]]`` entry. Time limits keep the spec as written; ``*_secs`` parse it."""

    name: str
    state: PartitionState = PartitionState.UP
    default: bool = False
    nodes: str = "ALL"
    max_time: str = "UNLIMITED"
    default_time: str | None = None

    @property
    def max_time_secs(self) -> int:
        """``max_time`` in seconds, ``UNLIMITED`` (-1) for no limit."""
        return _parse_time(self.max_time)

    @property
    def default_time_secs(self) -> int:
        """``default_time`` in seconds; ``max_time_secs`` when unset (Slurm's DefaultTime rule)."""
        return self.max_time_secs if self.default_time is None else _parse_time(self.default_time)


@dataclass(frozen=True)
class NodeConfig:
    """One ``[[nodes]]`` entry; ``name`` may be a hostlist expression naming several nodes.

    ``cpus``/``memory_mb`` of ``None`` mean "whatever the agent discovers". ``port`` is filled with
    ``controller.agent_port`` by the loader when the entry does not set it.
    """

    name: str
    cpus: int | None = None
    memory_mb: int | None = None
    gres: tuple[str, ...] = ()
    features: tuple[str, ...] = ()
    address: str | None = None
    port: int = 6818


@dataclass(frozen=True)
class AccountingConfig:
    """``[accounting]``: PostgreSQL when ``database_url`` is set, else the embedded history."""

    database_url: str | None = None
    history_max_jobs: int = 100000
    # Slurm's AccountingStorageEnforce: any of "associations", "limits", "qos" (empty: nothing).
    enforce: tuple[str, ...] = ()


@dataclass(frozen=True)
class PriorityConfig:
    """``[priority]``: Slurm's multifactor plugin (all weights 0: basic priority, by submit order)."""

    weight_age: int = 0
    weight_fairshare: int = 0
    weight_job_size: int = 0
    weight_partition: int = 0
    weight_qos: int = 0
    max_age: str = "7-00:00:00"
    decay_half_life: str = "7-00:00:00"

    @property
    def max_age_secs(self) -> int:
        return _parse_time(self.max_age)

    @property
    def decay_half_life_secs(self) -> int:
        return _parse_time(self.decay_half_life)


@dataclass(frozen=True)
class AuthConfig:
    """``[auth]``: JWT (HS256) key source and enforcement mode."""

    jwt_key: str | None = None
    jwt_key_file: Path | None = None
    mode: AuthMode = AuthMode.PERMISSIVE
    token_ttl_secs: int = 86400
    max_token_lifespan: int = 86400
    broker_socket: Path = Path("/run/spur/auth.sock")
    broker_ttl_secs: int = 300


@dataclass(frozen=True)
class TlsConfig:
    """``[tls]``: TLS on every port (gRPC 6817/6818, REST 6820, Raft 6821, the operator's agent)."""

    mode: TlsMode = TlsMode.OFF
    cert_file: Path | None = None
    key_file: Path | None = None
    ca_file: Path | None = None
    verify_hostname: bool = True
    handshake_timeout_secs: float = 10.0


@dataclass(frozen=True)
class NetworkConfig:
    """``[network]``: the WireGuard mesh between nodes."""

    wg_cidr: str = "10.44.0.0/16"
    wg_enabled: bool = False
    wg_port: int = 51820
    wg_interface: str = "spur0"
    wg_reconcile_interval_secs: float = 30.0


@dataclass(frozen=True)
class ClusterConfig:
    """``[cluster]``: the k0s Kubernetes cluster Spur can provision across its nodes."""

    enabled: bool = False
    distro: str = "k0s"
    control_plane_node: str | None = None
    control_plane_replicas: int = 1
    pod_cidr: str = "10.42.0.0/16"
    service_cidr: str = "10.43.0.0/16"
    cni: str = "kuberouter"
    cni_mtu: int = 1450
    storage_provisioner: str = "local-path"
    local_path_dir: Path = Path("/var/lib/local-path-provisioner")
    k0s_version: str = "v1.36.2+k0s.0"
    k0s_binary: Path = Path("/usr/local/bin/k0s")
    k0s_release_url: str = "https://github.com/k0sproject/k0s/releases"
    k0s_data_dir: Path = Path("/var/lib/k0s")
    k0s_config_dir: Path = Path("/etc/spur/k0s")
    systemctl: str = "systemctl"
    systemd_unit_dir: Path = Path("/etc/systemd/system")
    cdi_dir: Path = Path("/etc/cdi")
    k8s_provisioning_timeout_secs: int = 600
    k8s_drift_correction: bool = True
    allow_admin_kubeconfig: bool = False


@dataclass(frozen=True)
class AgentConfig:
    """``[agent]``: settings read by spurd on compute hosts."""

    controller: tuple[str, ...] = ("localhost:6817",)
    listen_addr: str = "0.0.0.0:6818"
    node_name: str | None = None
    state_dir: Path = Path("/var/lib/spur/agent")
    backend: AgentBackend = AgentBackend.AUTO
    spool_dir: Path | None = None
    join_token: str | None = None
    join_token_file: Path | None = None
    metrics_addr: str = "127.0.0.1:6824"
    wg_endpoint: str | None = None


@dataclass(frozen=True)
class AdmissionConfig:
    """``[admission]``: whether a node needs a join token to register (``spur token create``)."""

    mode: AdmissionMode = AdmissionMode.OPEN


@dataclass(frozen=True)
class RestConfig:
    """``[rest]``: the slurmrestd-compatible REST API served by spurctld on ``controller.rest_addr``."""

    enabled: bool = True
    ui: bool = True  # the web dashboard under /ui/ (spur.ui)
    # versions whose GET jobs answers are rendered in idle time even before a client lists them
    # (spur.rest.prerender; listed versions are kept rendered too)
    prerender_versions: tuple[str, ...] = ("v0.0.42",)
    max_body_bytes: int = 8 * 1024 * 1024
    max_json_depth: int = 32
    max_string_length: int = 1024 * 1024


@dataclass(frozen=True)
class MetricsConfig:
    """``[metrics]``: Prometheus endpoints of spurctld (``controller.metrics_addr``) and spurd
    (``agent.metrics_addr``)."""

    enabled: bool = True
    bind: str | None = None


DEFAULT_PARTITION = PartitionConfig(name="default", default=True, nodes="ALL")


@dataclass(frozen=True)
class SpurConfig:
    """The whole ``spur.conf``.

    ``partitions`` is never empty after loading: with none configured it holds one partition
    ``default`` over ALL nodes, and exactly one entry has ``default=True``. ``source`` names the
    file the config came from (for error messages) and is ignored by ``==``.
    """

    cluster_name: str = "spur"
    controller: ControllerConfig = field(default_factory=ControllerConfig)
    scheduler: SchedulerConfig = field(default_factory=SchedulerConfig)
    partitions: tuple[PartitionConfig, ...] = (DEFAULT_PARTITION,)
    nodes: tuple[NodeConfig, ...] = ()
    accounting: AccountingConfig = field(default_factory=AccountingConfig)
    priority: PriorityConfig = field(default_factory=PriorityConfig)
    auth: AuthConfig = field(default_factory=AuthConfig)
    tls: TlsConfig = field(default_factory=TlsConfig)
    admission: AdmissionConfig = field(default_factory=AdmissionConfig)
    network: NetworkConfig = field(default_factory=NetworkConfig)
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    agent: AgentConfig = field(default_factory=AgentConfig)
    rest: RestConfig = field(default_factory=RestConfig)
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    source: str = field(default="<defaults>", compare=False)

    @property
    def default_partition(self) -> PartitionConfig:
        """The partition jobs go to when they name none."""
        return next(p for p in self.partitions if p.default)


__all__ = [
    "UNLIMITED",
    "AccountingConfig",
    "AdmissionConfig",
    "AdmissionMode",
    "AgentBackend",
    "AgentConfig",
    "AuthConfig",
    "AuthMode",
    "ClusterConfig",
    "ControllerConfig",
    "MetricsConfig",
    "NetworkConfig",
    "NodeConfig",
    "PartitionConfig",
    "RestConfig",
    "SchedulerConfig",
    "SpurConfig",
    "TlsConfig",
    "TlsMode",
]
