"""marshmallow schemas for spur.conf: one per section, building the ``spur.config.model`` dataclasses.

Defaults live only in the dataclasses: a key that is absent from the file is simply not passed to
the constructor. Each field carries ``metadata["doc"]`` (its meaning, used by ``dump_defaults``
and the docs) and, for optional keys without a default, ``metadata["example"]``.

Cross-key rules are checked in ``post_load`` after the dataclass is built (so defaults take part)
and reported as errors on the offending key.
"""

from __future__ import annotations

import difflib
import ipaddress
import re
from dataclasses import replace
from typing import Any

from marshmallow import EXCLUDE, Schema, ValidationError, fields, post_load, validates_schema

from spur.config import fields as f
from spur.config.addr import parse_addr
from spur.config.model import (
    AccountingConfig,
    AdmissionConfig,
    AdmissionMode,
    AgentBackend,
    AgentConfig,
    AuthConfig,
    AuthMode,
    ClusterConfig,
    ControllerConfig,
    MetricsConfig,
    NetworkConfig,
    NodeConfig,
    PartitionConfig,
    PriorityConfig,
    RestConfig,
    SchedulerConfig,
    SpurConfig,
    TlsConfig,
    TlsMode,
)
from spur.core.job import PartitionState

_GRES = re.compile(r"^[A-Za-z][\w.-]*(:[\w.-]+)?(:\d+)?$")


def doc(text: str, example: Any = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"doc": text}
    if example is not None:
        meta["example"] = example
    return meta


