"""Daemon start-up failures are one line naming the port or directory and what to do, with one
documented exit code per kind (spur.startup): 1 cannot start here, 2 bad flag, 78 configuration."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from integration.harness import BIN, Cluster, free_port, spurd_argv

pytestmark = pytest.mark.integration


def run(
    argv: list[str], env: dict[str, str] | None = None, timeout: float = 30
) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env or dict(os.environ))


def last_line(proc: subprocess.CompletedProcess) -> str:
    return proc.stderr.strip().splitlines()[-1]


def test_second_controller_on_a_busy_port(cluster: Cluster, tmp_path: Path) -> None:
    proc = run(
        [str(BIN / "spurctld"), "-D", "--state-dir", str(tmp_path / "other"), "--listen", cluster.address]
    )
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr and "sub-exception" not in proc.stderr
    assert last_line(proc) == (
        f"spurctld: error: cannot listen on 127.0.0.1:{cluster.port}: Address already in use: another process "
        f"(another spurctld?) holds port {cluster.port}; stop it or choose another address with --listen"
    )


def test_second_controller_on_a_state_dir_in_use(cluster: Cluster) -> None:
    state = cluster.root / "ctl"
    proc = run(
        [str(BIN / "spurctld"), "-D", "--state-dir", str(state), "--listen", f"127.0.0.1:{free_port()}"]
    )
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert last_line(proc) == (
        f"spurctld: error: Raft storage directory {state / 'raft'} is in use by another process; "
        "stop the other spurctld or give this one another --state-dir"
    )


def test_agent_on_a_busy_port(cluster: Cluster) -> None:
    argv = spurd_argv(cluster.root, "busy", [cluster.address], "127.0.0.1", cluster.port, 1, 1000, None)
    proc = run(argv, env=cluster.env)
    assert proc.returncode == 1
    errors = [line for line in proc.stderr.splitlines() if line.startswith("spurd: error:")]
    assert "Traceback" not in proc.stderr
    assert len(errors) == 1
    assert errors[0].startswith(
        f"spurd: error: cannot listen on 127.0.0.1:{cluster.port}: Address already in use; "
    )


@pytest.fixture
def bad_conf(tmp_path: Path) -> Path:
    conf = tmp_path / "bad.conf"
    conf.write_text('[scheduler]\nenforce_part_limits = "SOMETIMES"\n')
    return conf


def test_config_errors_exit_78_in_every_daemon(bad_conf: Path, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "SPUR_CONF"}
    for argv in (
        [str(BIN / "spurctld"), "-D", "-f", str(bad_conf), "--state-dir", str(tmp_path / "s")],
        [str(BIN / "spurd"), "-D", "-f", str(bad_conf), "--state-dir", str(tmp_path / "a")],
    ):
        proc = run(argv, env=env)
        assert proc.returncode == 78, proc.stderr
        assert str(bad_conf) in proc.stderr and "enforce_part_limits" in proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1


def test_spurd_reads_spur_conf(bad_conf: Path, tmp_path: Path) -> None:
    """spurd honours $SPUR_CONF as spurctld and the commands do (it used to ignore it and start)."""
    env = {**os.environ, "SPUR_CONF": str(bad_conf)}
    proc = run([str(BIN / "spurd"), "-D", "--state-dir", str(tmp_path / "a")], env=env, timeout=20)
    assert proc.returncode == 78
    assert proc.stderr.strip().startswith(f"spurd: error: {bad_conf}")


def test_bad_flag_exits_2_in_every_daemon() -> None:
    for daemon in ("spurctld", "spurd"):
        proc = run([str(BIN / daemon), "--no-such-flag"])
        assert proc.returncode == 2, (daemon, proc.stderr)
