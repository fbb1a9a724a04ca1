"""spur.conf loading: defaults, round trips, overrides and the error for each kind of mistake."""

from __future__ import annotations

import dataclasses
import sys
import types
from pathlib import Path

import pytest

from spur.config import (
    AdmissionMode,
    AgentBackend,
    AuthMode,
    ConfigError,
    PartitionConfig,
    SpurConfig,
    config_from_mapping,
    dump_config,
    dump_defaults,
    load_config,
    parse_config_text,
    parse_override,
)
from spur.config.schema import SECTIONS, TABLE_ARRAYS, SpurConfigSchema
from spur.core.job import PartitionState


def _error(text: str, source: str = "test.conf") -> ConfigError:
    with pytest.raises(ConfigError) as exc:
        parse_config_text(text, source=source)
    return exc.value


def _assert_names(err: ConfigError, key: str, value: str, source: str = "test.conf") -> None:
    """The first line of the message names the file, the dotted key and the offending value."""
    first = str(err).splitlines()[0]
    assert first.startswith(f"{source}: {key} = {value}"), first
    assert err.key == key


# --- defaults -------------------------------------------------------------------------------------


def test_no_file_gives_documented_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPUR_CONF", raising=False)
    cfg = load_config()
    assert cfg == SpurConfig()
    assert cfg.cluster_name == "spur"
    assert cfg.controller.listen_addr == "0.0.0.0:6817"
    assert cfg.controller.rest_addr == "0.0.0.0:6820"
    assert cfg.controller.raft_listen_addr == "0.0.0.0:6821"
    assert cfg.controller.agent_port == 6818
    assert cfg.controller.state_dir == Path("/var/lib/spur")
    assert cfg.controller.peers == ()
    assert cfg.controller.node_id is None
    assert (cfg.controller.heartbeat_interval_secs, cfg.controller.node_timeout_secs) == (30, 90)
    assert cfg.controller.kill_grace_secs == 30
    assert cfg.controller.snapshot_every == 10000
    assert cfg.controller.wal_fsync is True
    assert (cfg.controller.election_timeout_min_ms, cfg.controller.election_timeout_max_ms) == (1000, 2000)
    assert cfg.controller.heartbeat_ms == 200
    assert (cfg.scheduler.interval_secs, cfg.scheduler.plugin, cfg.scheduler.max_job_test) == (
        2.0,
        "backfill",
        1000,
    )
    assert cfg.partitions == (PartitionConfig(name="default", default=True, nodes="ALL"),)
    assert cfg.default_partition.name == "default"
    assert cfg.nodes == ()
    assert cfg.accounting.database_url is None and cfg.accounting.history_max_jobs == 100000
    assert (
        cfg.auth.mode is AuthMode.PERMISSIVE and cfg.auth.jwt_key is None and cfg.auth.token_ttl_secs == 86400
    )
    assert (cfg.network.wg_cidr, cfg.network.wg_enabled, cfg.network.wg_port) == (
        "10.44.0.0/16",
        False,
        51820,
    )
    assert cfg.network.wg_interface == "spur0"
    assert cfg.cluster.enabled is False and cfg.cluster.distro == "k0s"
    assert (cfg.cluster.pod_cidr, cfg.cluster.service_cidr) == ("10.42.0.0/16", "10.43.0.0/16")
    assert cfg.cluster.cni == "kuberouter" and cfg.cluster.cni_mtu == 1450
    assert cfg.cluster.k0s_binary == Path("/usr/local/bin/k0s")
    assert cfg.agent.controller == ("localhost:6817",)
    assert cfg.agent.backend is AgentBackend.AUTO
    assert cfg.agent.state_dir == Path("/var/lib/spur/agent")
    assert cfg.rest.enabled is True
    assert cfg.rest.prerender_versions == ("v0.0.42",)


def test_empty_text_equals_no_file() -> None:
    assert parse_config_text("") == SpurConfig()


def test_spur_conf_env_is_used_when_no_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    conf = tmp_path / "spur.conf"
    conf.write_text('cluster_name = "from-env"\n')
    monkeypatch.setenv("SPUR_CONF", str(conf))
    cfg = load_config()
    assert cfg.cluster_name == "from-env"
    assert cfg.source == str(conf)


