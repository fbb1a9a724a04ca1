"""The per-job supervisor: ``python -m spur.agent.shim <jobdir>``.

It runs detached from spurd (own session, no inherited pipes), so jobs outlive an agent restart. It:

1. records its identity in ``shim.json``;
2. reads ``spec.json`` and opens the job's files (as the job's user when running as root, so
   permission checks and ownership are the user's);
3. starts the task process(es) in one new process group, dropping to the job's uid/gid and groups
   (a batch script, or the tasks of an interactive job or job step; each task learns its own pid as
   ``SLURM_TASK_PID`` through a ``sh -c 'exec "$@"'`` trampoline);
4. forwards SIGTERM/SIGINT/SIGHUP it receives to that group and waits for every task;
5. kills what is left in the group (Slurm ends a job's stray processes with the job) and writes
   ``exit.json`` atomically, then exits 0.

Exit status of the job on this node: the largest task exit code; ``signal`` is the signal that killed the
lowest-ranked task that died of one (0 when none did). A launch problem (unopenable file, missing
program) is recorded as exit code 1 (127 for a missing interactive command) with ``message``.

This module is synchronous and imports only the standard library plus the job dir helpers: it starts
for every job, so it must be cheap.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from spur.agent.environment import task_environment
from spur.agent.jobdir import JobDir, process_identity
from spur.agent.launchspec import LaunchSpec
from spur.agent.pmi_node import NodePmi

__all__ = ["main"]

_FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)

# Exports the task's own pid, then becomes the task (same pid).
_TRAMPOLINE = 'SLURM_TASK_PID=$$ SPUR_TASK_PID=$$; export SLURM_TASK_PID SPUR_TASK_PID; exec "$@"'


class _LaunchFailure(Exception):
    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@contextlib.contextmanager
def _as_user(spec: LaunchSpec) -> Iterator[None]:
    """Temporarily take the job user's effective ids (root only), for opening files."""
    if not spec.drop_privileges:
        yield
        return
    saved_groups = os.getgroups()
    os.setgroups(spec.groups)
    os.setegid(spec.gid)
    os.seteuid(spec.uid)
    try:
        yield
    finally:
        os.seteuid(0)
        os.setegid(0)
        os.setgroups(saved_groups)


def _open(path: str, mode: str, what: str) -> IO[bytes]:
    try:
        return open(path, mode)  # noqa: SIM115 - handed to the child, closed by _Job
    except OSError as e:
        raise _LaunchFailure(f"cannot open {what} file {path}: {e.strerror}") from None


