"""The k0s and systemctl test doubles behave like the real tools at the interface spurd uses."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from integration.doubles import fake_systemd
from integration.harness import free_port, wait_for

BIN = Path(__file__).parent / "doubles" / "bin"


@pytest.fixture
def env(tmp_path):
    e = {
        **os.environ,
        "PATH": f"{BIN}:{os.environ['PATH']}",
        "FAKE_K0S_ROOT": str(tmp_path / "k0s"),
        "FAKE_SYSTEMD_ROOT": str(tmp_path / "systemd"),
        "FAKE_K0S_JOIN_PORT": "0",
    }
    (tmp_path / "systemd/units").mkdir(parents=True)
    try:
        yield e
    finally:
        fake_systemd.shutdown(tmp_path / "systemd")


def sh(env, *argv: str, check: bool = True) -> subprocess.CompletedProcess:
    r = subprocess.run(list(argv), env=env, capture_output=True, text=True, timeout=60)
    if check and r.returncode != 0:
        raise AssertionError(f"{argv} -> {r.returncode}\n{r.stdout}\n{r.stderr}")
    return r


def unit(env, name: str, exec_start: str) -> None:
    path = Path(env["FAKE_SYSTEMD_ROOT"]) / "units" / f"{name}.service"
    path.write_text(
        f"[Unit]\nDescription={name}\n\n[Service]\nExecStart={exec_start}\nRestart=always\nRestartSec=1\n"
    )


def test_k0s_controller_worker_join_and_ca_check(env, tmp_path):
    root = tmp_path / "k0s"
    cp, w1, w2 = root / "cp", root / "w1", root / "w2"
    unit(env, "k0scontroller", f"k0s controller --data-dir {cp}")
    unit(env, "k0sworker", f"k0s worker --token-file {root}/w1.token --data-dir {w1}")
    sh(env, "systemctl", "daemon-reload")
    sh(env, "systemctl", "enable", "k0scontroller")
    assert sh(env, "systemctl", "is-enabled", "k0scontroller").stdout.strip() == "enabled"
    r = sh(env, "systemctl", "is-active", "k0scontroller", check=False)
    assert (r.returncode, r.stdout.strip()) == (3, "inactive")
    sh(env, "systemctl", "start", "k0scontroller")
    assert sh(env, "systemctl", "is-active", "k0scontroller").stdout.strip() == "active"
    wait_for(lambda: sh(env, "k0s", "status", "--data-dir", str(cp), check=False).returncode == 0)
    assert "Role: controller" in sh(env, "k0s", "status", "--data-dir", str(cp)).stdout

    token = sh(env, "k0s", "token", "create", "--role=worker", "--data-dir", str(cp)).stdout.strip()
    (root / "w1.token").write_text(token)
    sh(env, "systemctl", "start", "k0sworker")
    wait_for(lambda: "Role: worker" in sh(env, "k0s", "status", "--data-dir", str(w1), check=False).stdout)
    joined = json.loads((cp / "fake/joined.json").read_text())
    assert [j["role"] for j in joined] == ["worker"]
    assert "certificate-authority-data" in sh(env, "k0s", "kubeconfig", "admin", "--data-dir", str(cp)).stdout

    show = sh(env, "systemctl", "show", "k0scontroller", "-p", "ActiveState,MainPID,UnitFileState").stdout
    props = dict(line.split("=", 1) for line in show.splitlines())
    assert props["ActiveState"] == "active" and props["UnitFileState"] == "enabled" and int(props["MainPID"]) > 0

    # reset refuses while running; after stop it wipes the data dir, and a new CA is born on restart
    r = sh(env, "k0s", "reset", "--data-dir", str(cp), check=False)
    assert r.returncode == 1 and "please stop k0s before reset" in r.stderr
    sh(env, "systemctl", "stop", "k0scontroller")
    assert sh(env, "systemctl", "is-active", "k0scontroller", check=False).stdout.strip() == "inactive"
    r = sh(env, "k0s", "status", "--data-dir", str(cp), check=False)
    assert r.returncode == 1 and "status.sock" in r.stderr
    sh(env, "k0s", "reset", "--data-dir", str(cp))
    assert not cp.exists()
    sh(env, "systemctl", "start", "k0scontroller")
    wait_for(lambda: sh(env, "k0s", "status", "--data-dir", str(cp), check=False).returncode == 0)

    # the old token (minted against the old CA) fails the join with a kubernetes-ca verification error
    stale = json.loads(__import__("base64").b64decode(token))
    stale["url"] = json.loads((cp / "fake/controller.json").read_text())["join_url"]
    (root / "stale.token").write_text(__import__("base64").b64encode(json.dumps(stale).encode()).decode())
    r = sh(env, "k0s", "worker", "--token-file", str(root / "stale.token"), "--data-dir", str(w2), check=False)
    assert r.returncode == 1 and "failed to verify kubernetes-ca" in r.stderr


def test_unit_restarts_and_survives_its_caller(env, tmp_path):
    marker = tmp_path / "runs"
    script = tmp_path / "job.sh"
    script.write_text(f"#!/bin/sh\necho run >> {marker}\nexit 3\n")
    script.chmod(0o755)
    unit(env, "flaky", str(script))
    sh(env, "systemctl", "daemon-reload")
    sh(env, "systemctl", "start", "flaky", check=False)
    wait_for(lambda: marker.exists() and len(marker.read_text().split()) >= 2, what="a restart")
    props = dict(line.split("=", 1) for line in sh(env, "systemctl", "show", "flaky").stdout.splitlines())
    assert int(props["NRestarts"]) >= 1 and props["ExecMainStatus"] == "3"
    sh(env, "systemctl", "stop", "flaky")
    assert sh(env, "systemctl", "is-active", "flaky", check=False).stdout.strip() == "inactive"


def test_unknown_unit_and_disabled(env):
    r = sh(env, "systemctl", "start", "nosuch", check=False)
    assert r.returncode == 5 and "Unit nosuch.service not found" in r.stderr
    unit(env, "x", "sleep 100")
    r = sh(env, "systemctl", "start", "x", check=False)
    assert r.returncode == 5, "a unit is loaded only by daemon-reload"
    sh(env, "systemctl", "daemon-reload")
    r = sh(env, "systemctl", "is-enabled", "x", check=False)
    assert (r.returncode, r.stdout.strip()) == (1, "disabled")


def test_k0s_join_port_from_config(env, tmp_path):
    port = free_port()
    cfg = tmp_path / "k0s.json"
    cfg.write_text(json.dumps({"spec": {"api": {"address": "127.0.0.1", "k0sApiPort": port}}}))
    env = {**env}
    env.pop("FAKE_K0S_JOIN_PORT")
    cp = tmp_path / "k0s/cp"
    unit(env, "cp", f"k0s controller --single --config {cfg} --data-dir {cp}")
    sh(env, "systemctl", "daemon-reload")
    sh(env, "systemctl", "start", "cp")
    wait_for(lambda: (cp / "fake/controller.json").exists())
    recorded = json.loads((cp / "fake/controller.json").read_text())
    assert recorded["join_url"] == f"http://127.0.0.1:{port}" and recorded["config"]["spec"]["api"]["k0sApiPort"] == port
    assert "SingleNode: true" in sh(env, "k0s", "status", "--data-dir", str(cp)).stdout


def test_doubles_refuse_without_a_test_root(tmp_path):
    clean = {k: v for k, v in os.environ.items() if not k.startswith("FAKE_")}
    r = subprocess.run([str(BIN / "k0s"), "status"], env=clean, capture_output=True, text=True)
    assert r.returncode == 1 and "FAKE_K0S_ROOT" in r.stderr
    r = subprocess.run([str(BIN / "systemctl"), "daemon-reload"], env=clean, capture_output=True, text=True)
    assert r.returncode == 1 and "FAKE_SYSTEMD_ROOT" in r.stderr
