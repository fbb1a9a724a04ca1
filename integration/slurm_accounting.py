"""Accounting for the private real Slurm of :mod:`integration.slurm_real`: MariaDB and slurmdbd.

:func:`start_accounting` starts a private MariaDB (its own data directory and loopback port, never the
machine's) and a slurmdbd in front of it, registers the cluster with ``sacctmgr``, and returns the
processes in start order for the caller to stop in reverse. Everything lives under the cluster's
temporary directory, so two clusters on one machine never share a database.
"""

from __future__ import annotations

import secrets
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

# The programs accounting needs, beside those of slurm_real.slurm_binaries().
ACCOUNTING_PROGRAMS = ("slurmdbd", "sacctmgr", "sacct", "mariadbd", "mariadb-install-db", "mariadb")
# Debian packages that provide them.
ACCOUNTING_PACKAGES = ("slurmdbd", "mariadb-server", "mariadb-client")

DB_NAME = "slurm_acct_db"
DB_USER = "slurm"


class AccountingError(Exception):
    """A database or slurmdbd did not come up; the message carries the tail of its log."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _tail(path: Path, lines: int = 12) -> str:
    if not path.exists():
        return f"({path.name}: no log)"
    return f"--- {path.name}\n" + "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def slurmdbd_conf(root: Path, *, dbd_port: int, db_port: int, password: str, munge_socket: Path) -> str:
    """slurmdbd.conf for a slurmdbd on ``dbd_port`` storing into the MariaDB on ``db_port``. Pure."""
    return "\n".join(
        [
            "AuthType=auth/munge",
            f"AuthInfo=socket={munge_socket}",
            "DbdHost=localhost",
            "DbdAddr=127.0.0.1",
            f"DbdPort={dbd_port}",
            "SlurmUser=root",
            f"PidFile={root / 'slurmdbd.pid'}",
            f"LogFile={root / 'slurmdbd.log'}",
            "StorageType=accounting_storage/mysql",
            "StorageHost=127.0.0.1",
            f"StoragePort={db_port}",
            f"StorageUser={DB_USER}",
            f"StoragePass={password}",
            f"StorageLoc={DB_NAME}",
            "",
        ]
    )


def start_accounting(
    bins: dict[str, str],
    root: Path,
    env: dict[str, str],
    *,
    dbd_port: int,
    cluster: str,
    munge_socket: Path,
    log: IO[bytes],
) -> list[subprocess.Popen]:
    """MariaDB + slurmdbd under ``root`` (slurmdbd.conf beside ``env["SLURM_CONF"]``, where slurmdbd
    looks for it), with ``cluster`` registered; returns [mariadbd, slurmdbd]. Raises AccountingError."""
    procs: list[subprocess.Popen] = []
    data = root / "mariadb"
    db_socket = root / "mariadb.sock"
    db_port = _free_port()
    init = subprocess.run(
        [bins["mariadb-install-db"], "--no-defaults", f"--datadir={data}", "--user=root",
         "--auth-root-authentication-method=socket", "--skip-test-db"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    if init.returncode != 0:
        raise AccountingError("mariadb-install-db failed:\n" + (init.stderr or init.stdout)[-2000:])
    mariadbd = [
        bins["mariadbd"], "--no-defaults", f"--datadir={data}", f"--socket={db_socket}",
        f"--port={db_port}", "--bind-address=127.0.0.1", "--user=root", "--skip-name-resolve",
        f"--pid-file={root / 'mariadb.pid'}", f"--log-error={root / 'mariadb.log'}",
        "--innodb-buffer-pool-size=32M", "--innodb-log-file-size=16M", "--performance-schema=OFF",
    ]  # fmt: skip
    procs.append(subprocess.Popen(mariadbd, stdout=log, stderr=log))
    try:
        _wait_up(procs[-1], lambda: db_socket.exists() and _port_open(db_port), root / "mariadb.log", "MariaDB")
        password = secrets.token_hex(16)
        sql = (
            f"CREATE USER '{DB_USER}'@'127.0.0.1' IDENTIFIED BY '{password}';"
            f"GRANT ALL ON {DB_NAME}.* TO '{DB_USER}'@'127.0.0.1';"
        )
        grant = subprocess.run(
            [bins["mariadb"], "--no-defaults", f"--socket={db_socket}", "-u", "root", "-e", sql],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        if grant.returncode != 0:
            raise AccountingError("creating the slurm database user failed:\n" + grant.stderr[-2000:])
        conf = Path(env["SLURM_CONF"]).parent / "slurmdbd.conf"
        conf.write_text(
            slurmdbd_conf(root, dbd_port=dbd_port, db_port=db_port, password=password, munge_socket=munge_socket)
        )
        conf.chmod(0o600)  # slurmdbd refuses a readable file holding StoragePass
        procs.append(subprocess.Popen([bins["slurmdbd"], "-D"], stdout=log, stderr=log, env=env))
        _wait_up(procs[-1], lambda: _port_open(dbd_port), root / "slurmdbd.log", "slurmdbd")
        add = subprocess.run(
            [bins["sacctmgr"], "-i", "add", "cluster", cluster], env=env, capture_output=True, text=True, timeout=60
        )
        if add.returncode != 0:
            raise AccountingError(f"sacctmgr add cluster {cluster} failed:\n{add.stdout}{add.stderr}")
    except BaseException:
        for p in reversed(procs):
            p.terminate()
            p.wait(timeout=30)
        raise
    return procs


def _wait_up(proc: subprocess.Popen, ready: Callable[[], bool], log: Path, what: str) -> None:
    deadline = time.monotonic() + 60
    while not ready():
        if proc.poll() is not None:
            raise AccountingError(f"{what} exited with {proc.returncode}:\n{_tail(log)}")
        if time.monotonic() > deadline:
            raise AccountingError(f"{what} did not come up in 60 s:\n{_tail(log)}")
        time.sleep(0.1)

