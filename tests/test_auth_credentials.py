"""Where the CLI finds its credential: env, ~/.spur/token (0600 only), then the local broker."""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path

import pytest

from spur.auth.credentials import CredentialError, find_credential


@pytest.fixture
def broker(tmp_path: Path):
    """A Unix socket answering one line, like the real broker (tested live in integration)."""
    path = tmp_path / "auth.sock"
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(str(path))
    srv.listen(8)

    def serve() -> None:
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            with conn:
                conn.sendall(b"token from-broker\n")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield path
    srv.close()


def _home(tmp_path: Path, token: str | None, mode: int = 0o600) -> Path:
    home = tmp_path / "home"
    (home / ".spur").mkdir(parents=True, exist_ok=True)
    if token is not None:
        f = home / ".spur" / "token"
        f.write_text(token + "\n")
        f.chmod(mode)
    return home


def test_order(tmp_path: Path, broker: Path) -> None:
    home = _home(tmp_path, "from-file")
    env = {"SLURM_JWT": "from-slurm", "SPUR_AUTH_TOKEN": "from-spur"}
    found = find_credential(env, home=home, broker_socket=broker)
    assert (found.token, found.source) == ("from-slurm", "SLURM_JWT")
    found = find_credential(
        {"SLURM_JWT": " ", "SPUR_AUTH_TOKEN": "from-spur"}, home=home, broker_socket=broker
    )
    assert (found.token, found.source) == ("from-spur", "SPUR_AUTH_TOKEN")
    found = find_credential({}, home=home, broker_socket=broker)
    assert (found.token, found.source) == ("from-file", "~/.spur/token")
    found = find_credential({}, home=_home(tmp_path / "x", None), broker_socket=broker)
    assert (found.token, found.source) == ("from-broker", "broker")
    assert "from-broker" not in repr(found)


def test_socket_from_environment_wins(tmp_path: Path, broker: Path) -> None:
    env = {"SPUR_AUTH_SOCKET": str(broker)}
    found = find_credential(env, home=_home(tmp_path, None), broker_socket=tmp_path / "elsewhere.sock")
    assert found is not None and found.source == "broker"


def test_configured_socket_is_looked_up_only_when_needed(tmp_path: Path, broker: Path) -> None:
    asked: list[int] = []

    def configured() -> Path:
        asked.append(1)
        return broker

    assert (
        find_credential({"SLURM_JWT": "x"}, home=_home(tmp_path, None), broker_socket=configured).token == "x"
    )
    assert not asked
    assert find_credential({}, home=_home(tmp_path, None), broker_socket=configured).source == "broker"
    assert asked == [1]


def test_nothing_found(tmp_path: Path) -> None:
    assert find_credential({}, home=_home(tmp_path, None), broker_socket=tmp_path / "none.sock") is None


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o400, 0o700])
def test_token_file_must_be_0600(tmp_path: Path, mode: int) -> None:
    home = _home(tmp_path, "secret-token", mode)
    with pytest.raises(CredentialError) as exc:
        find_credential({}, home=home, broker_socket=tmp_path / "none.sock")
    text = str(exc.value)
    assert "0600" in text and "chmod 600" in text and "secret-token" not in text


def test_cli_does_not_load_pyjwt_or_trio(tmp_path: Path) -> None:
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from spur.cli.client import call_metadata\n"
        "md = call_metadata()\n"
        "assert md['authorization'] == 'Bearer abc', md\n"
        "assert 'jwt' not in sys.modules and 'trio' not in sys.modules, sorted(sys.modules)\n"
    )
    env = {**os.environ, "SLURM_JWT": "abc"}
    env.pop("SPUR_CONF", None)
    subprocess.run([sys.executable, "-c", code], check=True, env=env, cwd=tmp_path)
