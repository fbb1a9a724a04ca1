"""How long each job has been suspended on this node (scontrol suspend/resume), persisted across restarts.

A job's time limit does not run while it is suspended, so a unit's deadline is ``start + limit +
suspended_secs(now)``. One :class:`Suspension` per job id is shared by the job's batch script and its
steps; it is stored as ``<state_dir>/suspend/<job_id>.json`` (``{"since": wall or null, "total": secs}``)
so a restarted agent keeps counting. ``changed`` is replaced (and the old event set) on every change,
so waiters wake and recompute their deadlines.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path

import trio

from spur.agent.jobdir import atomic_write_json

__all__ = ["Suspension", "SuspensionBook"]


@dataclass(eq=False)
class Suspension:
    job_id: int
    since: float | None = None  # wall time of the current suspension, None while running
    total: float = 0.0  # completed suspensions, in seconds
    changed: trio.Event = field(default_factory=trio.Event)

    @property
    def suspended(self) -> bool:
        return self.since is not None

    def suspended_secs(self, now: float) -> float:
        """All time spent suspended up to ``now`` (including a suspension still in progress)."""
        return self.total + (max(0.0, now - self.since) if self.since is not None else 0.0)

    def _notify(self) -> None:
        self.changed.set()
        self.changed = trio.Event()

    def poke(self) -> None:
        """Wake whoever waits on ``changed`` (e.g. time-limit enforcement after the limit moved)."""
        self._notify()


class SuspensionBook:
    """The :class:`Suspension` of every job this agent runs something of."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._by_job: dict[int, Suspension] = {}

    def _path(self, job_id: int) -> Path:
        return self.directory / f"{job_id}.json"

    def get(self, job_id: int) -> Suspension:
        entry = self._by_job.get(job_id)
        if entry is None:
            entry = Suspension(job_id)
            data = _read(self._path(job_id))
            if data:
                since = data.get("since")
                entry.since = float(since) if isinstance(since, int | float) else None
                total = data.get("total")
                entry.total = float(total) if isinstance(total, int | float) else 0.0
            self._by_job[job_id] = entry
        return entry

    def note_known(self, job_id: int, controller_secs: float) -> None:
        """Take the controller's count of past suspensions when it is larger than ours."""
        entry = self.get(job_id)
        if controller_secs > entry.total:
            entry.total = controller_secs
            self._save(entry)
            entry._notify()

    def suspend(self, job_id: int, now: float) -> bool:
        """Start a suspension; False when the job is already suspended."""
        entry = self.get(job_id)
        if entry.since is not None:
            return False
        entry.since = now
        self._save(entry)
        entry._notify()
        return True

    def resume(self, job_id: int, now: float) -> bool:
        """End the current suspension; False when the job was not suspended."""
        entry = self.get(job_id)
        if entry.since is None:
            return False
        entry.total += max(0.0, now - entry.since)
        entry.since = None
        self._save(entry)
        entry._notify()
        return True

    def forget(self, job_id: int) -> None:
        self._by_job.pop(job_id, None)
        with contextlib.suppress(OSError):
            self._path(job_id).unlink()

    def _save(self, entry: Suspension) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        atomic_write_json(self._path(entry.job_id), {"since": entry.since, "total": entry.total})


def _read(path: Path) -> dict[str, object] | None:
    import json

    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
