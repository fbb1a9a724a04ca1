"""How spurd starts a job's shim: forked by the shim launcher (this module) or as a systemd unit (systemd.py).

Both backends run the same shim with the same job dir protocol, so supervision does not care which one
started it. ``start`` returns the shim's identity when the backend knows it at once (process backend);
otherwise spurd waits for the shim's own ``shim.json``. Neither makes spurd the shim's parent.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Protocol

import trio

import spur
from spur.agent.jobdir import JobDir, process_identity
from spur.agent.launchspec import LaunchSpec

__all__ = ["Backend", "BackendError", "ProcessBackend", "shim_command", "shim_environment"]

log = logging.getLogger(__name__)


class BackendError(Exception):
    """The agent could not start a shim (not the job's fault)."""


class Backend(Protocol):
    name: str

    async def start(self, jobdir: JobDir, spec: LaunchSpec) -> dict[str, Any] | None:
        """Start the shim for ``jobdir``; return its identity, or None when only the shim's own
        shim.json will tell it (spurd is never the shim's parent: it follows shims by pidfd)."""
        ...

    limits_note: str
    """Empty, or why resource limits of jobs are not enforced on this host (logged, shown on the node)."""

    async def finish(self, jobdir: JobDir) -> None:
        """Called once the job's shim has exited: return when nothing the job started that the backend
        can reach is left running."""
        ...


def shim_command(jobdir: JobDir) -> list[str]:
    """The shim's command line. ``-S``: the shim needs only the standard library and Spur (found through
    ``PYTHONPATH``, :func:`shim_environment`), and skipping ``site`` (the venv's path files and
    editable-install finders) takes two thirds off the interpreter's start, which every job waits for."""
    return [sys.executable, "-S", "-m", "spur.agent.shim", str(jobdir.path)]


def shim_environment() -> dict[str, str]:
    """Minimal environment for the shim itself (jobs get their own, built from the launch spec)."""
    package_root = str(Path(spur.__file__).resolve().parent.parent)
    return {
        "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
        "PYTHONPATH": package_root,
        "LANG": "C.UTF-8",
    }


class ProcessBackend:
    """Start each shim detached from spurd (its own session, none of spurd's stdio or pipes): forked by
    this spurd's shim launcher (:mod:`spur.agent.shim_launcher`), started on first use and again if it
    dies. A shim forked from an interpreter that has its imports done starts ~40 ms sooner than a new
    interpreter would."""

    name = "process"

    def __init__(self) -> None:
        self._launcher: trio.Process | None = None
        self._replies = bytearray()
        self._lock = trio.Lock()  # one request and its reply at a time

    async def start(self, jobdir: JobDir, spec: LaunchSpec) -> dict[str, Any] | None:
        request = str(jobdir.path).encode() + b"\n"
        async with self._lock:
            launcher = await self._send(request)
            try:
                reply = await self._reply(launcher)
            except (trio.BrokenResourceError, trio.ClosedResourceError, EOFError) as exc:
                # The launcher died after taking the request: the shim may have been forked. The
                # executor then waits for the shim's own shim.json (and reports the job failed if none
                # appears), rather than risk starting the job twice.
                log.warning("%s: the shim launcher ended while starting the job (%s)", jobdir.path.name, exc)
                await self._drop()
                return None
        if reply.startswith("error "):
            raise BackendError(reply[len("error ") :])
        ident = process_identity(int(reply))
        jobdir.write("launch.json", ident)
        return ident

    async def _send(self, request: bytes) -> trio.Process:
        """Hand ``request`` to a live launcher (starting one, or a new one once if the last had died)."""
        for _attempt in range(2):
            launcher = self._launcher or await self._spawn()
            stdin = launcher.stdin
            assert stdin is not None
            try:
                await stdin.send_all(request)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                await self._drop()  # nothing was taken: another launcher may take it
                continue
            return launcher
        raise BackendError("cannot start the job supervisor: the shim launcher exits at once")

    async def _spawn(self) -> trio.Process:
        try:
            self._launcher = await trio.lowlevel.open_process(
                [sys.executable, "-S", "-m", "spur.agent.shim_launcher"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                cwd="/",
                env=shim_environment(),
                start_new_session=True,
            )
        except OSError as e:
            raise BackendError(f"cannot start the job supervisor launcher: {e}") from e
        self._replies.clear()
        return self._launcher

    async def _reply(self, launcher: trio.Process) -> str:
        stdout = launcher.stdout
        assert stdout is not None
        while b"\n" not in self._replies:
            chunk = await stdout.receive_some(4096)
            if not chunk:
                raise EOFError("end of its output")
            self._replies += chunk
        line, _, rest = bytes(self._replies).partition(b"\n")
        self._replies[:] = rest
        return line.decode()

    async def _drop(self) -> None:
        """Forget a launcher that failed (killed if still there, and reaped)."""
        launcher, self._launcher = self._launcher, None
        if launcher is None:
            return
        with trio.CancelScope(shield=True):
            launcher.kill()
            await launcher.wait()

    limits_note = ""

    async def finish(self, jobdir: JobDir) -> None:
        """Nothing beyond the shim's own sweep of the job's process group is reachable here."""
        return None
