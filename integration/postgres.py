"""A private PostgreSQL cluster for tests and benchmarks: initdb in a temp dir, a free port, stopped at the end.

Never the system cluster: the data directory and the unix socket directory live in a private temporary
directory (``/tmp/spur-pg-*``, removed by :meth:`PgCluster.destroy`),
the server listens on 127.0.0.1 at a free port, and :meth:`PgCluster.stop` (or ``pg_ctl stop -m
immediate`` from a fault test) ends it. When running as root, initdb and the server run as the
``postgres`` system user (PostgreSQL refuses to run as root); the root directory is handed to it.

Find the binaries with :func:`find_pg_bin` (Debian puts them in /usr/lib/postgresql/<major>/bin);
``None`` means PostgreSQL is not installed (scripts/setup.sh installs it when run as root).
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

__all__ = ["PgCluster", "find_pg_bin"]


def find_pg_bin() -> Path | None:
    """Directory holding initdb/pg_ctl/postgres (newest major version), or None when absent."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(os.path.realpath(initdb)).parent if initdb else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PgCluster:
    """One private PostgreSQL server. ``url`` is a postgresql:// URL for the ``spur`` database."""

    def __init__(self, bin_dir: Path, root: Path | None = None, *, password: str = "s3cret-pw") -> None:
        # Not under pytest's basetemp: every pytest session resets /tmp/pytest-of-<user> to 0700, which
        # would lock the postgres user out of its own data directory when it restarts.
        self._own_root = root is None
        self.root = Path(root) if root is not None else Path(tempfile.mkdtemp(prefix="spur-pg-"))
        self.bin = bin_dir
        self.data = self.root / "pgdata"
        self.sockets = self.root / "pgsock"
        self.port = _free_port()
        self.password = password
        self._as_postgres = os.geteuid() == 0

    @property
    def url(self) -> str:
        return f"postgresql://spur:{self.password}@127.0.0.1:{self.port}/spur"

    def _run(self, *argv: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
        cmd = [str(self.bin / argv[0]), *argv[1:]]
        kwargs: dict = {}
        if self._as_postgres:
            user = pwd.getpwnam("postgres")
            kwargs = {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=self.root, **kwargs)
        if check and proc.returncode != 0:
            raise RuntimeError(f"{argv[0]} failed ({proc.returncode}): {proc.stdout}\n{proc.stderr}")
        return proc

    def init(self) -> PgCluster:
        """initdb with a password-authenticated ``spur`` superuser and a ``spur`` database; then start."""
        self.root.mkdir(parents=True, exist_ok=True)
        self.sockets.mkdir(exist_ok=True)
        pwfile = self.root / "pwfile"
        pwfile.write_text(self.password + "\n")
        if self._as_postgres:
            user = pwd.getpwnam("postgres")
            for path in (self.root, self.sockets, pwfile):
                os.chown(path, user.pw_uid, user.pw_gid)
        self._run(
            "initdb",
            "-D",
            str(self.data),
            "-U",
            "spur",
            f"--pwfile={pwfile}",
            "-A",
            "scram-sha-256",
            "--no-sync",
            "-E",
            "UTF8",
            "--locale=C",
        )
        with open(self.data / "postgresql.conf", "a") as conf:
            conf.write(
                f"port = {self.port}\nlisten_addresses = '127.0.0.1'\n"
                f"unix_socket_directories = '{self.sockets}'\nfsync = off\nsynchronous_commit = off\n"
                "full_page_writes = off\nshared_buffers = 128MB\nmax_connections = 50\n"
            )
        self.start()
        self._createdb()
        return self

    def _createdb(self) -> None:
        env_pw = {"PGPASSWORD": self.password}
        cmd = [str(self.bin / "createdb"), "-h", "127.0.0.1", "-p", str(self.port), "-U", "spur", "spur"]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env={**os.environ, **env_pw})
        if proc.returncode != 0:
            raise RuntimeError(f"createdb failed: {proc.stderr}")

    def start(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.root / "pg.log"), "-w", "-t", "60", "start")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"PostgreSQL did not listen on {self.port}")

    def destroy(self) -> None:
        """Stop the server at once and remove its files (when this object created the directory)."""
        self.stop("immediate")
        if self._own_root:
            shutil.rmtree(self.root, ignore_errors=True)

    def stop(self, mode: str = "fast") -> None:
        """``pg_ctl stop -m <mode>`` (``immediate`` simulates a crash); no error if already stopped."""
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop", check=False)

    def psql(self, sql: str) -> str:
        """Run ``sql`` with psql (unaligned, tuples only) and return its output."""
        cmd = [
            str(self.bin / "psql") if (self.bin / "psql").exists() else "psql",
            "-h",
            "127.0.0.1",
            "-p",
            str(self.port),
            "-U",
            "spur",
            "-d",
            "spur",
            "-At",
            "-v",
            "ON_ERROR_STOP=1",
            "-c",
            sql,
        ]
        env = {**os.environ, "PGPASSWORD": self.password}
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
        if proc.returncode != 0:
            raise RuntimeError(f"psql failed: {proc.stderr}")
        return proc.stdout.strip()