def test_explicit_path_wins_over_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "env.conf").write_text('cluster_name = "env"\n')
    (tmp_path / "arg.conf").write_text('cluster_name = "arg"\n')
    monkeypatch.setenv("SPUR_CONF", str(tmp_path / "env.conf"))
    assert load_config(tmp_path / "arg.conf").cluster_name == "arg"


def test_missing_file_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.conf"
    with pytest.raises(ConfigError) as exc:
        load_config(path)
    assert str(path) in str(exc.value) and "cannot read" in str(exc.value)


# --- sections ------------------------------------------------------------------------------------

FULL = """
cluster_name = "full"

[controller]
listen_addr = "10.0.0.1:7817"
rest_addr = "[::1]:7820"
metrics_addr = "127.0.0.1:7822"
raft_listen_addr = "10.0.0.1:7821"
agent_port = 7818
state_dir = "/srv/spur"
peers = ["a:7821", "b:7821", "c:7821"]
node_id = 2
heartbeat_interval_secs = 10
node_timeout_secs = 40
kill_grace_secs = 5
snapshot_every = 500
wal_fsync = false
election_timeout_min_ms = 300
election_timeout_max_ms = 600
heartbeat_ms = 50
max_submit_queue = 64
max_job_count = 5000
mpi_default = "pmi2"
pace_linger_ms = 1.5
pace_busy_fraction = 0.7

[scheduler]
interval_secs = 0.5
min_interval_secs = 0.2
plugin = "fifo"
max_job_test = 50
enforce_part_limits = "ALL"

[[partitions]]
name = "cpu"
nodes = "ALL"
max_time = "UNLIMITED"

[[partitions]]
name = "gpu"
state = "DRAIN"
default = true
nodes = "ALL"
max_time = "UNLIMITED"
default_time = "UNLIMITED"

[[nodes]]
name = "n1"
cpus = 8
memory_mb = 16000
gres = ["gpu:a100:2", "nic"]
features = ["fast"]
address = "192.168.1.5"
port = 9000

[[nodes]]
name = "n2"

[accounting]
database_url = "postgresql://u@db/spur"
history_max_jobs = 10
enforce = ["associations", "limits"]

[priority]
weight_age = 1000
weight_fairshare = 10000
weight_job_size = 100
weight_partition = 10
weight_qos = 2000
max_age = "1-00:00:00"
decay_half_life = "2-00:00:00"

[auth]
jwt_key_file = "/etc/spur/key"
mode = "required"
token_ttl_secs = 60
max_token_lifespan = 3600
broker_socket = "/tmp/spur-auth.sock"
broker_ttl_secs = 120

[network]
wg_cidr = "fd00:44::/64"
wg_enabled = true
wg_port = 51000
wg_interface = "wg-spur"
wg_reconcile_interval_secs = 10

[cluster]
enabled = true
distro = "k0s"
control_plane_node = "n1"
control_plane_replicas = 3
pod_cidr = "10.100.0.0/16"
service_cidr = "10.101.0.0/16"
cni = "calico"
cni_mtu = 1400
storage_provisioner = "other"
local_path_dir = "/data/lp"
k0s_version = "v1.30.0+k0s.0"
k0s_binary = "/opt/k0s"
k0s_release_url = "http://mirror.example/k0s/releases"
k0s_data_dir = "/srv/k0s"
k0s_config_dir = "/srv/k0s-conf"
systemctl = "/opt/bin/systemctl"
systemd_unit_dir = "/run/systemd/system"
cdi_dir = "/var/run/cdi"
k8s_provisioning_timeout_secs = 60
k8s_drift_correction = false
allow_admin_kubeconfig = true

[agent]
controller = ["a:7817", "b:7817"]
listen_addr = "0.0.0.0:7818"
node_name = "n1"
state_dir = "/srv/spur/agent"
backend = "process"
spool_dir = "/srv/spool"
metrics_addr = "0.0.0.0:7824"
wg_endpoint = "192.0.2.10:51821"
join_token_file = "/etc/spur/join-token"

[tls]
mode = "optional"
cert_file = "/etc/spur/tls/node.crt"
key_file = "/etc/spur/tls/node.key"
ca_file = "/etc/spur/tls/ca.crt"
verify_hostname = false
handshake_timeout_secs = 5.0

[admission]
mode = "token"

[rest]
enabled = false
ui = false
prerender_versions = ["v0.0.38", "v0.0.41"]
max_body_bytes = 4096
max_json_depth = 8
max_string_length = 128

[metrics]
enabled = false
bind = "0.0.0.0:7822"
"""


