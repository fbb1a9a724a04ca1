"""Loading the configured CNI and storage plugins of a Spur-managed k0s cluster."""

from __future__ import annotations

from dataclasses import dataclass

import pluggy

from spur.config.model import ClusterConfig
from spur.plugins import load_plugin_manager

NO_STORAGE = "none"


@dataclass(frozen=True)
class ClusterPlugins:
    """The CNI plugin and the storage plugin (``None`` for ``storage_provisioner = "none"``)."""

    cni: pluggy.PluginManager
    storage: pluggy.PluginManager | None


def load_cluster_plugins(cfg: ClusterConfig) -> ClusterPlugins:
    """Load ``cfg.cni`` and ``cfg.storage_provisioner``. Raises :class:`spur.plugins.PluginNotFound`
    (its message names the pip package) when a configured plugin is not installed."""
    cni = load_plugin_manager("cni", cfg.cni)
    storage = None
    if cfg.storage_provisioner != NO_STORAGE:
        storage = load_plugin_manager("storage", cfg.storage_provisioner)
    return ClusterPlugins(cni=cni, storage=storage)
