"""Every spur.conf key says when a change takes effect (spur.config.applies), and the reference shows it."""

from __future__ import annotations

from dataclasses import replace

import pytest

from spur.config import parse_config_text
from spur.config.applies import APPLIES, Applies, mark_of, restart_needed, schema_keys
from spur.config.dump import reference_markdown
from spur.config.model import SpurConfig


def test_every_schema_key_has_a_mark_and_no_mark_is_stale() -> None:
    keys = schema_keys()
    assert len(keys) == len(set(keys))
    missing = [k for k in keys if k not in APPLIES]
    stale = [k for k in APPLIES if k not in keys]
    assert missing == [], f"add these keys to spur.config.applies.APPLIES: {missing}"
    assert stale == [], f"these marks name no key: {stale}"
    assert all(isinstance(m.applies, Applies) for m in APPLIES.values())


def test_reference_rows_carry_the_mark() -> None:
    ref = reference_markdown()
    assert "| Key | Default | Takes effect | Meaning |" in ref
    assert "| `node_timeout_secs` | `90` | live |" in ref
    row = next(line for line in ref.splitlines() if line.startswith("| `heartbeat_ms` |"))
    assert "| restart spurctld |" in row
    row = next(line for line in ref.splitlines() if line.startswith("| `wg_interface` |"))
    assert "| restart spurd |" in row
    row = next(line for line in ref.splitlines() if line.startswith("| `plugin` |"))
    assert "restart spurctld (reconfigure refuses a changed plugin)" in row


def test_mark_of_unknown_key_names_it() -> None:
    with pytest.raises(KeyError, match="controller.nope"):
        mark_of("controller.nope")


def test_the_leaders_live_sections_are_marked_live() -> None:
    # What Controller.reconfigure copies: [scheduler] but the plugin, [[partitions]], [priority],
    # accounting.enforce and the node timeout.
    for key in schema_keys():
        section = key.rpartition(".")[0]
        if section in ("partitions", "priority") or (section == "scheduler" and key != "scheduler.plugin"):
            assert mark_of(key).applies is Applies.LIVE, key
    assert mark_of("accounting.enforce").applies is Applies.LIVE
    assert mark_of("accounting.database_url").applies is Applies.SPURCTLD
    assert mark_of("controller.node_timeout_secs").applies is Applies.LIVE
    for key in schema_keys():
        if key.startswith(("agent.", "rest.", "auth.", "admission.")):
            assert mark_of(key).applies is not Applies.LIVE, key


def test_restart_needed_names_changed_restart_keys_only() -> None:
    running = SpurConfig()
    new = parse_config_text(
        """
        cluster_name = "other"
        [controller]
        heartbeat_ms = 100
        election_timeout_min_ms = 300
        node_timeout_secs = 120
        [scheduler]
        interval_secs = 7
        [auth]
        jwt_key = "s3cret-value"
        [agent]
        node_name = "n9"
        [cluster]
        k8s_drift_correction = false
        [[partitions]]
        name = "gpu"
        """,
        source="spur.conf",
    )
    got = restart_needed(running, new)
    assert got == [
        "cluster_name (restart spurctld and spurd)",
        "controller.election_timeout_min_ms (restart spurctld)",
        "controller.heartbeat_ms (restart spurctld)",
        "auth.jwt_key (restart spurctld and spurd)",
        "agent.node_name (restart spurd)",
    ]
    assert not any("s3cret" in line for line in got)  # names only, never values
    assert restart_needed(running, replace(running)) == []
