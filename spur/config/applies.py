"""When a spur.conf key takes effect: ``scontrol reconfigure`` (live), or a restart of spurctld, spurd or both.

Every key of the schema (``spur.config.schema``) has a :class:`Mark` in :data:`APPLIES`, keyed by its
dotted path (``"controller.node_timeout_secs"``, ``"partitions.max_time"``, ``"cluster_name"`` for a
top-level key). ``tests/test_config_applies.py`` fails when a key has none, and the generated
reference in docs/configuration.md shows each mark.

The marks describe the code, not a wish:

- ``live``: ``Controller.reconfigure`` (spur/controller/app.py) copies the key into the leader's
  configuration (or proposes it to the replicated state) and its consumer reads it again on each use;
- ``restart spurctld``: read once when spurctld starts (Raft, listeners, auth, plugins, ...);
- ``restart spurd``: read once when spurd starts (spurctld does not use it);
- ``restart spurctld and spurd``: both daemons read it at start (keep it equal on every host);
- ``not used yet``: validated, but no daemon reads it today.

:func:`restart_needed` compares the configuration a controller runs with against the file it just
re-read and names the changed keys that reconfigure could not apply. Pure: no I/O.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from spur.config.model import SpurConfig

__all__ = ["APPLIES", "Applies", "Mark", "mark_of", "restart_needed", "schema_keys"]


class Applies(enum.Enum):
    """What makes a changed key take effect."""

    LIVE = "live"
    SPURCTLD = "restart spurctld"
    SPURD = "restart spurd"
    BOTH = "restart spurctld and spurd"
    UNUSED = "not used yet"


@dataclass(frozen=True)
class Mark:
    """A key's :class:`Applies` and, where one word would mislead, a short note."""

    applies: Applies
    note: str = ""

    def text(self) -> str:
        """The mark as the reference table shows it."""
        return f"{self.applies.value} ({self.note})" if self.note else self.applies.value


LIVE, CTLD, SPURD, BOTH, UNUSED = (Mark(a) for a in Applies)

_CLI = "the CLI reads it on every command"

