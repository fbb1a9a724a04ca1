"""The on-disk protocol between spurd and a job's shim: one directory per job.

``<state_dir>/jobs/<job_id>/`` (a batch or interactive job) and ``<state_dir>/jobs/<job_id>.<step_id>/``
(a job step started by srun inside an allocation) hold::

    spec.json      LaunchSpec (spurd writes it before starting the shim)
    slurm_script   batch script, owned by the job's user, mode 0700 (its name is $0, as in Slurm)
    launch.json    {pid, starttime, boot_id} of the shim as spurd started it (process backend)
    shim.json      {pid, starttime, boot_id} written by the shim itself on start (all backends)
    tasks.json     {pgid, pids} written by the shim once the task processes exist
    kill.json      {reason: "cancel"|"timeout"|"requeue", sent, grace} written by spurd before it
                   terminates the job
    exit.json      {exit_code, signal, end_time, tasks, message, launch_failed} written by the shim last
    report.json    the JobStatusReport spurd derived (pending delivery to the controller)
    reported       marker: the controller acknowledged report.json
    shim.log       the shim's own stderr
    task-<rank>.out / .err   captured task output (interactive jobs, steps without --output)

``<state_dir>/suspend/<job_id>.json`` ({since, total}) records a job's suspensions (spurd's only).

Every JSON file is written atomically (temp file, fsync, rename), so a reader sees either nothing or the
whole document. ``starttime`` (field 22 of /proc/<pid>/stat) plus the boot id tell a live shim from an
unrelated process that reused its pid.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

__all__ = [
    "JobDir",
    "atomic_write_json",
    "dir_name",
    "parse_dir_name",
    "boot_id",
    "proc_starttime",
    "process_identity",
    "process_matches",
]


def atomic_write_json(path: Path, data: Any) -> None:
    """Write ``data`` as JSON to ``path`` so that readers never see a partial file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def proc_starttime(pid: int, proc: Path = Path("/proc")) -> int | None:
    """Start time of ``pid`` in clock ticks since boot, or None when there is no such process."""
    try:
        raw = (proc / str(pid) / "stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may contain spaces and parentheses; fields after it follow the last ')'.
    try:
        rest = raw[raw.rindex(")") + 2 :].split()
        return int(rest[19])  # field 22 overall; rest starts at field 3
    except (ValueError, IndexError):
        return None


def boot_id(proc: Path = Path("/proc")) -> str:
    """This boot's random id ("" when unavailable)."""
    try:
        return (proc / "sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def process_identity(pid: int) -> dict[str, Any]:
    """``{"pid", "starttime", "boot_id"}`` of a process, as stored in launch.json/shim.json."""
    return {"pid": pid, "starttime": proc_starttime(pid), "boot_id": boot_id()}


def process_matches(ident: dict[str, Any]) -> bool:
    """True when the process ``ident`` describes is still alive (not a reused pid)."""
    pid = ident.get("pid")
    if not isinstance(pid, int) or pid <= 0:
        return False
    if ident.get("boot_id") and ident["boot_id"] != boot_id():
        return False
    current = proc_starttime(pid)
    return current is not None and current == ident.get("starttime")


def dir_name(job_id: int, step_id: int | None = None) -> str:
    """``"<job_id>"`` or ``"<job_id>.<step_id>"``."""
    return str(job_id) if step_id is None else f"{job_id}.{step_id}"


def parse_dir_name(name: str) -> tuple[int, int | None] | None:
    """(job_id, step_id or None) of a job dir name, or None when ``name`` is not one."""
    job, dot, step = name.partition(".")
    if not job.isdigit() or (dot and not step.isdigit()):
        return None
    return int(job), int(step) if dot else None


class JobDir:
    """Paths and typed accessors for one job directory (see the module docstring for the layout)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @property
    def job_id(self) -> int:
        return int(self.path.name.partition(".")[0])

    @property
    def step_id(self) -> int | None:
        step = self.path.name.partition(".")[2]
        return int(step) if step else None

    def file(self, name: str) -> Path:
        return self.path / name

    @property
    def script(self) -> Path:
        return self.path / "slurm_script"

    @property
    def log(self) -> Path:
        return self.path / "shim.log"

    def task_output(self, rank: int, stream: str) -> Path:
        """Captured output of interactive task ``rank``; ``stream`` is "stdout" or "stderr"."""
        return self.path / f"task-{rank}.{'out' if stream == 'stdout' else 'err'}"

    def create(self) -> None:
        # 0711: a job's user must traverse into it to execute its (user-owned, 0700) script.
        self.path.mkdir(parents=True, exist_ok=False)
        os.chmod(self.path, 0o711)

    def exists(self) -> bool:
        return self.path.is_dir()

    def write(self, name: str, data: Any) -> None:
        atomic_write_json(self.path / name, data)

    def read(self, name: str) -> dict[str, Any] | None:
        """The JSON document ``name``, or None when missing or unreadable."""
        return _read_json(self.path / name)

    def has(self, name: str) -> bool:
        return (self.path / name).exists()

    def mark_reported(self) -> None:
        fd = os.open(self.path / "reported", os.O_WRONLY | os.O_CREAT, 0o600)
        os.fsync(fd)
        os.close(fd)

    def reported_at(self) -> float | None:
        """mtime of the ``reported`` marker, or None when not yet reported."""
        try:
            return (self.path / "reported").stat().st_mtime
        except OSError:
            return None

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)