class _Tasks:
    def __init__(self, jobdir: JobDir, spec: LaunchSpec) -> None:
        self.jobdir = jobdir
        self.spec = spec
        self.pgid = 0
        # (rank, process, exit code, message): a started task has its process and code 0 until
        # ``wait`` reads the real one; a task that did not start has no process and its final code.
        self.procs: list[tuple[int, subprocess.Popen[bytes] | None, int, str]] = []
        self.pmi: NodePmi | None = None

    def _popen(
        self,
        argv: list[str],
        env: dict[str, str],
        stdin: IO[bytes] | int,
        stdout: IO[bytes] | int,
        stderr: IO[bytes] | int,
        pass_fds: tuple[int, ...] = (),
    ) -> subprocess.Popen[bytes]:
        spec = self.spec
        kwargs: dict[str, Any] = {}
        if spec.drop_privileges:
            kwargs.update(user=spec.uid, group=spec.gid, extra_groups=spec.groups)
            # chdir after the uid change: root may be refused where the user is not (NFS root_squash).
            kwargs["preexec_fn"] = lambda: os.chdir(spec.work_dir)
        else:
            kwargs["cwd"] = spec.work_dir
        return subprocess.Popen(
            argv,
            env=env,
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            process_group=self.pgid,
            umask=spec.umask,
            close_fds=True,
            pass_fds=pass_fds,
            restore_signals=True,
            **kwargs,
        )

    def start_batch(self) -> None:
        spec = self.spec
        with _as_user(spec):
            stdin = _open(spec.stdin_path, "rb", "input")
            mode = "ab" if spec.open_append else "wb"
            stdout = _open(spec.stdout_path, mode, "output")
            stderr = _open(spec.stderr_path, mode, "error") if spec.stderr_path else stdout
        script = str(self.jobdir.script)
        with open(script, "rb") as f:
            command = [script] if f.read(2) == b"#!" else ["/bin/sh", script]
        # The script's arguments (sbatch job.sh a1 "b 2", REST argv) follow it, as slurmstepd passes
        # them; the trampoline gives the shell its own pid as SLURM_TASK_PID, then execs it.
        argv = ["/bin/sh", "-c", _TRAMPOLINE, command[0], *command, *spec.argv]
        env = task_environment(spec.environment, procid=0, localid=0)
        try:
            proc = self._popen(argv, env, stdin, stdout, stderr)
        except (OSError, subprocess.SubprocessError) as e:
            msg = f"cannot start batch script of job {spec.job_id}: {_describe(e, spec)}"
            stderr.write(f"spur: error: {msg}\n".encode())
            raise _LaunchFailure(msg) from None
        finally:
            for handle in {id(x): x for x in (stdin, stdout, stderr)}.values():
                handle.close()
        self.pgid = proc.pid
        self.procs.append((0, proc, 0, ""))

    def _task_files(self) -> list[tuple[IO[bytes], IO[bytes]]]:
        """(stdout, stderr) per local task: the step's output files, else capture files in the job dir.

        Each distinct path is opened once, so tasks sharing a file share one open file description
        and never overwrite each other's output.
        """
        spec = self.spec
        mode = "ab" if spec.open_append else "wb"
        opened: dict[str, IO[bytes]] = {}

        def get(path: str, what: str) -> IO[bytes]:
            if path not in opened:
                opened[path] = _open(path, mode, what)
            return opened[path]

        chosen: list[tuple[IO[bytes] | None, IO[bytes] | None]] = []
        with _as_user(spec):  # the user's files are opened as the user
            for localid in range(len(spec.ranks)):
                want_out = spec.task_stdout[localid] if localid < len(spec.task_stdout) else ""
                want_err = spec.task_stderr[localid] if localid < len(spec.task_stderr) else ""
                out = get(want_out, "output") if want_out else None
                chosen.append((out, get(want_err, "error") if want_err else out))
        files = []
        for rank, (out, err) in zip(spec.ranks, chosen, strict=True):  # capture files are spurd's
            if out is None:
                out = open(self.jobdir.task_output(rank, "stdout"), "wb")  # noqa: SIM115
            if err is None:
                err = open(self.jobdir.task_output(rank, "stderr"), "wb")  # noqa: SIM115
            files.append((out, err))
        return files

    def start_tasks(self) -> None:
        """Start the tasks of an interactive job or a job step (ranks ``spec.ranks``)."""
        spec = self.spec
        files = self._task_files()
        if spec.pmi_server:
            self.pmi = NodePmi(
                ranks=list(spec.ranks),
                size=spec.pmi_size,
                jobid=f"{spec.job_id}.{spec.step_id}",
                tasks_per_node=spec.pmi_tasks_per_node,
                server=spec.pmi_server,
                token=spec.pmi_token,
            )
        try:
            for localid, rank in enumerate(spec.ranks):
                out, err = files[localid]
                gpus = spec.task_gpus[localid] if localid < len(spec.task_gpus) else None
                env = task_environment(spec.environment, procid=rank, localid=localid, gpus=gpus)
                pass_fds: tuple[int, ...] = ()
                if self.pmi is not None:
                    pmi_env, fd = self.pmi.task_environment(rank)
                    env.update(pmi_env)
                    pass_fds = (fd,)
                problem = _unrunnable(spec.argv[0], env, spec.work_dir)
                if problem:
                    msg = f"task {rank}: cannot run {spec.argv[0]}: {problem}"
                    err.write(f"spur: error: {msg}\n".encode())
                    err.flush()
                    self.procs.append((rank, None, 127, msg))
                    continue
                argv = ["/bin/sh", "-c", _TRAMPOLINE, spec.argv[0], *spec.argv]
                try:
                    proc = self._popen(argv, env, subprocess.DEVNULL, out, err, pass_fds)
                except (OSError, subprocess.SubprocessError) as e:
                    code = 127 if isinstance(e, FileNotFoundError | PermissionError) else 1
                    msg = f"task {rank}: cannot run {spec.argv[0]}: {_describe(e, spec)}"
                    err.write(f"spur: error: {msg}\n".encode())
                    err.flush()
                    self.procs.append((rank, None, code, msg))
                else:
                    if not self.pgid:
                        self.pgid = proc.pid
                    self.procs.append((rank, proc, 0, ""))
        finally:
            for f in {id(x): x for pair in files for x in pair}.values():
                f.close()
            if self.pmi is not None:
                self.pmi.started({r: p.pid for r, p, _c, _m in self.procs if p is not None})

    def forward(self, signum: int, _frame: object = None) -> None:
        if self.pgid:
            with contextlib.suppress(OSError):
                os.killpg(self.pgid, signum)

    def _reap_killing_on_bad_exit(self) -> None:
        """Reap tasks as they end; the first that fails (or never started) ends the others (-K) with
        SIGTERM, as Slurm's srun does (a task that ignores it is killed by the step's cancel)."""
        live = {p.pid: p for _r, p, _c, _m in self.procs if p is not None}
        bad = any(p is None for _r, p, _c, _m in self.procs)
        terminated = False
        while True:
            if bad and self.pgid and not terminated:
                terminated = True
                with contextlib.suppress(OSError):
                    os.killpg(self.pgid, signal.SIGTERM)
            if not live:
                return
            try:
                pid, status = os.wait()
            except ChildProcessError:
                return
            proc = live.pop(pid, None)
            if proc is not None:
                proc.returncode = os.waitstatus_to_exitcode(status)
                bad = bad or proc.returncode != 0

    def wait(self) -> dict[str, Any]:
        results = []
        messages = []
        if self.spec.kill_on_bad_exit:
            self._reap_killing_on_bad_exit()
        for rank, proc, code, msg in self.procs:
            if proc is not None:
                rc = proc.wait()
                code, sig = (rc, 0) if rc >= 0 else (0, -rc)
            else:
                sig = 0
            if msg:
                messages.append(msg)
            results.append({"rank": rank, "exit_code": code, "signal": sig})
        if self.pmi is not None and self.pmi.error:
            messages.append(self.pmi.error)
        if self.pgid:
            with contextlib.suppress(OSError):
                os.killpg(self.pgid, signal.SIGKILL)
        signalled = [r["signal"] for r in results if r["signal"]]
        return {
            "exit_code": max((r["exit_code"] for r in results), default=0),
            "signal": signalled[0] if signalled else 0,
            "end_time": time.time(),
            "tasks": results,
            "message": "; ".join(messages),
            "launch_failed": all(p is None for _r, p, _c, _m in self.procs),
        }