def test_every_section_loads_typed_values() -> None:
    cfg = parse_config_text(FULL)
    assert cfg.cluster_name == "full"
    assert cfg.controller.peers == ("a:7821", "b:7821", "c:7821")
    assert cfg.controller.node_id == 2 and cfg.controller.wal_fsync is False
    assert cfg.controller.state_dir == Path("/srv/spur")
    assert cfg.scheduler.interval_secs == 0.5 and cfg.scheduler.plugin == "fifo"
    assert cfg.scheduler.min_interval_secs == 0.2
    assert cfg.controller.pace_linger_ms == 1.5 and cfg.controller.pace_busy_fraction == 0.7
    assert [p.name for p in cfg.partitions] == ["cpu", "gpu"]
    assert cfg.default_partition.name == "gpu"
    assert cfg.partitions[0].default is False
    assert cfg.partitions[1].state is PartitionState.DRAIN
    n1, n2 = cfg.nodes
    assert (n1.cpus, n1.memory_mb, n1.gres, n1.features) == (8, 16000, ("gpu:a100:2", "nic"), ("fast",))
    assert (n1.address, n1.port) == ("192.168.1.5", 9000)
    assert (n2.cpus, n2.memory_mb, n2.port) == (None, None, 7818)  # port defaults to controller.agent_port
    assert cfg.accounting.database_url == "postgresql://u@db/spur"
    assert cfg.auth.mode is AuthMode.REQUIRED and cfg.auth.jwt_key_file == Path("/etc/spur/key")
    assert cfg.network.wg_cidr == "fd00:44::/64" and cfg.network.wg_enabled
    assert cfg.cluster.control_plane_replicas == 3 and cfg.cluster.cni == "calico"
    assert cfg.cluster.k0s_binary == Path("/opt/k0s")
    assert cfg.agent.controller == ("a:7817", "b:7817") and cfg.agent.backend is AgentBackend.PROCESS
    assert cfg.agent.spool_dir == Path("/srv/spool")
    assert cfg.agent.join_token_file == Path("/etc/spur/join-token")
    assert cfg.admission.mode is AdmissionMode.TOKEN
    assert cfg.rest.enabled is False
    assert cfg.rest.prerender_versions == ("v0.0.38", "v0.0.41")


def test_every_section_round_trips_through_dump() -> None:
    cfg = parse_config_text(FULL)
    assert parse_config_text(dump_config(cfg)) == cfg
    assert parse_config_text(dump_config(cfg, comments=True)) == cfg


def test_full_sample_sets_every_key() -> None:
    """Guards the round-trip test above: FULL must differ from the defaults in every section."""
    cfg, default = parse_config_text(FULL), SpurConfig()
    for section in SECTIONS:
        got, want = getattr(cfg, section), getattr(default, section)
        same = [f.name for f in dataclasses.fields(got) if getattr(got, f.name) == getattr(want, f.name)]
        # k0s is the only distro; jwt_key and jwt_key_file (join_token and join_token_file) exclude each other
        assert same == {"cluster": ["distro"], "auth": ["jwt_key"], "agent": ["join_token"]}.get(
            section, []
        ), (section, same)


def test_dump_defaults_parses_back_to_defaults() -> None:
    text = dump_defaults()
    assert parse_config_text(text) == SpurConfig()
    for name in SpurConfigSchema._declared_fields:
        assert name in text


def test_schemas_and_dataclasses_have_the_same_keys() -> None:
    cfg = SpurConfig()
    for section, schema in SECTIONS.items():
        assert list(schema._declared_fields) == [f.name for f in dataclasses.fields(getattr(cfg, section))]
    assert list(TABLE_ARRAYS["partitions"]._declared_fields) == [
        f.name for f in dataclasses.fields(PartitionConfig)
    ]


def test_first_partition_is_default_when_none_marked() -> None:
    cfg = parse_config_text('[[partitions]]\nname = "a"\n[[partitions]]\nname = "b"\n')
    assert [p.default for p in cfg.partitions] == [True, False]


