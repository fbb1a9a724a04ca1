"""How spurd starts a job's shim: as a detached process (this module) or a systemd unit (systemd.py).

Both backends run the same shim with the same job dir protocol, so supervision does not care which one
started it. ``start`` returns the shim's identity when the backend knows it at once (process backend);
otherwise spurd waits for the shim's own ``shim.json``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Protocol

import spur
from spur.agent.jobdir import JobDir, process_identity
from spur.agent.launchspec import LaunchSpec

__all__ = ["Backend", "BackendError", "ProcessBackend", "shim_command", "shim_environment"]


class BackendError(Exception):
    """The agent could not start a shim (not the job's fault)."""


class Backend(Protocol):
    name: str

    async def start(self, jobdir: JobDir, spec: LaunchSpec) -> tuple[dict[str, Any] | None, subprocess.Popen[bytes] | None]:
        """Start the shim for ``jobdir``; return (identity or None, child handle or None)."""
        ...

    limits_note: str
    """Empty, or why resource limits of jobs are not enforced on this host (logged, shown on the node)."""

    async def finish(self, jobdir: JobDir) -> None:
        """Called once the job's shim has exited: return when nothing the job started that the backend
        can reach is left running."""
        ...


def shim_command(jobdir: JobDir) -> list[str]:
    return [sys.executable, "-m", "spur.agent.shim", str(jobdir.path)]


def shim_environment() -> dict[str, str]:
    """Minimal environment for the shim itself (jobs get their own, built from the launch spec)."""
    package_root = str(Path(spur.__file__).resolve().parent.parent)
    return {
        "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
        "PYTHONPATH": package_root,
        "LANG": "C.UTF-8",
    }


class ProcessBackend:
    """Start the shim as a process in its own session, holding none of spurd's stdio or pipes."""

    name = "process"

    async def start(self, jobdir: JobDir, spec: LaunchSpec) -> tuple[dict[str, Any] | None, subprocess.Popen[bytes] | None]:
        try:
            with open(jobdir.log, "ab") as log:
                child = subprocess.Popen(
                    shim_command(jobdir),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    cwd="/",
                    env=shim_environment(),
                    start_new_session=True,
                    close_fds=True,
                )
        except OSError as e:
            raise BackendError(f"cannot start the job supervisor: {e}") from e
        ident = process_identity(child.pid)
        jobdir.write("launch.json", ident)
        return ident, child

    limits_note = ""

    async def finish(self, jobdir: JobDir) -> None:
        """Nothing beyond the shim's own sweep of the job's process group is reachable here."""
        return None
