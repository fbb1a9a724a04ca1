"""Running Spur's commands as another local user (``runuser``), the way an unprivileged user would.

Our interpreter may sit under /root, where other users cannot reach it; :data:`PUBLIC_PYTHON` is one of
the same version that every user may execute, and the commands run through it with this checkout and
our site-packages on ``PYTHONPATH``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SITE_PACKAGES = next(p for p in sys.path if p.endswith("site-packages") and p.startswith(sys.prefix))
_SYSTEM_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
_CLI = "import sys; from spur.cli.main import main; sys.argv.pop(0); sys.exit(main())"


def _public_python() -> str | None:
    """An interpreter of this Python version that every user may run (ours may sit under /root)."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for candidate in (os.path.realpath(sys.executable), f"/usr/bin/{version}", f"/usr/local/bin/{version}"):
        path = Path(candidate)
        if path.exists() and all(p.stat().st_mode & 0o001 for p in [path, *path.parents]):
            return str(path)
    return None


PUBLIC_PYTHON = _public_python()

#: Module mark for tests that create users and run commands as them.
needs_users = pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("useradd") or not shutil.which("runuser") or PUBLIC_PYTHON is None,
    reason="needs root, useradd, runuser and a Python every user may run",
)


def run_cli_as(user: str, env: dict[str, str], args: tuple[str, ...] | list[str], cwd: Path) -> subprocess.CompletedProcess:
    """``spur``-family command ``args`` (``args[0]`` is the program name, e.g. ``sbatch``) run as
    ``user`` with exactly ``env`` (plus PYTHONPATH reaching this checkout) in ``cwd``."""
    assert PUBLIC_PYTHON is not None, "needs_users should have skipped this test"
    env = {**env, "PYTHONPATH": f"{ROOT}:{SITE_PACKAGES}"}
    argv = ["runuser", "-u", user, "--", "env", *(f"{k}={v}" for k, v in env.items()), PUBLIC_PYTHON, "-c", _CLI]
    return subprocess.run(
        [*argv, *args], cwd=cwd, env={"PATH": _SYSTEM_PATH}, capture_output=True, text=True, timeout=60
    )
