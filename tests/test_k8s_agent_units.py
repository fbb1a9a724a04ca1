"""Pure parts of spurd's k0s unit management (spur.agent.k0s)."""

from __future__ import annotations

import pytest

from spur.agent.discovery import Gpu
from spur.agent.k0s import (
    K0sError,
    cdi_specs,
    component_state,
    parse_show,
    render_unit,
    require_root,
    unit_detail,
    unit_owned,
    unit_role,
)


def test_not_root_is_said_plainly():
    with pytest.raises(K0sError, match="spurd must run as root to manage k0s"):
        require_root(euid=1000)
    require_root(euid=0)


def test_unit_marks_spurd_ownership_and_role():
    text = render_unit(["/usr/local/bin/k0s", "worker", "--token-file", "/etc/spur/k0s/join-token"], "worker")
    assert unit_owned(text) and unit_role(text) == "worker"
    assert "ExecStart=/usr/local/bin/k0s worker --token-file /etc/spur/k0s/join-token" in text
    assert "Restart=always" in text and "WantedBy=multi-user.target" in text
    # a unit written by `k0s install` is not spurd's
    assert not unit_owned("[Unit]\nDescription=k0s - Zero Friction Kubernetes\n[Service]\nExecStart=/usr/local/bin/k0s worker\n")


def test_component_state():
    assert component_state(False, "inactive", False) == "absent"
    assert component_state(True, "active", True) == "active"
    assert component_state(True, "active", False) == "starting"
    assert component_state(True, "failed", False) == "failed"
    assert parse_show("ActiveState=active\nMainPID=42\n") == {"ActiveState": "active", "MainPID": "42"}


def test_cdi_specs_per_vendor():
    specs = cdi_specs([
        Gpu(0, "amd", "mi300x", "0000:03:00.0", "MI300X", 0, device_minor=128),
        Gpu(1, "amd", "mi300x", "0000:04:00.0", "MI300X", 1, device_minor=129),
        Gpu(2, "nvidia", "a100", "0000:07:00.0", "A100", 0, device_minor=0),
        Gpu(3, "nvidia", "a100", "0000:08:00.0", "A100", 1),  # device node unknown: not injectable
    ])
    amd = specs["spur-amd-gpu.json"]
    assert amd["kind"] == "amd.com/gpu" and amd["cdiVersion"] == "0.6.0"
    assert [d["containerEdits"]["deviceNodes"][0]["path"] for d in amd["devices"]] == [
        "/dev/dri/renderD128", "/dev/dri/renderD129"]
    assert amd["containerEdits"]["deviceNodes"] == [{"path": "/dev/kfd"}]
    nv = specs["spur-nvidia-gpu.json"]
    assert nv["kind"] == "nvidia.com/gpu" and [d["name"] for d in nv["devices"]] == ["0"]
    assert cdi_specs([]) == {}


def test_unit_detail_from_systemd_252_show_output():
    """Readings as systemd 252 gives them (integration/test_systemd_k0s.py): a Restart=always k0s
    that exited waits as activating/auto-restart, never failed; its exit is in Result/ExecMainStatus."""
    restarting = parse_show(
        "Result=exit-code\nExecMainStatus=1\nNRestarts=2\nActiveState=activating\nSubState=auto-restart\n"
    )
    assert unit_detail(restarting) == "k0s exited (exit-code, exit status 1); systemd restarts it (restart 2)"
    exec_failed = {"ActiveState": "activating", "SubState": "auto-restart", "Result": "exit-code",
                   "ExecMainStatus": "203", "NRestarts": "0"}
    assert "exit status 203" in unit_detail(exec_failed)
    assert unit_detail({"ActiveState": "failed", "SubState": "failed", "Result": "start-limit-hit"}) == (
        "k0s unit failed (start-limit-hit)"
    )
    assert unit_detail({"ActiveState": "failed", "Result": "exit-code", "ExecMainStatus": "1"}) == (
        "k0s unit failed (exit-code, exit status 1)"
    )
    # a clean stop (SIGTERM: ExecMainStatus=15, Result=success) and a running unit say nothing
    assert unit_detail({"ActiveState": "inactive", "SubState": "dead", "Result": "success", "ExecMainStatus": "15"}) == ""
    assert unit_detail({"ActiveState": "active", "SubState": "running", "Result": "success"}) == ""
