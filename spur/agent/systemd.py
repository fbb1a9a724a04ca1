"""systemd backend: run each job's shim as a transient unit ``spur-job-<id>.service`` (a job step's as
``spur-job-<id>-step-<step>.service``).

The unit's cgroup holds every process of the job, so ``KillMode=control-group`` ends strays that
escaped the job's process group when the shim exits, and ``systemctl kill`` reaches them on cancel.
The shim and the job dir protocol are the same as the process backend's; spurd learns the shim's pid
from ``shim.json``.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import trio

from spur.agent.backends import BackendError, shim_command, shim_environment
from spur.agent.jobdir import JobDir
from spur.agent.launchspec import LaunchSpec

__all__ = ["SystemdBackend", "systemd_is_pid1", "systemd_run_command", "systemd_run_path", "unit_name"]


def systemd_is_pid1(proc: Path = Path("/proc")) -> bool:
    """True when PID 1 (as seen in ``proc``) is systemd."""
    try:
        return (proc / "1" / "comm").read_text().strip() == "systemd"
    except OSError:
        return False


def systemd_run_path() -> str | None:
    return shutil.which("systemd-run")


def unit_name(job_id: int, step_id: int | None = None) -> str:
    return f"spur-job-{job_id}" if step_id is None else f"spur-job-{job_id}-step-{step_id}"


def systemd_run_command(jobdir: JobDir, spec: LaunchSpec, *, systemd_run: str = "systemd-run") -> list[str]:
    """The ``systemd-run`` command line that starts the shim of ``spec`` in its own unit."""
    cmd = [
        systemd_run,
        f"--unit={unit_name(spec.job_id, spec.step_id if spec.is_step else None)}",
        "--collect",
        "--quiet",
        "--property=KillMode=control-group",
        "--property=Type=exec",
        f"--property=StandardOutput=append:{jobdir.log}",
        f"--property=StandardError=append:{jobdir.log}",
        f"--description=spur job {spec.job_id} ({spec.job_name or 'unnamed'}) of {spec.user}",
    ]
    if spec.mem_mb > 0:
        cmd.append(f"--property=MemoryMax={spec.mem_mb}M")
    cmd += [f"--setenv={k}={v}" for k, v in sorted(shim_environment().items())]
    cmd.append("--")
    cmd += shim_command(jobdir)
    return cmd


class SystemdBackend:
    name = "systemd"

    def __init__(self, systemd_run: str | None = None, systemctl: str | None = None) -> None:
        self.systemd_run = systemd_run or systemd_run_path() or "systemd-run"
        self.systemctl = systemctl or shutil.which("systemctl") or "systemctl"

    async def start(self, jobdir: JobDir, spec: LaunchSpec) -> tuple[dict[str, Any] | None, Any]:
        cmd = systemd_run_command(jobdir, spec, systemd_run=self.systemd_run)
        try:
            result = await trio.run_process(cmd, capture_stdout=True, capture_stderr=True, check=False)
        except OSError as e:
            raise BackendError(f"cannot run systemd-run: {e}") from e
        if result.returncode != 0:
            err = result.stderr.decode(errors="replace").strip()
            unit = unit_name(spec.job_id, spec.step_id if spec.is_step else None)
            raise BackendError(f"systemd-run failed for {unit}: {err}")
        return None, None

    async def kill_all(self, job_id: int, signum: int, step_id: int | None = None) -> None:
        cmd = [self.systemctl, "kill", f"--signal={signum}", f"{unit_name(job_id, step_id)}.service"]
        try:
            await trio.run_process(cmd, capture_stdout=True, capture_stderr=True, check=False)
        except OSError:
            pass
