"""The shipped sample configs load, and docs/configuration.md documents every key."""

from __future__ import annotations

from pathlib import Path

import pytest

from spur.config import load_config, resolve_node_id
from spur.config.dump import reference_markdown
from spur.config.schema import SECTIONS, TABLE_ARRAYS, SpurConfigSchema

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("name", ["spur.conf", "spur-ha.conf", "spur-k8s.conf"])
def test_sample_loads(name: str) -> None:
    cfg = load_config(ROOT / "conf" / name)
    assert sum(p.default for p in cfg.partitions) == 1


@pytest.mark.parametrize("name", ["spur.conf", "spur-ha.conf", "spur-k8s.conf"])
def test_samples_with_auth_use_tls_required(name: str) -> None:
    cfg = load_config(ROOT / "conf" / name)
    assert cfg.auth.mode == "required" and cfg.tls.mode == "required"
    assert cfg.tls.cert_file and cfg.tls.key_file and cfg.tls.ca_file


def test_single_host_sample() -> None:
    cfg = load_config(ROOT / "conf" / "spur.conf")
    assert cfg.controller.peers == ()
    assert resolve_node_id(cfg, "whatever") == 1
    assert cfg.default_partition.name == "debug"


def test_ha_sample_has_three_controllers_found_by_hostname() -> None:
    cfg = load_config(ROOT / "conf" / "spur-ha.conf")
    assert len(cfg.controller.peers) == 3
    assert [resolve_node_id(cfg, h) for h in ("ctl1", "ctl2.hpc.example.com", "ctl3")] == [1, 2, 3]
    assert len(cfg.agent.controller) == 3
    assert cfg.nodes[1].gres == ("gpu:a100:4",)


def test_k8s_sample_enables_cluster_and_mesh() -> None:
    cfg = load_config(ROOT / "conf" / "spur-k8s.conf")
    assert cfg.cluster.enabled and cfg.network.wg_enabled
    assert cfg.cluster.control_plane_replicas == 3


def test_docs_reference_is_current() -> None:
    text = (ROOT / "docs" / "configuration.md").read_text()
    assert reference_markdown() in text, "regenerate the reference: python -m spur.config --markdown"


def test_docs_reference_lists_every_key() -> None:
    ref = reference_markdown()
    for name, schema in {**SECTIONS, **TABLE_ARRAYS}.items():
        assert f"### [{name}]" in ref or f"### [[{name}]]" in ref
        for key in schema._declared_fields:
            assert f"| `{key}` |" in ref, (name, key)
    assert '| `cluster_name` | `"spur"` |' in ref
    assert "| `node_timeout_secs` | `90` |" in ref
    assert len(SpurConfigSchema._declared_fields) == 1 + len(SECTIONS) + len(TABLE_ARRAYS)


def test_kubernetes_example_conf_matches_the_statefulset() -> None:
    cfg = load_config(ROOT / "examples" / "k8s" / "spur.conf")
    assert cfg.cluster_name == "spur-k8s"
    assert cfg.controller.peers == tuple(
        f"spurctld-{i}.spurctld.spur.svc.cluster.local:6821" for i in range(3)
    )
    assert [resolve_node_id(cfg, f"spurctld-{i}") for i in range(3)] == [1, 2, 3]
    assert cfg.controller.node_id is None
    assert (cfg.scheduler.interval_secs, cfg.scheduler.plugin) == (2, "backfill")
    assert cfg.default_partition.name == "default" and cfg.default_partition.state == "UP"
    text = (ROOT / "examples" / "k8s" / "spur.conf").read_text()
    assert "# [accounting]\n# database_url = " in text and "# [auth]\n" in text


def test_kubernetes_example_conf_commented_sections_load_when_enabled(tmp_path: Path) -> None:
    text = (ROOT / "examples" / "k8s" / "spur.conf").read_text()
    enabled = text.replace("# [accounting]\n# ", "[accounting]\n").replace("# [auth]\n# mode", "[auth]\nmode")
    enabled = enabled.replace("# jwt_key", "jwt_key")
    (tmp_path / "spur.conf").write_text(enabled)
    cfg = load_config(tmp_path / "spur.conf")
    assert cfg.accounting.database_url.startswith("postgresql://")
    assert cfg.auth.mode == "required" and cfg.auth.jwt_key