class SectionSchema(Schema):
    """Base: rejects unknown keys with a did-you-mean hint; ``model`` is the dataclass built."""

    model: type | None = None
    error_messages = {"type": "expected a table"}

    class Meta:
        unknown = EXCLUDE  # reported by _reject_unknown instead, with a did-you-mean hint

    @validates_schema(pass_original=True, skip_on_field_errors=False)
    def _reject_unknown(self, data: Any, original_data: Any, **kwargs: Any) -> None:
        if not isinstance(original_data, dict):
            return
        known = list(self.fields)
        errors: dict[str, list[str]] = {}
        for key in original_data:
            if key not in self.fields:
                close = difflib.get_close_matches(str(key), known, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                errors[key] = [f"unknown key{hint}"]
        if errors:
            raise ValidationError(errors)

    @post_load
    def _build(self, data: dict[str, Any], **kwargs: Any) -> Any:
        if self.model is None:
            return data
        obj = self.model(**data)
        self.check(obj)
        return obj

    def check(self, obj: Any) -> None:
        """Cross-key rules; raise ``ValidationError({key: [msg]})``."""


def _fail(key: str, msg: str) -> ValidationError:
    return ValidationError({key: [msg]})


REQUIRED_MSG = "required key is missing"


def _required(field: fields.Field) -> fields.Field:
    field.required = True
    field.error_messages["required"] = REQUIRED_MSG
    return field


class ControllerSchema(SectionSchema):
    model = ControllerConfig

    listen_addr = f.Addr(
        default_port=6817, metadata=doc("gRPC address spurctld listens on (clients, agents).")
    )
    rest_addr = f.Addr(default_port=6820, metadata=doc("REST API (slurmrestd-compatible) listen address."))
    metrics_addr = f.Addr(
        default_port=6822, metadata=doc("Prometheus metrics address of spurctld (see [metrics]).")
    )
    raft_listen_addr = f.Addr(
        default_port=6821, metadata=doc("Raft listen address (controller-to-controller).")
    )
    agent_port = f.Int(
        validate=f.port_range(), metadata=doc("Port spurctld uses to reach node agents (spurd).")
    )
    state_dir = f.PathField(metadata=doc("Raft WAL, snapshots and controller state."))
    peers = f.StrList(
        f.Addr(default_port=6821),
        metadata=doc(
            'Raft addresses ("host:port") of all controllers, this one included; empty = single member.',
            example=["ctl1:6821", "ctl2:6821", "ctl3:6821"],
        ),
    )
    node_id = f.Int(
        validate=f.at_least(1),
        metadata=doc(
            "This controller's Raft id, 1-based position in peers; unset = derive from hostname.", 1
        ),
    )
    heartbeat_interval_secs = f.Int(validate=f.at_least(1), metadata=doc("Seconds between agent heartbeats."))
    node_timeout_secs = f.Int(
        validate=f.at_least(1), metadata=doc("A node is marked DOWN after this long without a heartbeat.")
    )
    kill_grace_secs = f.Int(validate=f.at_least(0), metadata=doc("Seconds between SIGTERM and SIGKILL."))
    snapshot_every = f.Int(validate=f.at_least(1), metadata=doc("Raft log entries between snapshots."))
    wal_fsync = f.Bool(metadata=doc("fsync the WAL before acknowledging writes (disable only for tests)."))
    election_timeout_min_ms = f.Int(
        validate=f.at_least(1), metadata=doc("Raft election timeout lower bound (ms, randomised per term).")
    )
    election_timeout_max_ms = f.Int(
        validate=f.at_least(1), metadata=doc("Raft election timeout upper bound (ms).")
    )
    heartbeat_ms = f.Int(validate=f.at_least(1), metadata=doc("Raft leader heartbeat interval (ms)."))
    max_submit_queue = f.Int(
        validate=f.at_least(1),
        metadata=doc(
            "Submissions admitted but not yet committed, at most; beyond it a submission is refused with "
            '"Resource temporarily unavailable" (RESOURCE_EXHAUSTED) and clients back off and retry.'
        ),
    )
    max_job_count = f.Int(
        validate=f.at_least(1),
        metadata=doc(
            "Jobs not yet finished (pending or running), at most, like Slurm's MaxJobCount; beyond it "
            'submissions are refused with "Resource temporarily unavailable" until jobs end.'
        ),
    )
    mpi_default = f.Str(
        validate=fields.validate.OneOf(["none", "pmi2"], error="must be one of {choices}"),
        metadata=doc("The MPI type of a step whose srun gives no --mpi, like Slurm's MpiDefault (none, pmi2)."),
    )
    pace_linger_ms = f.Float(
        validate=fields.validate.Range(min=0, max=50, error="must be between {min} and {max}"),
        metadata=doc(
            "Under load, spurctld's event loop waits this many milliseconds before it sleeps, so that "
            "calls and replies arriving meanwhile are handled in one pass and share batches: less CPU "
            "per job, at most this much more latency per pass. The wait follows the share of its time "
            "the loop works: whole from 45% to 60%, shrinking to 2 ms (or this, if shorter) at 90% "
            "and above (near saturation) and to nothing at 30% (one chain of events, such as an array "
            "on one node); 0 turns it off."
        ),
    )
    pace_busy_fraction = f.Float(
        validate=fields.validate.Range(min=0, max=1, error="must be between {min} and {max}"),
        metadata=doc(
            "The load at which pace_linger_ms applies: the fraction of its recent time (about 0.2 s) "
            "spurctld's event loop spent working; below it, and on an idle controller, it never waits."
        ),
    )

    def check(self, obj: ControllerConfig) -> None:
        if obj.node_timeout_secs <= obj.heartbeat_interval_secs:
            raise _fail(
                "node_timeout_secs",
                f"must be greater than heartbeat_interval_secs ({obj.heartbeat_interval_secs})",
            )
        if obj.election_timeout_max_ms <= obj.election_timeout_min_ms:
            raise _fail(
                "election_timeout_max_ms",
                f"must be greater than election_timeout_min_ms ({obj.election_timeout_min_ms})",
            )
        if obj.heartbeat_ms >= obj.election_timeout_min_ms:
            raise _fail(
                "heartbeat_ms", f"must be less than election_timeout_min_ms ({obj.election_timeout_min_ms})"
            )
        seen: dict[tuple[str, int], int] = {}
        for i, peer in enumerate(obj.peers):
            key = parse_addr(peer, 6821)
            key = (key[0].lower(), key[1])
            if key in seen:
                raise ValidationError({"peers": {i: [f"duplicate of peers[{seen[key]}]"]}})
            seen[key] = i
        if obj.node_id is not None:
            limit = max(len(obj.peers), 1)
            if obj.node_id > limit:
                what = f"{len(obj.peers)} peers" if obj.peers else "no peers (single member)"
                raise _fail("node_id", f"must be in 1..{limit}: there are {what}")


class SchedulerSchema(SectionSchema):
    model = SchedulerConfig

    interval_secs = f.Float(
        validate=fields.validate.Range(min=0, min_inclusive=False, error="must be greater than 0"),
        metadata=doc("Seconds between scheduler passes."),
    )
    min_interval_secs = f.Float(
        validate=fields.validate.Range(min=0, error="must be 0 or more"),
        metadata=doc(
            "Least seconds from the end of one scheduler pass to the start of the next while the "
            "controller is under load (half of the time since the last pass began on CPU, or 8 state "
            "changes or more since it ended), however "
            "often submissions and job ends ask for one (like Slurm's sched_min_interval); an idle "
            "controller plans at once. Passes are also spaced by twice their own CPU time. Larger values "
            "let a busy controller start more jobs per pass and spend less CPU planning; 0 plans after "
            "every change."
        ),
    )
    plugin = f.Str(metadata=doc('Scheduler plugin name (entry point in group "spur").'))
    max_job_test = f.Int(
        validate=f.at_least(1), metadata=doc("Pending jobs considered per pass (like Slurm bf_max_job_test).")
    )
    enforce_part_limits = f.Str(
        validate=fields.validate.OneOf(["ALL", "ANY", "NO", "YES"], error="must be one of {choices}"),
        metadata=doc(
            "Slurm's EnforcePartLimits: NO lets a job beyond its partition's nodes or CPUs pend "
            "(PartitionNodeLimit / PartitionConfig); ALL, ANY or YES refuse it at submission."
        ),
    )


class PartitionSchema(SectionSchema):
    model = None  # built by SpurConfigSchema, which also settles the default partition

    name = _required(f.Str(metadata=doc("Partition name (required).")))
    state = f.Choice(PartitionState, metadata=doc("UP, DOWN, DRAIN or INACTIVE."))
    default = f.Bool(metadata=doc("Jobs that name no partition go here; at most one; else the first."))
    nodes = f.Hostlist(allow_all=True, metadata=doc('Hostlist expression of member nodes, or "ALL".'))
    max_time = f.TimeSpec(metadata=doc('Longest time limit a job may have ("UNLIMITED" or a Slurm time).'))
    default_time = f.TimeSpec(metadata=doc("Time limit of jobs that give none; unset = max_time.", "1:00:00"))


class NodeSchema(SectionSchema):
    model = None  # built by SpurConfigSchema, which fills port from controller.agent_port

    name = _required(f.Hostlist(metadata=doc("Node name or hostlist expression (required).", "node[01-04]")))
    cpus = f.Int(validate=f.at_least(1), metadata=doc("CPUs; unset = as discovered by the agent.", 64))
    memory_mb = f.Int(
        validate=f.at_least(1), metadata=doc("RealMemory in MiB; unset = as discovered by the agent.", 257000)
    )
    gres = f.StrList(
        f.Str(
            validate=fields.validate.Regexp(_GRES, error='expected "name[:type][:count]", e.g. "gpu:a100:4"')
        ),
        metadata=doc('Generic resources, "name[:type][:count]".', ["gpu:a100:4"]),
    )
    features = f.StrList(
        metadata=doc(
            "Features spurd registers for these nodes (Slurm's Features=): matched by --constraint and by "
            "spur k8s up --selector K=V; spurd --features overrides.",
            ["a100", "zone=z1"],
        )
    )
    address = f.Str(metadata=doc("Address to reach the agent; unset = the node name.", "10.0.0.11"))
    port = f.Int(validate=f.port_range(), metadata=doc("Agent port; unset = controller.agent_port."))


class AccountingSchema(SectionSchema):
    model = AccountingConfig

    database_url = f.Str(
        metadata=doc("PostgreSQL URL; unset = embedded job history.", "postgresql://spur@dbhost/spur")
    )
    history_max_jobs = f.Int(
        validate=f.at_least(0), metadata=doc("Finished jobs kept by the embedded history.")
    )

    enforce = f.StrList(
        f.Str(
            validate=fields.validate.OneOf(
                ["associations", "limits", "qos"], error='must be "associations", "limits" or "qos"'
            )
        ),
        metadata=doc(
            "Slurm's AccountingStorageEnforce: refuse jobs without an association, hold jobs over"
            " limits, check QOS. Empty: nothing enforced.",
            ["associations", "limits", "qos"],
        ),
    )

    def check(self, obj: AccountingConfig) -> None:
        if obj.database_url is not None and not obj.database_url.startswith(("postgresql://", "postgres://")):
            raise _fail("database_url", "must be a postgresql:// URL")


class PrioritySchema(SectionSchema):
    model = PriorityConfig

    weight_age = f.Int(validate=f.at_least(0), metadata=doc("PriorityWeightAge.", 1000))
    weight_fairshare = f.Int(validate=f.at_least(0), metadata=doc("PriorityWeightFairshare.", 10000))
    weight_job_size = f.Int(validate=f.at_least(0), metadata=doc("PriorityWeightJobSize.", 1000))
    weight_partition = f.Int(validate=f.at_least(0), metadata=doc("PriorityWeightPartition.", 1000))
    weight_qos = f.Int(validate=f.at_least(0), metadata=doc("PriorityWeightQOS.", 1000))
    max_age = f.TimeSpec(metadata=doc("PriorityMaxAge: queue time at which the age factor is 1."))
    decay_half_life = f.TimeSpec(metadata=doc("PriorityDecayHalfLife of fair-share usage."))


class AuthSchema(SectionSchema):
    model = AuthConfig

    jwt_key = f.Str(metadata=doc("HS256 signing key (prefer jwt_key_file).", "change-me"))
    jwt_key_file = f.PathField(metadata=doc("File holding the HS256 key.", "/etc/spur/jwt.key"))
    mode = f.Choice(
        AuthMode,
        metadata=doc(
            "disabled (trust claimed identities), permissive (verify a presented credential; allow and log "
            "calls without one) or required (every call needs a valid credential; needs a key)."
        ),
    )
    token_ttl_secs = f.Int(
        validate=f.at_least(1),
        metadata=doc("Default lifetime of tokens from scontrol token / spur token (seconds)."),
    )
    max_token_lifespan = f.Int(
        validate=f.at_least(1),
        metadata=doc(
            "Longest lifetime (exp - iat, seconds) of a user token: MintToken refuses a longer one and "
            "every daemon refuses to verify one (a token minted elsewhere with the key included)."
        ),
    )
    broker_socket = f.PathField(
        metadata=doc(
            "Unix socket of the local credential broker (spurd and spurctld serve it; the CLI asks it)."
        )
    )
    broker_ttl_secs = f.Int(
        validate=f.at_least(1),
        metadata=doc("Lifetime of the tokens the credential broker hands out (seconds)."),
    )

    def check(self, obj: AuthConfig) -> None:
        if obj.jwt_key is not None and obj.jwt_key_file is not None:
            raise _fail("jwt_key_file", "set either auth.jwt_key or auth.jwt_key_file, not both")
        if obj.token_ttl_secs > obj.max_token_lifespan:
            raise _fail(
                "token_ttl_secs",
                f"must not exceed auth.max_token_lifespan ({obj.max_token_lifespan}); raise "
                "max_token_lifespan or lower token_ttl_secs",
            )


class TlsSchema(SectionSchema):
    model = TlsConfig

    mode = f.Choice(
        TlsMode,
        metadata=doc(
            "off (plaintext), optional (each port accepts TLS and plaintext, told apart by the first byte: "
            "for migrating a cluster) or required (TLS only; daemons authenticate each other with their "
            "node certificates)."
        ),
    )
    cert_file = f.PathField(
        metadata=doc(
            "This host's certificate (PEM, chain allowed), issued by the cluster CA: served on every port "
            "and presented by the daemons to each other (spur cert issue).",
            "/etc/spur/tls/node.crt",
        )
    )
    key_file = f.PathField(
        metadata=doc("Private key of cert_file (PEM, mode 0600).", "/etc/spur/tls/node.key")
    )
    ca_file = f.PathField(
        metadata=doc(
            "The cluster CA certificate(s) (PEM): servers and daemon certificates must chain to it; the "
            "CLI needs only this key (and mode).",
            "/etc/spur/tls/ca.crt",
        )
    )
    verify_hostname = f.Bool(
        metadata=doc("Clients check that the server's certificate names the host or address they dialled.")
    )
    handshake_timeout_secs = f.Float(
        validate=f.at_least(0.1),
        metadata=doc("A connection that has not finished its TLS handshake by then is closed (seconds)."),
    )

    def check(self, obj: TlsConfig) -> None:
        if obj.cert_file is not None and obj.key_file is None:
            raise _fail("key_file", "tls.cert_file is set: set tls.key_file too")
        if obj.key_file is not None and obj.cert_file is None:
            raise _fail("cert_file", "tls.key_file is set: set tls.cert_file too")


class AdmissionSchema(SectionSchema):
    model = AdmissionConfig

    mode = f.Choice(
        AdmissionMode,
        metadata=doc("open (any node may register) or token (a node needs a join token: spur token create)."),
    )


class NetworkSchema(SectionSchema):
    model = NetworkConfig

    wg_cidr = f.Cidr(metadata=doc("WireGuard mesh address range; nodes get addresses from it."))
    wg_enabled = f.Bool(metadata=doc("Build the WireGuard mesh between nodes."))
    wg_port = f.Int(validate=f.port_range(), metadata=doc("WireGuard UDP port."))
    wg_interface = f.Str(
        validate=fields.validate.Length(max=15, error="must be at most {max} characters (Linux IFNAMSIZ)"),
        metadata=doc("WireGuard interface name."),
    )
    wg_reconcile_interval_secs = f.Float(
        validate=f.at_least(0.1),
        metadata=doc("How often the leader pushes the mesh membership to every meshed node (seconds)."),
    )


class ClusterSchema(SectionSchema):
    model = ClusterConfig

    enabled = f.Bool(metadata=doc("Provision a Kubernetes cluster across the Spur nodes."))
    distro = f.Str(
        validate=fields.validate.OneOf(["k0s"], error="must be one of {choices}"),
        metadata=doc("Kubernetes distribution (only k0s)."),
    )
    control_plane_node = f.Str(
        metadata=doc("Node for the first controller; unset = chosen by spur.", "node01")
    )
    control_plane_replicas = f.Int(validate=f.at_least(1), metadata=doc("k0s controllers (odd number)."))
    pod_cidr = f.Cidr(metadata=doc("Pod network; must not overlap service_cidr."))
    service_cidr = f.Cidr(metadata=doc("Service network; must not overlap pod_cidr."))
    cni = f.Str(metadata=doc("CNI plugin name (kuberouter, calico, ...)."))
    cni_mtu = f.Int(
        validate=fields.validate.Range(min=576, max=65535, error="must be {min}-{max}"),
        metadata=doc("Pod network MTU."),
    )
    storage_provisioner = f.Str(metadata=doc("Storage plugin name."))
    local_path_dir = f.PathField(metadata=doc("Host directory of the local-path provisioner."))
    k0s_version = f.Str(metadata=doc('k0s release to install and run: a tag (pinned) or "latest".'))
    k0s_binary = f.PathField(metadata=doc("Path of the k0s binary on nodes."))
    k0s_release_url = f.Str(
        metadata=doc("Base URL of the k0s releases (binaries and sha256sums.txt are fetched under it).")
    )
    k0s_data_dir = f.PathField(metadata=doc("k0s data directory on nodes (wiped by spur k8s down --reset)."))
    k0s_config_dir = f.PathField(
        metadata=doc("Where spurd keeps the node's k0s config and cached join token (mode 0700).")
    )
    systemctl = f.Str(
        metadata=doc("systemctl command spurd manages the k0s unit with (a path, or a name on PATH).")
    )
    systemd_unit_dir = f.PathField(metadata=doc("Directory spurd writes its k0s systemd unit into."))
    cdi_dir = f.PathField(metadata=doc("Directory spurd writes the CDI spec of the node's GPUs into."))
    k8s_provisioning_timeout_secs = f.Int(
        validate=f.at_least(1), metadata=doc("Seconds before a provisioning step is given up.")
    )
    k8s_drift_correction = f.Bool(
        metadata=doc(
            "Stop a spurd-installed k0s worker left running on a node outside a scoped cluster with no "
            "role (see docs/managed-k8s.md, Membership drift); false reports drift only. Applied on "
            "scontrol reconfigure."
        )
    )
    allow_admin_kubeconfig = f.Bool(metadata=doc("Let admins fetch the cluster-admin kubeconfig."))

    def check(self, obj: ClusterConfig) -> None:
        if obj.control_plane_replicas % 2 == 0:
            raise _fail("control_plane_replicas", "must be odd (etcd needs a majority)")
        pod, svc = ipaddress.ip_network(obj.pod_cidr), ipaddress.ip_network(obj.service_cidr)
        if pod.version == svc.version and pod.overlaps(svc):
            raise _fail("service_cidr", f"overlaps cluster.pod_cidr ({obj.pod_cidr})")


class AgentSchema(SectionSchema):
    model = AgentConfig

    controller = f.StrList(
        f.Addr(default_port=6817),
        accept_single=True,
        validate=fields.validate.Length(min=1, error="must name at least one controller"),
        metadata=doc("Controller address(es) spurd registers with; tried in order."),
    )
    listen_addr = f.Addr(default_port=6818, metadata=doc("gRPC address spurd listens on."))
    node_name = f.Str(metadata=doc("Name this node registers as; unset = the hostname.", "node01"))
    state_dir = f.PathField(metadata=doc("Agent state (running jobs, for re-adoption after restart)."))
    backend = f.Choice(
        AgentBackend, metadata=doc("auto (systemd when PID 1 is systemd), process or systemd.")
    )
    spool_dir = f.PathField(
        metadata=doc("Where job scripts are written; unset = state_dir/spool.", "/var/spool/spur")
    )
    join_token = f.Str(
        metadata=doc("Join token for [admission] mode = token (prefer join_token_file).", "0a1b2c.<secret>")
    )
    join_token_file = f.PathField(
        metadata=doc("File holding the join token (mode 0600, read at start).", "/etc/spur/join-token")
    )

    metrics_addr = f.Addr(
        default_port=6824, metadata=doc("Prometheus metrics address of spurd (see [metrics]).")
    )

    wg_endpoint = f.Str(
        metadata=doc(
            "WireGuard endpoint other nodes reach this node at: IP or IP:PORT (port default"
            " network.wg_port); unset = the address spurd uses towards the controller.",
            "192.0.2.10:51820",
        )
    )

    def check(self, obj: AgentConfig) -> None:
        if obj.join_token is not None and obj.join_token_file is not None:
            raise _fail("join_token_file", "set either agent.join_token or agent.join_token_file, not both")
        if obj.wg_endpoint is not None:
            from spur.net.endpoint import parse_endpoint_option

            try:
                parse_endpoint_option(obj.wg_endpoint, 51820)
            except ValueError as exc:
                raise _fail("wg_endpoint", str(exc)) from None


def _rest_version(value: str) -> None:
    from spur.version import REST_VERSIONS as VERSIONS

    if value not in VERSIONS:
        raise ValidationError("must be a REST version Spur serves: " + ", ".join(f'"{v}"' for v in VERSIONS))


class RestSchema(SectionSchema):
    model = RestConfig

    enabled = f.Bool(metadata=doc("Serve the REST API on controller.rest_addr."))
    ui = f.Bool(metadata=doc("Serve the web dashboard under /ui/ on the REST listener (docs/dashboard.md)."))
    prerender_versions = f.StrList(
        f.Str(validate=_rest_version),
        metadata=doc(
            "REST versions whose GET jobs JSON the leader renders when idle, so their first listing after "
            "many changes is fast; a version a client has listed since this controller became leader is "
            "kept rendered too. []: only listed versions (each costs its rendered JSON in memory).",
        ),
    )
    max_body_bytes = f.Int(
        validate=f.at_least(1024), metadata=doc("Largest request body accepted (bytes); larger -> 413.")
    )
    max_json_depth = f.Int(
        validate=f.at_least(2), metadata=doc("Deepest JSON nesting accepted in a body; deeper -> 400.")
    )
    max_string_length = f.Int(
        validate=f.at_least(64), metadata=doc("Longest JSON string accepted in a body; longer -> 400.")
    )


class MetricsSchema(SectionSchema):
    model = MetricsConfig

    enabled = f.Bool(metadata=doc("Serve Prometheus metrics from spurctld and spurd."))
    bind = f.Addr(
        default_port=6822,
        metadata=doc(
            "spurctld metrics address overriding controller.metrics_addr; unset = that key.",
            "0.0.0.0:6822",
        ),
    )


SECTIONS: dict[str, type[SectionSchema]] = {
    "controller": ControllerSchema,
    "scheduler": SchedulerSchema,
    "accounting": AccountingSchema,
    "priority": PrioritySchema,
    "auth": AuthSchema,
    "tls": TlsSchema,
    "admission": AdmissionSchema,
    "network": NetworkSchema,
    "cluster": ClusterSchema,
    "agent": AgentSchema,
    "rest": RestSchema,
    "metrics": MetricsSchema,
}
"""Single-table sections, in documentation order."""

TABLE_ARRAYS: dict[str, type[SectionSchema]] = {"partitions": PartitionSchema, "nodes": NodeSchema}
"""``[[...]]`` sections."""


class SpurConfigSchema(SectionSchema):
    """The whole file."""

    model = None

    cluster_name = f.Str(metadata=doc("Cluster name (reported by sinfo/sacct, used in k8s names)."))
    controller = fields.Nested(ControllerSchema)
    scheduler = fields.Nested(SchedulerSchema)
    partitions = fields.Nested(
        PartitionSchema, many=True, error_messages={"type": "expected an array of tables: [[partitions]]"}
    )
    nodes = fields.Nested(
        NodeSchema, many=True, error_messages={"type": "expected an array of tables: [[nodes]]"}
    )
    accounting = fields.Nested(AccountingSchema)
    priority = fields.Nested(PrioritySchema)
    auth = fields.Nested(AuthSchema)
    tls = fields.Nested(TlsSchema)
    admission = fields.Nested(AdmissionSchema)
    network = fields.Nested(NetworkSchema)
    cluster = fields.Nested(ClusterSchema)
    agent = fields.Nested(AgentSchema)
    rest = fields.Nested(RestSchema)
    metrics = fields.Nested(MetricsSchema)

    @post_load
    def _build(self, data: dict[str, Any], **kwargs: Any) -> SpurConfig:
        partitions = [PartitionConfig(**p) for p in data.pop("partitions", [])]
        nodes = data.pop("nodes", [])
        defaults = [i for i, p in enumerate(partitions) if p.default]
        if len(defaults) > 1:
            first = partitions[defaults[0]].name
            raise ValidationError(
                {"partitions": {defaults[1]: {"default": [f"partition {first!r} is already the default"]}}}
            )
        names: dict[str, int] = {}
        for i, p in enumerate(partitions):
            if p.name in names:
                raise ValidationError(
                    {"partitions": {i: {"name": [f"duplicate of partitions[{names[p.name]}]"]}}}
                )
            names[p.name] = i
        if partitions and not defaults:
            partitions[0] = replace(partitions[0], default=True)
        cfg = SpurConfig(**data)
        if partitions:
            cfg = replace(cfg, partitions=tuple(partitions))
        agent_port = cfg.controller.agent_port
        cfg = replace(cfg, nodes=tuple(NodeConfig(**{"port": agent_port, **n}) for n in nodes))
        self._check_cross(cfg)
        return cfg

    @staticmethod
    def _check_cross(cfg: SpurConfig) -> None:
        if not (cfg.cluster.enabled and cfg.network.wg_enabled):
            return
        wg = ipaddress.ip_network(cfg.network.wg_cidr)
        for key in ("pod_cidr", "service_cidr"):
            net = ipaddress.ip_network(getattr(cfg.cluster, key))
            if net.version == wg.version and net.overlaps(wg):
                raise ValidationError(
                    {"cluster": {key: [f"overlaps network.wg_cidr ({cfg.network.wg_cidr})"]}}
                )
