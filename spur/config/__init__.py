"""spur.conf: TOML configuration, validated with marshmallow into frozen dataclasses.

Usage::

    from spur.config import load_config, resolve_node_id
    cfg = load_config("/etc/spur/spur.conf", overrides={"controller.state_dir": "/tmp/x"})
    cfg.controller.state_dir, cfg.default_partition.name

Every problem raises ``ConfigError`` naming the file, the dotted key and the value.
"""

from spur.config.addr import AddressError, parse_addr
from spur.config.dump import dump_config, dump_defaults
from spur.config.errors import ConfigError, ConfigProblem
from spur.config.loader import (
    ENV_VAR,
    config_from_mapping,
    load_config,
    parse_config_text,
    parse_override,
)
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
    NetworkConfig,
    NodeConfig,
    PartitionConfig,
    RestConfig,
    SchedulerConfig,
    SpurConfig,
)
from spur.config.node_id import resolve_node_id

__all__ = [
    "ENV_VAR",
    "AccountingConfig",
    "AddressError",
    "AdmissionConfig",
    "AdmissionMode",
    "AgentBackend",
    "AgentConfig",
    "AuthConfig",
    "AuthMode",
    "ClusterConfig",
    "ConfigError",
    "ConfigProblem",
    "ControllerConfig",
    "NetworkConfig",
    "NodeConfig",
    "PartitionConfig",
    "RestConfig",
    "SchedulerConfig",
    "SpurConfig",
    "config_from_mapping",
    "dump_config",
    "dump_defaults",
    "load_config",
    "parse_addr",
    "parse_config_text",
    "parse_override",
    "resolve_node_id",
]
