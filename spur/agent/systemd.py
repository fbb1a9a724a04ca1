"""systemd backend: run each job's shim as a transient unit named by cluster and job,
``spur-<cluster>-job-<id>.service`` (a job step's ``spur-<cluster>-job-<id>-step-<step>.service``).

The unit's cgroup holds every process of the job. Signals reach the job's process group as with the
process backend; when the shim has exited (the job ended, was cancelled or timed out), :meth:`finish`
kills whatever is left in the unit (strays that left the process group: ``setsid``, double forks) and
waits until the unit is gone, so no process of a job outlives its final report. The unit belongs to
systemd, not to spurd: it keeps running through an agent restart or ``kill -9``, and the next spurd
finds it through the job dir (``shim.json``, ``unit.json``).

A unit ends ``inactive`` when its shim exits 0 and is collected at once; one that ends ``failed`` (the
kernel's OOM killer hit a process of the job: ``Result=oom-kill``; the shim itself died) is kept by
systemd (``CollectMode=inactive``) until :meth:`finish` has read how it ended into the job dir
(:data:`UNIT_END_FILE`, read by the executor through :func:`unit_out_of_memory`) and reset it. So the
reason survives an agent restart too: the failed unit waits for the next spurd.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

from spur.agent.backends import BackendError, shim_command, shim_environment

if TYPE_CHECKING:
    pass
from spur.agent.jobdir import JobDir
from spur.agent.launchspec import LaunchSpec

__all__ = [
    "SystemdBackend",
    "memory_limit_support",
    "systemd_is_pid1",
    "systemd_run_command",
    "systemd_run_path",
    "unit_name",
    "unit_out_of_memory",
]

log = logging.getLogger("spur.agent.systemd")

UNIT_FILE = "unit.json"
#: How the unit ended (``systemctl show`` properties :data:`END_PROPERTIES`), written by :meth:`finish`.
UNIT_END_FILE = "unit-end.json"
END_PROPERTIES = ("Result", "ExecMainCode", "ExecMainStatus")


def systemd_is_pid1(proc: Path = Path("/proc")) -> bool:
    """True when PID 1 (as seen in ``proc``) is systemd."""
    try:
        return (proc / "1" / "comm").read_text().strip() == "systemd"
    except OSError:
        return False


def systemd_run_path() -> str | None:
    return shutil.which("systemd-run")


def unit_name(cluster: str, job_id: int, step_id: int | None = None) -> str:
    """The job's unit: ``spur-<cluster>-job-<id>[-step-<step>].service``; characters of ``cluster``
    other than letters, digits, ``_`` and ``.`` become ``_`` (``-`` too, so names split unambiguously)."""
    safe = re.sub(r"[^A-Za-z0-9_.]", "_", cluster) or "spur"
    base = f"spur-{safe}-job-{job_id}"
    return f"{base}.service" if step_id is None else f"{base}-step-{step_id}.service"


def spec_unit_name(spec: LaunchSpec) -> str:
    cluster = spec.environment.get("SLURM_CLUSTER_NAME", "spur")
    return unit_name(cluster, spec.job_id, spec.step_id if spec.is_step else None)


def parse_show(text: str) -> dict[str, str]:
    """``systemctl show`` output (``Key=Value`` lines, in systemd's order) as a dict."""
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


def unit_out_of_memory(props: Mapping[str, Any] | None) -> bool:
    """Whether the unit ended because of the OOM killer, from its ``systemctl show`` properties:
    ``Result=oom-kill`` (the kernel's OOM killer, or systemd-oomd, killed a process in the unit's
    cgroup and systemd's ``OOMPolicy=stop`` ended the unit). Slurm calls that OUT_OF_MEMORY."""
    return props is not None and props.get("Result") == "oom-kill"


def systemd_run_command(
    jobdir: JobDir, spec: LaunchSpec, *, systemd_run: str = "systemd-run", unit: str | None = None
) -> list[str]:
    """The ``systemd-run`` command line that starts the shim of ``spec`` in its own unit."""
    cmd = [
        systemd_run,
        f"--unit={unit or spec_unit_name(spec)}",
        # Not --collect: a failed unit (Result=oom-kill) must stay until finish() has read its Result.
        "--property=CollectMode=inactive",
        "--quiet",
        "--service-type=exec",
        "--property=KillMode=control-group",
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


def memory_limit_support(
    cgroup_root: Path = Path("/sys/fs/cgroup"), writable: Callable[[Path], bool] | None = None
) -> str | None:
    """None when systemd on this host can enforce a unit's ``MemoryMax=``; else why it cannot.

    Unified (cgroup v2) hosts need ``memory`` among the root's controllers; v1 and hybrid hosts need a
    writable v1 memory hierarchy (a container sees it read-only unless it was delegated)."""
    is_writable = writable or (lambda p: os.access(p, os.W_OK))
    controllers = cgroup_root / "cgroup.controllers"
    if controllers.exists():
        try:
            if "memory" in controllers.read_text().split():
                return None
        except OSError:
            pass
        return "the cgroup v2 hierarchy has no memory controller"
    memory = cgroup_root / "memory"
    if memory.is_dir() and is_writable(memory):
        return None
    if memory.is_dir():
        return "the cgroup v1 memory hierarchy is read-only here (not delegated to this systemd)"
    return "no memory cgroup controller is mounted"


class SystemdBackend:
    name = "systemd"

    def __init__(
        self,
        systemd_run: str | None = None,
        systemctl: str | None = None,
        cgroup_root: Path = Path("/sys/fs/cgroup"),
    ) -> None:
        self.systemd_run = systemd_run or systemd_run_path() or "systemd-run"
        self.systemctl = systemctl or shutil.which("systemctl") or "systemctl"
        unenforced = memory_limit_support(cgroup_root)
        self.limits_note = (
            f"job memory limits not enforced: {unenforced}; job units carry MemoryMax= but the kernel "
            "does not apply it"
            if unenforced
            else ""
        )
        if self.limits_note:
            log.warning("%s", self.limits_note)

    async def _systemctl(self, *args: str) -> tuple[int, str]:
        try:
            result = await trio.run_process(
                [self.systemctl, *args], capture_stdout=True, capture_stderr=True, check=False
            )
        except OSError as e:
            return 127, str(e)
        return result.returncode, (result.stdout + result.stderr).decode(errors="replace").strip()

    async def start(self, jobdir: JobDir, spec: LaunchSpec) -> dict[str, Any] | None:
        unit = spec_unit_name(spec)
        jobdir.write(UNIT_FILE, {"unit": unit})
        # A unit of the same name still stopping (a requeued job's earlier run) would refuse the start.
        await self._stop(unit)
        cmd = systemd_run_command(jobdir, spec, systemd_run=self.systemd_run, unit=unit)
        try:
            result = await trio.run_process(cmd, capture_stdout=True, capture_stderr=True, check=False)
        except OSError as e:
            raise BackendError(f"cannot run systemd-run: {e}") from e
        if result.returncode != 0:
            err = result.stderr.decode(errors="replace").strip()
            raise BackendError(f"systemd-run failed for {unit}: {err}")
        return None

    async def _stop(self, unit: str) -> dict[str, str] | None:
        """Kill everything left in ``unit``, return once systemd has stopped it (or it is gone) and
        reset it; how it ended (:data:`END_PROPERTIES`), or None when it was already gone."""
        rc, out = await self._systemctl("show", "-p", "LoadState", "--value", unit)
        if rc != 0 or out in ("not-found", ""):
            return None
        await self._systemctl("kill", "--kill-who=all", "--signal=SIGKILL", unit)
        rc, out = await self._systemctl("stop", unit)
        if rc != 0 and "not loaded" not in out:
            log.warning("%s: stopping the unit failed: %s", unit, out)
        rc, out = await self._systemctl("show", "-p", ",".join(END_PROPERTIES), unit)
        end = parse_show(out) if rc == 0 else {}
        await self._systemctl("reset-failed", unit)  # a failed unit is kept (CollectMode=inactive)
        return {k: end[k] for k in END_PROPERTIES if k in end} or None

    async def finish(self, jobdir: JobDir) -> None:
        data = jobdir.read(UNIT_FILE)
        if data and isinstance(data.get("unit"), str):
            end = await self._stop(data["unit"])
            if end is not None:
                jobdir.write(UNIT_END_FILE, end)
                if unit_out_of_memory(end):
                    log.warning("%s: ended by the OOM killer (Result=oom-kill)", data["unit"])
                elif end.get("Result", "success") != "success":
                    log.info(
                        "%s: systemd ended the unit with Result=%s (ExecMainStatus=%s)",
                        data["unit"], end.get("Result"), end.get("ExecMainStatus", "?"),
                    )
