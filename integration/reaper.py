"""A pytest plugin that kills, at the end of the test session, every process the session started.

Daemons under test start in their own sessions (``start_new_session=True``), so a test that fails
before its teardown, a fixture whose teardown raises, or a double fork leaves them running after
pytest exits. Two records find them whatever happened:

- a session marker: ``SPUR_TEST_SESSION=<random id>`` is put into this process's environment when the
  session starts, so every process started after it (and everything those start) carries it in
  ``/proc/PID/environ``, even once it is re-parented to init;
- the process groups the harnesses register with :func:`track` (``integration.harness.Proc``), for
  a daemon started with an environment of its own.

At session finish (after the session fixtures' teardown) each such process is stopped, then killed,
until none is left. The plugin is loaded by the repository's ``conftest.py``; a pytest run nested in
a test gets a marker of its own, so it reaps only its own processes.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

MARKER = "SPUR_TEST_SESSION"

_tracked: list[subprocess.Popen[bytes]] = []
_session_id: str | None = None


def session_id() -> str | None:
    """The marker value of the running session (None before it starts)."""
    return _session_id


def track(popen: subprocess.Popen[bytes]) -> None:
    """Register a daemon started as the leader of its own process group; its group is killed at the
    end of the session if it is still running then."""
    _tracked.append(popen)


def _ancestors() -> set[int]:
    pids = set()
    pid = os.getpid()
    while pid > 1:
        pids.add(pid)
        try:
            pid = _ppid(pid)
        except OSError:
            break
    return pids


def _ppid(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[1])


def _live(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def processes_with(name: str, value: str) -> Iterator[int]:
    """The pids of the live processes whose environment holds ``name=value`` (zombies have none)."""
    needle = f"{name}={value}".encode()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            environ = Path(entry.path, "environ").read_bytes()
        except OSError:
            continue
        if needle in environ.split(b"\0"):
            yield int(entry.name)


def _leftovers(marker: str, spare: set[int]) -> set[int]:
    found = {pid for pid in processes_with(MARKER, marker) if pid not in spare}
    for popen in _tracked:
        if popen.poll() is None:
            found.add(popen.pid)
    return found


def _signal(pids: set[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except OSError:
            pass
    for popen in _tracked:
        if popen.pid in pids:
            try:
                os.killpg(popen.pid, sig)
            except OSError:
                pass


def reap(marker: str, timeout: float = 10.0) -> list[str]:
    """Kill every live process of the session ``marker`` (and the tracked groups) except this process
    and its ancestors; return a ``pid name`` line for each one killed. Stopping them all first keeps
    a process from forking a new one between the scan and the kill; the scan repeats until nothing
    of the session is left or ``timeout`` passes."""
    spare = _ancestors()
    killed: dict[int, str] = {}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pids = {pid for pid in _leftovers(marker, spare) if _live(pid)}
        if not pids:
            break
        for pid in pids:
            try:
                killed.setdefault(pid, Path(f"/proc/{pid}/comm").read_text().strip())
            except OSError:
                killed.setdefault(pid, "?")
        _signal(pids, signal.SIGSTOP)
        _signal(pids, signal.SIGKILL)
        for popen in _tracked:
            if popen.pid in pids:
                try:
                    popen.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    pass
        time.sleep(0.05)
    _tracked.clear()
    return [f"{pid} {name}" for pid, name in sorted(killed.items())]


def pytest_configure(config: pytest.Config) -> None:
    global _session_id
    _session_id = secrets.token_hex(8)
    os.environ[MARKER] = _session_id


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    if _session_id is None:
        return
    killed = reap(_session_id)
    if killed:
        sys.stderr.write(
            f"reaper: killed {len(killed)} process(es) the test session left running: "
            + ", ".join(killed)
            + "\n"
        )