def test_partition_state_is_case_insensitive() -> None:
    cfg = parse_config_text('[[partitions]]\nname = "a"\nstate = "drain"\n')
    assert cfg.partitions[0].state is PartitionState.DRAIN


def test_agent_controller_accepts_a_single_string() -> None:
    assert parse_config_text('[agent]\ncontroller = "ctl:6817"\n').agent.controller == ("ctl:6817",)


def test_integer_interval_is_a_float() -> None:
    assert parse_config_text("[scheduler]\ninterval_secs = 3\n").scheduler.interval_secs == 3.0


def test_config_is_immutable() -> None:
    cfg = SpurConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.controller.state_dir = Path("/x")  # type: ignore[misc]


# --- overrides -----------------------------------------------------------------------------------


def test_overrides_apply_after_the_file(tmp_path: Path) -> None:
    conf = tmp_path / "spur.conf"
    conf.write_text('[controller]\nstate_dir = "/from/file"\n[[partitions]]\nname = "p"\n')
    cfg = load_config(
        conf,
        overrides={
            "controller.state_dir": tmp_path / "x",
            "scheduler.interval_secs": 0.1,
            "partitions[0].state": "DOWN",
            "controller.peers": ("a:6821",),
        },
    )
    assert cfg.controller.state_dir == tmp_path / "x"
    assert cfg.scheduler.interval_secs == 0.1
    assert cfg.partitions[0].state is PartitionState.DOWN
    assert cfg.controller.peers == ("a:6821",)


def test_overrides_without_a_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPUR_CONF", raising=False)
    assert load_config(overrides={"controller.state_dir": "/tmp/x"}).controller.state_dir == Path("/tmp/x")


def test_bad_override_is_labelled() -> None:
    with pytest.raises(ConfigError) as exc:
        parse_config_text("", source="f.conf", overrides={"controller.listen_adr": "x:1"})
    assert str(exc.value).startswith('f.conf [override]: controller.listen_adr = "x:1": unknown key')
    with pytest.raises(ConfigError, match=r"partitions\[3\] does not exist"):
        parse_config_text("", overrides={"partitions[3].state": "UP"})


def test_parse_override() -> None:
    assert parse_override("scheduler.interval_secs=5") == ("scheduler.interval_secs", 5)
    assert parse_override("controller.state_dir=/tmp/x") == ("controller.state_dir", "/tmp/x")
    assert parse_override('controller.peers=["a:1", "b:1"]') == ("controller.peers", ["a:1", "b:1"])
    assert parse_override("controller.wal_fsync=false") == ("controller.wal_fsync", False)
    with pytest.raises(ValueError):
        parse_override("no-equals-sign")


def test_mapping_input_is_not_mutated() -> None:
    data = {"controller": {"state_dir": "/a"}}
    config_from_mapping(data, overrides={"controller.state_dir": "/b"})
    assert data == {"controller": {"state_dir": "/a"}}


# --- errors --------------------------------------------------------------------------------------


def test_unknown_top_level_key() -> None:
    err = _error('clustername = "x"\n')
    _assert_names(err, "clustername", '"x"')
    assert "unknown key" in str(err) and "cluster_name" in str(err)


def test_unknown_nested_key() -> None:
    err = _error("[controller]\nlisten_adr = 5\n")
    _assert_names(err, "controller.listen_adr", "5")
    assert "unknown key (did you mean 'listen_addr'?)" in str(err)


def test_unknown_key_in_table_array() -> None:
    err = _error('[[partitions]]\nname = "a"\n[[partitions]]\nname = "b"\nmaxtime = "1:00"\n')
    _assert_names(err, "partitions[1].maxtime", '"1:00"')


def test_unknown_section() -> None:
    _assert_names(_error("[slurm]\nx = 1\n"), "slurm", "{x = 1}")


