"""sd_notify without libsystemd: what a Type=notify service manager receives."""

from __future__ import annotations

import os
import socket
from pathlib import Path

from spur.sdnotify import notify, notify_address


def test_no_socket_means_no_op() -> None:
    assert notify_address({}) is None
    assert notify("READY=1", env={}) is False
    assert notify_address({"NOTIFY_SOCKET": "relative/name"}) is None


def test_ready_reaches_a_path_socket(tmp_path: Path) -> None:
    path = tmp_path / "notify"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as manager:
        manager.bind(str(path))
        assert notify("READY=1\nSTATUS=serving", env={"NOTIFY_SOCKET": str(path)}) is True
        assert manager.recv(4096) == b"READY=1\nSTATUS=serving"


def test_abstract_socket_names() -> None:
    name = f"spur-test-notify-{os.getpid()}"
    assert notify_address({"NOTIFY_SOCKET": "@" + name}) == b"\0" + name.encode()
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as manager:
        manager.bind(b"\0" + name.encode())
        assert notify("STOPPING=1", env={"NOTIFY_SOCKET": "@" + name})
        assert manager.recv(4096) == b"STOPPING=1"


def test_a_vanished_manager_is_logged_not_raised(tmp_path: Path) -> None:
    assert notify("READY=1", env={"NOTIFY_SOCKET": str(tmp_path / "gone")}) is False