APPLIES: dict[str, Mark] = {
    "cluster_name": BOTH,
    # [controller]
    "controller.listen_addr": CTLD,
    "controller.rest_addr": CTLD,
    "controller.metrics_addr": CTLD,
    "controller.raft_listen_addr": CTLD,
    "controller.agent_port": Mark(Applies.UNUSED, "only the default port of [[nodes]]"),
    "controller.state_dir": CTLD,
    "controller.peers": Mark(Applies.SPURCTLD, "every controller, with the same list"),
    "controller.node_id": CTLD,
    "controller.heartbeat_interval_secs": Mark(
        Applies.LIVE, "agents adopt it with the leader's next heartbeat answer"
    ),
    "controller.node_timeout_secs": LIVE,
    "controller.kill_grace_secs": Mark(
        Applies.SPURD,
        "cancels use the leader's value after reconfigure; time-limit kills use spurd's own",
    ),
    "controller.snapshot_every": CTLD,
    "controller.wal_fsync": CTLD,
    "controller.election_timeout_min_ms": CTLD,
    "controller.election_timeout_max_ms": CTLD,
    "controller.heartbeat_ms": CTLD,
    "controller.max_submit_queue": CTLD,
    "controller.max_job_count": CTLD,
    "controller.mpi_default": CTLD,
    "controller.pace_linger_ms": CTLD,
    "controller.pace_busy_fraction": CTLD,
    # [scheduler]
    "scheduler.interval_secs": LIVE,
    "scheduler.min_interval_secs": LIVE,
    "scheduler.plugin": Mark(Applies.SPURCTLD, "reconfigure refuses a changed plugin"),
    "scheduler.max_job_test": LIVE,
    "scheduler.enforce_part_limits": LIVE,
    # [[partitions]]
    "partitions.name": LIVE,
    "partitions.state": LIVE,
    "partitions.default": LIVE,
    "partitions.nodes": LIVE,
    "partitions.max_time": LIVE,
    "partitions.default_time": LIVE,
    # [[nodes]]
    "nodes.name": Mark(Applies.SPURD, "spurd looks up its own entry for its features"),
    "nodes.cpus": UNUSED,
    "nodes.memory_mb": UNUSED,
    "nodes.gres": UNUSED,
    "nodes.features": SPURD,
    "nodes.address": UNUSED,
    "nodes.port": UNUSED,
    # [accounting]
    "accounting.database_url": CTLD,
    "accounting.history_max_jobs": CTLD,
    "accounting.enforce": LIVE,
    # [priority]
    "priority.weight_age": LIVE,
    "priority.weight_fairshare": LIVE,
    "priority.weight_job_size": LIVE,
    "priority.weight_partition": LIVE,
    "priority.weight_qos": LIVE,
    "priority.max_age": LIVE,
    "priority.decay_half_life": LIVE,
    # [auth]
    "auth.jwt_key": BOTH,
    "auth.jwt_key_file": BOTH,
    "auth.mode": BOTH,
    "auth.token_ttl_secs": CTLD,
    "auth.max_token_lifespan": BOTH,
    "auth.broker_socket": Mark(Applies.BOTH, _CLI),
    "auth.broker_ttl_secs": BOTH,
    # [tls]
    "tls.mode": Mark(Applies.BOTH, _CLI),
    "tls.cert_file": Mark(Applies.BOTH, "the files are re-read on scontrol reconfigure and SIGHUP"),
    "tls.key_file": Mark(Applies.BOTH, "the files are re-read on scontrol reconfigure and SIGHUP"),
    "tls.ca_file": Mark(Applies.BOTH, "re-read on scontrol reconfigure and SIGHUP; " + _CLI),
    "tls.verify_hostname": Mark(Applies.BOTH, _CLI),
    "tls.handshake_timeout_secs": BOTH,
    # [admission]
    "admission.mode": CTLD,
    # [network]
    "network.wg_cidr": CTLD,
    "network.wg_enabled": BOTH,
    "network.wg_port": BOTH,
    "network.wg_interface": SPURD,
    "network.wg_reconcile_interval_secs": CTLD,
    # [cluster]
    "cluster.enabled": BOTH,
    "cluster.distro": Mark(Applies.UNUSED, "k0s is the only one"),
    "cluster.control_plane_node": CTLD,
    "cluster.control_plane_replicas": CTLD,
    "cluster.pod_cidr": Mark(Applies.BOTH, "spurd's value is a fallback for spurctld's"),
    "cluster.service_cidr": Mark(Applies.BOTH, "spurd's value is a fallback for spurctld's"),
    "cluster.cni": BOTH,
    "cluster.cni_mtu": SPURD,
    "cluster.storage_provisioner": CTLD,
    "cluster.local_path_dir": BOTH,
    "cluster.k0s_version": Mark(Applies.SPURD, "spur k8s install reads it on every run"),
    "cluster.k0s_binary": Mark(Applies.SPURD, "spur k8s install reads it on every run"),
    "cluster.k0s_release_url": Mark(Applies.SPURD, "spur k8s install reads it on every run"),
    "cluster.k0s_data_dir": SPURD,
    "cluster.k0s_config_dir": SPURD,
    "cluster.systemctl": SPURD,
    "cluster.systemd_unit_dir": SPURD,
    "cluster.cdi_dir": SPURD,
    "cluster.k8s_provisioning_timeout_secs": CTLD,
    "cluster.k8s_drift_correction": LIVE,
    "cluster.allow_admin_kubeconfig": CTLD,
    # [agent]
    "agent.controller": Mark(Applies.SPURD, _CLI),
    "agent.listen_addr": SPURD,
    "agent.node_name": SPURD,
    "agent.state_dir": SPURD,
    "agent.backend": SPURD,
    "agent.spool_dir": SPURD,
    "agent.join_token": SPURD,
    "agent.join_token_file": SPURD,
    "agent.metrics_addr": SPURD,
    "agent.wg_endpoint": SPURD,
    # [rest]
    "rest.enabled": CTLD,
    "rest.ui": CTLD,
    "rest.prerender_versions": CTLD,
    "rest.max_body_bytes": CTLD,
    "rest.max_json_depth": CTLD,
    "rest.max_string_length": CTLD,
    # [metrics]
    "metrics.enabled": BOTH,
    "metrics.bind": CTLD,
}
"""Every key's mark, by dotted path (top-level keys have no section prefix)."""


def schema_keys() -> list[str]:
    """Every key the schema accepts, as dotted paths, in schema order."""
    from spur.config.schema import SECTIONS, TABLE_ARRAYS, SpurConfigSchema

    keys = [
        name
        for name in SpurConfigSchema._declared_fields
        if name not in SECTIONS and name not in TABLE_ARRAYS
    ]
    for section, schema in {**SECTIONS, **TABLE_ARRAYS}.items():
        keys.extend(f"{section}.{name}" for name in schema._declared_fields)
    return keys


def mark_of(key: str) -> Mark:
    """The mark of dotted ``key``; KeyError names a key that has none."""
    try:
        return APPLIES[key]
    except KeyError:
        raise KeyError(f"{key}: no reconfigure mark in spur.config.applies.APPLIES") from None


# Keys whose model attribute differs from the spur.conf name (TimeSpec fields store seconds).
_ATTRIBUTE = {"max_time": "max_time_secs", "default_time": "default_time_secs"}


def _value(obj: Any, name: str) -> Any:
    return getattr(obj, _ATTRIBUTE.get(name, name), None)


def restart_needed(running: SpurConfig, new: SpurConfig) -> list[str]:
    """Keys that differ between ``running`` and ``new`` (two ``SpurConfig``) and that reconfigure does
    not apply, as ``"key (restart spurctld)"``, in schema order. Keys not used yet are left out;
    ``[[nodes]]`` is compared as a whole (its entries have no stable identity)."""
    out: list[str] = []
    for key in schema_keys():
        mark = APPLIES.get(key)
        if mark is None or mark.applies in (Applies.LIVE, Applies.UNUSED):
            continue
        section, _, name = key.rpartition(".")
        if section in ("partitions", "nodes"):
            continue
        old = _value(getattr(running, section), name) if section else _value(running, name)
        now = _value(getattr(new, section), name) if section else _value(new, name)
        if old != now:
            out.append(f"{key} ({mark.applies.value})")
    return out