@pytest.mark.parametrize(
    ("text", "key", "value", "reason"),
    [
        ('[controller]\nagent_port = "6818"\n', "controller.agent_port", '"6818"', "expected an integer"),
        ("[controller]\nwal_fsync = 1\n", "controller.wal_fsync", "1", "expected true or false"),
        ("[controller]\nheartbeat_ms = true\n", "controller.heartbeat_ms", "true", "expected an integer"),
        ("[controller]\nstate_dir = 3\n", "controller.state_dir", "3", "expected a string"),
        ('[controller]\npeers = "a:1"\n', "controller.peers", '"a:1"', "expected a list"),
        ('[scheduler]\ninterval_secs = "2"\n', "scheduler.interval_secs", '"2"', "expected a number"),
        ("[scheduler]\ninterval_secs = 0\n", "scheduler.interval_secs", "0", "greater than 0"),
        ("[scheduler]\ninterval_secs = nan\n", "scheduler.interval_secs", "nan", "finite number"),
        ("[controller]\npace_linger_ms = inf\n", "controller.pace_linger_ms", "inf", "finite number"),
        ("[controller]\npace_linger_ms = 51\n", "controller.pace_linger_ms", "51", "between 0 and 50"),
        ("[controller]\npace_busy_fraction = 1.5\n", "controller.pace_busy_fraction", "1.5", "between 0 and 1"),
        ("cluster_name = 7\n", "cluster_name", "7", "expected a string"),
        ("controller = 5\n", "controller", "5", "expected a table"),
        ('[partitions]\nname = "a"\n', "partitions", '{name = "a"}', "[[partitions]]"),
        ('[[nodes]]\nname = "n"\ngres = ["gpu", 4]\n', "nodes[0].gres[1]", "4", "expected a string"),
        ('[[nodes]]\nname = "n"\ngres = ["gpu:a:b:c"]\n', "nodes[0].gres[0]", '"gpu:a:b:c"', "name[:type]"),
        ('[[nodes]]\nname = "n"\ncpus = 0\n', "nodes[0].cpus", "0", "at least 1"),
        ('[auth]\nmode = "on"\n', "auth.mode", '"on"', "disabled, permissive, required"),
        ('[agent]\nbackend = "docker"\n', "agent.backend", '"docker"', "auto, process, systemd"),
        ("[agent]\ncontroller = []\n", "agent.controller", "[]", "at least one"),
        ("[partitions.x]\n", "partitions", "{x = {}}", "[[partitions]]"),
        ('[[partitions]]\nstate = "OPEN"\nname = "p"\n', "partitions[0].state", '"OPEN"', "UP, DOWN"),
        ('[cluster]\ndistro = "k3s"\n', "cluster.distro", '"k3s"', "k0s"),
        ("[cluster]\ncontrol_plane_replicas = 2\n", "cluster.control_plane_replicas", "2", "odd"),
        ("[network]\nwg_port = 70000\n", "network.wg_port", "70000", "port number"),
        ('[agent]\nwg_endpoint = "node1.example"\n', "agent.wg_endpoint", '"node1.example"', "host names"),
        (
            "[network]\nwg_reconcile_interval_secs = 0\n",
            "network.wg_reconcile_interval_secs",
            "0",
            "at least",
        ),
        (
            '[network]\nwg_interface = "a-very-long-interface"\n',
            "network.wg_interface",
            '"a-very-long-interface"',
            "at most 15",
        ),
        (
            '[accounting]\ndatabase_url = "mysql://x"\n',
            "accounting.database_url",
            '"mysql://x"',
            "postgresql",
        ),
    ],
)
def test_wrong_type_or_value(text: str, key: str, value: str, reason: str) -> None:
    err = _error(text)
    _assert_names(err, key, value)
    assert reason in str(err).splitlines()[0]


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("controller.listen_addr", "0.0.0.0:99999"),
        ("controller.rest_addr", "host:port"),
        ("controller.raft_listen_addr", ":6821"),
        ("agent.listen_addr", "[::1"),
    ],
)
def test_bad_address(key: str, value: str) -> None:
    section, name = key.split(".")
    err = _error(f'[{section}]\n{name} = "{value}"\n')
    _assert_names(err, key, f'"{value}"')
    assert "bad address" in str(err)


def test_bad_peer_address_names_its_index() -> None:
    _assert_names(_error('[controller]\npeers = ["a:6821", "b:x"]\n'), "controller.peers[1]", '"b:x"')


