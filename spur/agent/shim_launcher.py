"""The shim launcher: ``python -S -m spur.agent.shim_launcher``, a fork server for job shims.

Starting a job's shim as a new interpreter cost every job ~45 ms (the interpreter, then the shim's
imports) between the launch and the task's first instruction, and again at every turnover of a CPU.
The process backend (:mod:`spur.agent.backends`) instead keeps one launcher per spurd that has imported
the shim once; each shim is a ``fork()`` of it, which takes about a millisecond.

Protocol (spurd is the only peer; the pipes are private to the two processes):

- spurd writes one job directory path per line on the launcher's stdin (UTF-8);
- for each line the launcher forks; it answers ``<pid>`` (the shim's pid) or ``error <text>`` on one
  line of its stdout, in request order;
- end of stdin (spurd exited or restarted) ends the launcher. Shims already started are unaffected:
  each runs in its own session, detached from spurd and from the launcher, exactly as a shim started
  as its own process (they are re-adopted through the job directory, :mod:`spur.agent.jobdir`).

The forked shim starts from a clean slate: its own session, stdin ``/dev/null``, stdout and stderr
appended to the job's ``shim.log``, no other descriptors, default signal dispositions. The launcher
ignores SIGCHLD so that its exited shims are reaped by the kernel; spurd follows each shim through a
pidfd, never as its parent.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

from spur.agent import shim
from spur.agent.jobdir import JobDir

__all__ = ["main", "serve"]


def _become_shim(jobdir: JobDir) -> int:
    """In the forked child: detach, set up descriptors and signals, run the shim; its exit status."""
    os.setsid()
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the shim waits for its tasks
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    null = os.open(os.devnull, os.O_RDONLY)
    log = os.open(jobdir.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(null, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.closerange(3, os.sysconf("SC_OPEN_MAX"))
    sys.stdin = open(0, closefd=False)  # noqa: SIM115 - the interpreter's own streams
    sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
    return shim.main([str(jobdir.path)])


def serve(requests: int, replies: int) -> None:
    """Fork one shim per job directory line read from fd ``requests``, answering on fd ``replies``,
    until end of input (see the module docstring)."""
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    with os.fdopen(requests, "rb", buffering=0) as inp, os.fdopen(replies, "wb", buffering=0) as out:
        pending = b""
        while True:
            chunk = inp.read(4096)
            if not chunk:
                return
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                out.write(_start(line).encode() + b"\n")


def _start(line: bytes) -> str:
    """Fork the shim of the job directory named by ``line``; ``"<pid>"`` or ``"error <why>"``."""
    try:
        path = Path(line.decode())
    except UnicodeDecodeError:
        return "error the job directory path is not UTF-8"
    if not path.is_absolute() or not path.is_dir():
        return f"error no job directory at {path}"
    try:
        pid = os.fork()
    except OSError as exc:
        return f"error cannot fork the job supervisor: {exc.strerror or exc}"
    if pid == 0:  # the shim: never returns into the launcher's loop
        code = 1
        try:
            code = _become_shim(JobDir(path))
        except BaseException:
            import traceback

            traceback.print_exc()
        finally:
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except (OSError, ValueError):
                    pass
            os._exit(code)
    return str(pid)


def main() -> int:
    os.chdir("/")
    serve(0, 1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
