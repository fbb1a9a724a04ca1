"""What `scontrol reconfigure` changes in a running controller (spur.controller.reconfig) agrees with the
marks of spur.config.applies; what it prints (spur.cli.scontrol.reconfigure_lines); show config rows."""

from __future__ import annotations

from pathlib import Path

import pytest

from spur.cli.scontrol import reconfigure_lines
from spur.config import parse_config_text
from spur.config.applies import Applies, mark_of, schema_keys
from spur.config.model import SpurConfig
from spur.config.slurm_view import slurm_rows
from spur.controller.reconfig import PluginChanged, apply_live, reread_for_leadership
from spur.rpc.proto import spur_pb2 as pb

# Every live key changed, and a good number of restart keys.
CHANGED = """
cluster_name = "other"
[controller]
heartbeat_interval_secs = 3
node_timeout_secs = 60
kill_grace_secs = 5
heartbeat_ms = 120
snapshot_every = 77
[scheduler]
interval_secs = 0.5
min_interval_secs = 0.01
max_job_test = 12
enforce_part_limits = "ALL"
[[partitions]]
name = "gpu"
max_time = "1:00:00"
[accounting]
database_url = "postgresql://spur:pw@db/spur"
history_max_jobs = 5
enforce = ["associations"]
[priority]
weight_age = 1
weight_fairshare = 2
weight_job_size = 3
weight_partition = 4
weight_qos = 5
max_age = "1-00:00:00"
decay_half_life = "2-00:00:00"
[auth]
mode = "required"
jwt_key = "0123456789abcdef0123456789abcdef"
[admission]
mode = "token"
[rest]
max_body_bytes = 4096
[metrics]
enabled = false
[network]
wg_port = 51000
[cluster]
k8s_drift_correction = false
"""


def _value(cfg: SpurConfig, key: str) -> object:
    section, _, name = key.rpartition(".")
    return getattr(getattr(cfg, section), name) if section else getattr(cfg, name)


def test_apply_live_takes_exactly_the_live_keys() -> None:
    running = SpurConfig()
    new = parse_config_text(CHANGED, source="spur.conf")
    got = apply_live(running, new)
    assert got.partitions == new.partitions
    for key in schema_keys():
        section = key.rpartition(".")[0]
        if section in ("partitions", "nodes"):
            continue
        applies = mark_of(key).applies
        if applies is Applies.LIVE:
            assert _value(new, key) != _value(running, key), f"CHANGED must change live key {key}"
            assert _value(got, key) == _value(new, key), key
        elif applies in (Applies.SPURCTLD, Applies.BOTH):
            assert _value(got, key) == _value(running, key), key
    assert got.controller.kill_grace_secs == 5  # spurd's own copy needs a restart (its mark)


def test_a_changed_plugin_is_refused() -> None:
    new = parse_config_text('[scheduler]\nplugin = "other"\n', source="spur.conf")
    with pytest.raises(PluginChanged, match="restart spurctld"):
        apply_live(SpurConfig(), new)


def test_reconfigure_lines() -> None:
    direct = pb.ReconfigureResponse(applied=["scheduler", "partitions"], node_id=1, received_by=1)
    assert reconfigure_lines(direct) == ["reconfigured by controller 1: scheduler, partitions"]
    forwarded = pb.ReconfigureResponse(
        applied=["scheduler"], node_id=2, received_by=3, not_applied=["controller.heartbeat_ms (restart spurctld)"]
    )
    assert reconfigure_lines(forwarded) == [
        "reconfigure runs on the leader only: controller 3 forwarded it to controller 2 (leader); "
        "controller 3 keeps the configuration it read until it restarts or leads",
        "reconfigured by controller 2: scheduler",
        "not applied until a restart: controller.heartbeat_ms (restart spurctld)",
    ]
    old_server = pb.ReconfigureResponse(applied=["scheduler"], node_id=2)  # no received_by
    assert reconfigure_lines(old_server) == ["reconfigured by controller 2: scheduler"]


def test_show_config_rows_use_slurm_names_and_hold_no_secret() -> None:
    cfg = parse_config_text(CHANGED, source="spur.conf")
    rows = dict(slurm_rows(cfg, "/etc/spur/spur.conf", state_dir="/var/lib/x"))
    assert rows["SlurmdTimeout"] == "60 sec"
    assert rows["KillWait"] == "5 sec"
    assert rows["SchedulerParameters"] == "bf_max_job_test=12,sched_interval=0.5"
    assert rows["SchedulerType"] == "sched/backfill"
    assert rows["EnforcePartLimits"] == "ALL"
    assert rows["PriorityMaxAge"] == "1-00:00:00"
    assert rows["AccountingStorageEnforce"] == "associations"
    assert rows["SLURM_CONF"] == "/etc/spur/spur.conf"
    assert rows["StateSaveLocation"] == "/var/lib/x"
    text = repr(rows)
    assert "0123456789abcdef" not in text and "pw@" not in text
    assert [k for k, _ in slurm_rows(cfg)] == sorted(rows)


def test_a_new_leader_rereads_its_file(tmp_path: Path) -> None:
    from spur.config import load_config
    from spur.controller.app import Controller

    conf = tmp_path / "spur.conf"
    conf.write_text(f'[controller]\nstate_dir = "{tmp_path / "ctl"}"\nnode_timeout_secs = 40\n')
    ctl = Controller(load_config(conf), config_path=conf)
    conf.write_text(
        f'[controller]\nstate_dir = "{tmp_path / "ctl"}"\nnode_timeout_secs = 50\nheartbeat_ms = 120\n'
        "[scheduler]\nmax_job_test = 3\n"
    )
    reread_for_leadership(ctl)
    assert ctl.cfg.controller.node_timeout_secs == 50
    assert ctl.cfg.scheduler.max_job_test == 3
    assert ctl.cfg.controller.heartbeat_ms == 200  # a restart key keeps its start value
    conf.write_text("[controller\n")  # unusable: the leader keeps what it has
    reread_for_leadership(ctl)
    assert ctl.cfg.controller.node_timeout_secs == 50


async def test_agents_follow_the_heartbeat_interval_the_leader_answers(autojump_clock: object) -> None:
    import trio

    from spur.agent.registration import Registrar

    beats: list[float] = []

    async def call(name: str, request: object) -> object:
        if name == "RegisterNode":
            return pb.RegisterNodeResponse(heartbeat_interval_secs=10)
        beats.append(trio.current_time())
        return pb.HeartbeatResponse(known=True, heartbeat_interval_secs=3)  # after a reconfigure

    async def build() -> pb.RegisterNodeRequest:
        return pb.RegisterNodeRequest(name="n1")

    registrar = Registrar(call, build_request=build, running_job_ids=list, node_name="n1")
    async with trio.open_nursery() as nursery:
        await nursery.start(registrar.run)
        await trio.sleep(20)
        nursery.cancel_scope.cancel()
    assert [round(t) for t in beats] == [10, 13, 16, 19]