def test_prerender_versions_names_only_served_versions() -> None:
    assert parse_config_text("[rest]\nprerender_versions = []\n").rest.prerender_versions == ()
    err = _error('[rest]\nprerender_versions = ["v0.0.42", "v0.0.39"]\n')
    _assert_names(err, "rest.prerender_versions[1]", '"v0.0.39"')
    assert 'must be a REST version Spur serves: "v0.0.38", "v0.0.40", "v0.0.41", "v0.0.42"' in str(err)
    assert len(str(err).splitlines()) == 1
    _assert_names(_error("[rest]\nprerender_versions = true\n"), "rest.prerender_versions", "true")


def test_duplicate_peer() -> None:
    err = _error('[controller]\npeers = ["a:6821", "A:6821"]\n')
    _assert_names(err, "controller.peers[1]", '"A:6821"')
    assert "duplicate of peers[0]" in str(err)


@pytest.mark.parametrize("cidr", ["10.44.0.0", "10.44.0.0/33", "10.44.0.1/16", "banana/8"])
def test_bad_cidr(cidr: str) -> None:
    err = _error(f'[network]\nwg_cidr = "{cidr}"\n')
    _assert_names(err, "network.wg_cidr", f'"{cidr}"')
    assert "bad CIDR" in str(err)


def test_overlapping_pod_and_service_cidrs() -> None:
    err = _error('[cluster]\npod_cidr = "10.0.0.0/8"\nservice_cidr = "10.43.0.0/16"\n')
    _assert_names(err, "cluster.service_cidr", '"10.43.0.0/16"')
    assert "overlaps cluster.pod_cidr (10.0.0.0/8)" in str(err)


def test_overlap_with_a_defaulted_key_shows_the_default() -> None:
    err = _error('[cluster]\npod_cidr = "10.43.0.0/24"\n')
    assert str(err).startswith('test.conf: cluster.service_cidr = "10.43.0.0/16" (default): overlaps')


def test_pod_cidr_overlapping_wireguard_mesh_when_both_enabled() -> None:
    text = '[network]\nwg_enabled = true\nwg_cidr = "10.42.128.0/20"\n[cluster]\nenabled = true\n'
    err = _error(text)
    _assert_names(err, "cluster.pod_cidr", '"10.42.0.0/16"')
    assert "network.wg_cidr" in str(err)
    parse_config_text(text.replace("enabled = true\n", "enabled = false\n", 1))  # mesh off: no conflict


def test_two_default_partitions() -> None:
    err = _error('[[partitions]]\nname = "a"\ndefault = true\n[[partitions]]\nname = "b"\ndefault = true\n')
    _assert_names(err, "partitions[1].default", "true")
    assert "'a' is already the default" in str(err)


def test_duplicate_partition_name() -> None:
    _assert_names(
        _error('[[partitions]]\nname = "a"\n[[partitions]]\nname = "a"\n'), "partitions[1].name", '"a"'
    )


def test_partition_without_name() -> None:
    err = _error('[[partitions]]\nstate = "UP"\n')
    assert str(err) == "test.conf: partitions[0].name: required key is missing"


def test_jwt_key_and_key_file_both_set() -> None:
    err = _error('[auth]\njwt_key = "secret"\njwt_key_file = "/etc/spur/jwt.key"\n')
    _assert_names(err, "auth.jwt_key_file", '"/etc/spur/jwt.key"')
    assert "not both" in str(err)


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("[controller]\nheartbeat_interval_secs = 90\n", "controller.node_timeout_secs"),
        ("[controller]\nelection_timeout_max_ms = 900\n", "controller.election_timeout_max_ms"),
        ("[controller]\nheartbeat_ms = 1000\n", "controller.heartbeat_ms"),
        ("[controller]\nnode_id = 2\n", "controller.node_id"),
        ('[controller]\nnode_id = 4\npeers = ["a:1", "b:1", "c:1"]\n', "controller.node_id"),
        ("[controller]\nnode_id = 0\n", "controller.node_id"),
    ],
)
def test_inconsistent_controller_settings(text: str, key: str) -> None:
    assert _error(text).key == key


def test_toml_syntax_error_names_file_and_line(tmp_path: Path) -> None:
    conf = tmp_path / "broken.conf"
    conf.write_text('cluster_name = "x"\n\n[controller]\nlisten_addr = 0.0.0.0:6817\n')
    with pytest.raises(ConfigError) as exc:
        load_config(conf)
    msg = str(exc.value)
    assert msg.startswith(f"{conf}: line 4, column")
    assert "TOML syntax error" in msg and "listen_addr = 0.0.0.0:6817" in msg


