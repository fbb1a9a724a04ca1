"""spurd's metrics address: agent.metrics_addr by default, --metrics-addr overrides ('off' = none),
and [metrics] enabled = false turns the endpoint off."""

from __future__ import annotations

from pathlib import Path

import pytest

from spur.agent.main import UsageError, parse_args


def test_default_and_flag() -> None:
    assert parse_args(["--name", "n1"]).metrics_addr == "127.0.0.1:6824"
    assert parse_args(["--name", "n1", "--metrics-addr", "0.0.0.0:9100"]).metrics_addr == "0.0.0.0:9100"
    assert parse_args(["--name", "n1", "--metrics-addr", "off"]).metrics_addr is None
    with pytest.raises(UsageError, match="--metrics-addr"):
        parse_args(["--name", "n1", "--metrics-addr", "nope"])


def test_config_file_sets_and_disables(tmp_path: Path) -> None:
    conf = tmp_path / "spur.conf"
    conf.write_text('[agent]\nmetrics_addr = "127.0.0.1:9200"\n')
    assert parse_args(["--name", "n1", "-f", str(conf)]).metrics_addr == "127.0.0.1:9200"
    conf.write_text('[agent]\nmetrics_addr = "127.0.0.1:9200"\n[metrics]\nenabled = false\n')
    assert parse_args(["--name", "n1", "-f", str(conf)]).metrics_addr is None