def _unrunnable(program: str, env: dict[str, str], work_dir: str) -> str:
    """Why ``program`` cannot be executed ("" when it can), resolved as execvp would."""
    if "/" in program:
        path = os.path.join(work_dir, program)
        if not os.path.exists(path):
            return "No such file or directory"
        if os.path.isdir(path) or not os.access(
            path, os.X_OK, effective_ids=os.access in os.supports_effective_ids
        ):
            return "Permission denied"
        return ""
    if shutil.which(program, path=env.get("PATH", "")) is None:
        return "command not found (No such file or directory)"
    return ""


def _describe(e: BaseException, spec: LaunchSpec) -> str:
    if isinstance(e, subprocess.SubprocessError) and "preexec_fn" in str(e):
        return f"cannot change to working directory {spec.work_dir} as {spec.user}"
    if isinstance(e, OSError) and e.strerror:
        return e.strerror
    return str(e)


def run(jobdir: JobDir) -> None:
    """Run the job in ``jobdir`` to completion and record its exit status."""
    jobdir.write("shim.json", process_identity(os.getpid()))
    data = jobdir.read("spec.json")
    if data is None:
        _record_failure(jobdir, f"job directory {jobdir.path} has no readable spec.json")
        return
    spec = LaunchSpec.from_json(data)
    tasks = _Tasks(jobdir, spec)
    for signum in _FORWARDED:
        signal.signal(signum, tasks.forward)
    try:
        if spec.interactive or spec.step_id >= 0:
            tasks.start_tasks()
        else:
            tasks.start_batch()
    except _LaunchFailure as e:
        _record_failure(jobdir, str(e), e.exit_code)
        return
    jobdir.write("tasks.json", {"pgid": tasks.pgid, "pids": [p.pid for _r, p, _c, _m in tasks.procs if p]})
    jobdir.write("exit.json", tasks.wait())


def _record_failure(jobdir: JobDir, message: str, exit_code: int = 1) -> None:
    print(f"spur shim: {message}", file=sys.stderr)
    jobdir.write(
        "exit.json",
        {
            "exit_code": exit_code,
            "signal": 0,
            "end_time": time.time(),
            "tasks": [],
            "message": message,
            "launch_failed": True,
        },
    )


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m spur.agent.shim <jobdir>", file=sys.stderr)
        return 2
    # Never stop because the agent's terminal went away.
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    run(JobDir(Path(args[0])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