def test_non_utf8_file(tmp_path: Path) -> None:
    conf = tmp_path / "latin1.conf"
    conf.write_bytes('cluster_name = "caf\xe9"\n'.encode("latin-1"))
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_config(conf)


def test_all_problems_are_listed_first_one_first() -> None:
    err = _error('[controller]\nagent_port = "x"\n[network]\nwg_cidr = "nope"\n')
    lines = str(err).splitlines()
    assert lines[0].startswith('test.conf: controller.agent_port = "x"')
    assert lines[1] == "and 1 more problem:"
    assert lines[2].strip().startswith('test.conf: network.wg_cidr = "nope"')
    assert [p.key for p in err.problems] == ["controller.agent_port", "network.wg_cidr"]


# --- hostlist and time specs (validated by spur.core modules, imported lazily) --------------------


class _FakeHostlistError(ValueError):
    pass


def _install_fakes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Stand-ins for spur.core.hostlist/timespec that reject anything containing "bad"."""

    def expand(expr: str) -> list[str]:
        if "bad" in expr:
            raise _FakeHostlistError(f"unbalanced bracket in {expr!r}")
        return [expr]

    def parse_time_limit(spec: str) -> int:
        if "bad" in spec:
            raise ValueError(f"invalid time {spec!r}")
        return -1 if spec == "UNLIMITED" else 60

    monkeypatch.setitem(sys.modules, "spur.core.hostlist", types.SimpleNamespace(expand=expand))
    monkeypatch.setitem(
        sys.modules, "spur.core.timespec", types.SimpleNamespace(parse_time_limit=parse_time_limit)
    )


def test_partition_hostlist_error_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    _install_fakes(monkeypatch)
    err = _error('[[partitions]]\nname = "a"\n[[partitions]]\nname = "b"\nnodes = "bad[1-"\n')
    _assert_names(err, "partitions[1].nodes", '"bad[1-"')
    assert "bad hostlist: unbalanced bracket" in str(err)
    assert parse_config_text('[[partitions]]\nname = "a"\nnodes = "all"\n').partitions[0].nodes == "ALL"


def test_node_name_hostlist_error_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    _install_fakes(monkeypatch)
    _assert_names(_error('[[nodes]]\nname = "bad["\n'), "nodes[0].name", '"bad["')


def test_partition_time_error_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    _install_fakes(monkeypatch)
    err = _error('[[partitions]]\nname = "a"\n[[partitions]]\nname = "b"\nmax_time = "bad"\n')
    _assert_names(err, "partitions[1].max_time", '"bad"')
    assert "bad time limit: invalid time" in str(err)
    _assert_names(
        _error('[[partitions]]\nname = "a"\ndefault_time = "bad"\n'), "partitions[0].default_time", '"bad"'
    )


def test_partition_time_limits_in_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    _install_fakes(monkeypatch)
    p = parse_config_text('[[partitions]]\nname = "a"\nmax_time = "1"\n').partitions[0]
    assert (p.max_time_secs, p.default_time_secs) == (60, 60)  # default_time unset -> max_time
    assert SpurConfig().default_partition.max_time_secs == -1


def test_real_hostlist_module_rejects_bad_expression() -> None:
    pytest.importorskip("spur.core.hostlist")
    _assert_names(
        _error('[[partitions]]\nname = "p"\nnodes = "node[1-"\n'), "partitions[0].nodes", '"node[1-"'
    )
    assert parse_config_text('[[partitions]]\nname = "p"\nnodes = "node[01-04],gpu1"\n').partitions[0].nodes


def test_real_timespec_module() -> None:
    pytest.importorskip("spur.core.timespec")
    _assert_names(
        _error('[[partitions]]\nname = "p"\nmax_time = "soon"\n'), "partitions[0].max_time", '"soon"'
    )
    p = parse_config_text(
        '[[partitions]]\nname = "p"\nmax_time = "1-00:00:00"\ndefault_time = "30"\n'
    ).partitions[0]
    assert (p.max_time_secs, p.default_time_secs) == (86400, 1800)
