"""Compact job records: repeated strings and whole environments shared between jobs (pure).

A controller holding 100k pending jobs mostly holds the same few users, partitions, working
directories, scripts and exported environments many times over. ``Interner`` makes equal values one
object: strings through ``sys.intern``, environments through a bounded table of canonical dicts.

Contract: a stored job's ``spec.environment`` may be shared with other jobs, so the state machine and
everything reading it treat it as read-only (replace it, never mutate it in place).
"""

from __future__ import annotations

import copy
import sys

from spur.core.job import Job, JobSpec

# Distinct environments remembered; past this the table starts over (sharing is only an economy).
MAX_ENVIRONMENTS = 4096
_SPEC_STRINGS = ("name", "script", "work_dir", "partition", "account", "qos", "wckey", "stdout_pattern",
                 "stderr_pattern", "stdin_path", "open_mode", "signal", "command")  # fmt: skip
_JOB_STRINGS = ("user", "group", "partition", "reason")


class Interner:
    """Shares equal strings and environments between job records; see the module docstring."""

    def __init__(self) -> None:
        self._envs: dict[tuple[tuple[str, str], ...], dict[str, str]] = {}

    def environment(self, env: dict[str, str]) -> dict[str, str]:
        """The canonical dict equal to ``env`` (keys and values interned)."""
        if not env:
            return env
        key = tuple(env.items())
        shared = self._envs.get(key)
        if shared is None:
            if len(self._envs) >= MAX_ENVIRONMENTS:
                self._envs = {}
            shared = {sys.intern(k): sys.intern(v) for k, v in env.items()}
            self._envs[tuple(shared.items())] = shared
        return shared

    def spec(self, spec: JobSpec) -> JobSpec:
        """``spec`` with its strings interned and its environment shared (changed in place)."""
        for name in _SPEC_STRINGS:
            value = getattr(spec, name)
            if value:
                setattr(spec, name, sys.intern(value))
        spec.environment = self.environment(spec.environment)
        return spec

    def job(self, job: Job) -> Job:
        """``job`` and its spec compacted (changed in place)."""
        for name in _JOB_STRINGS:
            value = getattr(job, name)
            if value:
                setattr(job, name, sys.intern(value))
        self.spec(job.spec)
        return job


def task_spec(spec: JobSpec) -> JobSpec:
    """An array task's own copy of ``spec``: its own fields and lists, the script and the (read-only)
    environment shared with the other tasks instead of copied."""
    out = copy.copy(spec)
    for name in ("argv", "gres", "nodelist", "exclude", "constraint"):
        setattr(out, name, list(getattr(spec, name)))
    return out
