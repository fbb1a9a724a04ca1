"""The two systems a conformance case runs against, and how one run of a case is normalized.

A :class:`System` is one set of commands (real Slurm 22.05's, or Spur's) with the environment that
points them at their own cluster, a directory for the cases' working directories, and the names that
legitimately differ between the two (cluster, partition, node). :func:`run_snippet` runs a case's
shell snippet in a fresh directory with the system's environment; :func:`normalize` (pure) rewrites
what may legitimately differ into placeholders, so the two results can be compared as text.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

# Job ids of both systems start at or above this (Slurm's FirstJobId; Spur's counter is moved past it
# at start-up), so that a job id never equals a small count (CPUs, tasks, MB) in the same output.
FIRST_JOB_ID = 1000
# A case never creates more jobs than this: numbers in [floor, floor + span) are that case's job ids.
_ID_SPAN = 5000

# Shell functions every snippet can use (defined the same way for both systems).
PRELUDE = r"""
wj() {  # wait until job $1 (all of its array tasks) left the queue
  local i
  for i in $(seq 1200); do
    if ! squeue -h -j "$1" -o %T 2>/dev/null | grep -qE 'PENDING|RUNNING|COMPLETING|CONFIGURING|SUSPENDED'; then
      return 0
    fi
    sleep 0.1
  done
  echo "wj: job $1 still queued after 120 s" >&2
  return 1
}
sub() {  # sbatch --parsable "$@", wait for the job, print its id
  local id
  id=$(sbatch --parsable "$@") || return $?
  id=${id%%;*}
  wj "$id" || return $?
  echo "$id"
}
wa() {  # wait until accounting holds job $1's final record (its allocation and the batch step ended)
  local i
  for i in $(seq 600); do
    if sacct -n -X -P -j "$1" -o State,Partition 2>/dev/null | grep -qE '^(COMPLETED|FAILED|CANCELLED|TIMEOUT|OUT_OF_MEMORY)[^|]*[|].' &&
      sacct -n -P -j "$1.batch" -o State 2>/dev/null | grep -qE '^(COMPLETED|FAILED|CANCELLED)'; then
      return 0
    fi
    sleep 0.1
  done
  echo "wa: job $1 has no final accounting record after 60 s" >&2
  return 1
}
settled() {  # cancel every job but the shared ones ($JP, $JR), then wait until none is left
  # Both schedulers grant an allocation at submission only when nothing competes for the node: an
  # earlier case's job still pending (for resources) or draining would make Slurm queue the request.
  local i left
  squeue -h -o %A | grep -vxE "${JP:-x}|${JR:-x}" | sort -u | xargs -r scancel
  for i in $(seq 600); do
    left=$(squeue -h -o '%i %T %r' | grep -vE "^(${JP:-x}|${JR:-x}) ")
    [ -z "$left" ] && return 0
    sleep 0.1
  done
  echo "settled: after 60 s still queued: $left" >&2
  return 1
}
"""


@dataclass
class Outcome:
    """What one run of a snippet produced (normalized by :func:`normalize`)."""

    rc: int
    stdout: str
    stderr: str

    def as_text(self) -> str:
        return f"rc={self.rc}\n--- stdout\n{self.stdout}--- stderr\n{self.stderr}"


@dataclass
class System:
    """One side of the comparison."""

    name: str
    env: dict[str, str]
    root: Path
    # Literal text -> placeholder, for what legitimately differs (cluster, partition, node names).
    names: dict[str, str]
    # Lowest job id a case may still see; raised past every id a case saw.
    id_floor: int = FIRST_JOB_ID
    # Where the system's node keeps a job's script, as a pattern whose group 1 is the job id
    # (Slurm: SlurmdSpoolDir/job%05u/, Spur: the agent's job directory): -> ``<SPOOL>/ID/``.
    spool: str = r"(?!)"
    _counter: int = field(default=0, repr=False)

    def case_dir(self, case_id: str) -> Path:
        self._counter += 1
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", case_id)[:60]
        path = self.root / f"{self._counter:04d}-{safe}"
        path.mkdir(parents=True)
        return path


def run_snippet(system: System, case_id: str, snippet: str, timeout: float = 150) -> Outcome:
    """Run ``snippet`` with bash in a fresh directory of ``system``; the normalized outcome."""
    cwd = system.case_dir(case_id)
    # In a session of its own, so that a snippet that runs out of time goes with everything it
    # started (a waiting srun would otherwise outlive the case and the cluster).
    proc = subprocess.Popen(
        ["bash", "-c", PRELUDE + snippet],
        cwd=cwd,
        env=system.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
        rc = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        rc = -999
        err += f"\n(timed out after {timeout} s)\n"
    outcome, top = normalize(
        Outcome(rc, out, err), cwd=str(cwd), names=system.names, id_floor=system.id_floor, spool=system.spool
    )
    system.id_floor = max(system.id_floor, top + 1)
    return outcome


_ISO_TIME = re.compile(r"\b\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\b")
_EPOCH = re.compile(r"(?<!\d)1[6-9]\d{8}(?!\d)")
_NUMBER = re.compile(r"(?<![\d.])(\d+)(?![\d])")
_PIDS = re.compile(r"\b((?:SLURM|SPUR)_(?:TASK_PID|PRIO_PROCESS)=)\d+")
# The submitting shell's session id (a process id, which may fall in the job id range).
_SID = re.compile(r"(AllocNode:Sid=\S*?:)\d+")


def normalize(
    outcome: Outcome, *, cwd: str, names: Mapping[str, str], id_floor: int, spool: str = r"(?!)"
) -> tuple[Outcome, int]:
    """``outcome`` with what legitimately differs replaced, and the highest job id seen (or
    ``id_floor - 1``). Pure.

    - the case's working directory -> ``<CWD>``;
    - the node's directory of job ``N`` (``spool``, group 1 the id) -> ``<SPOOL>/N/``;
    - ``names`` (cluster, partition, node) -> their placeholders, as whole words;
    - timestamps (ISO and epoch seconds) -> ``<TIME>``;
    - numbers in ``[id_floor, id_floor + 5000)`` -> ``J1``, ``J2``, ... in order of first appearance
      (stdout before stderr), so both systems' first job reads ``J1``;
    - process ids in ``SLURM_TASK_PID=``/``SLURM_PRIO_PROCESS=`` -> ``<PID>``, and the session id of
      ``AllocNode:Sid=host:N`` -> ``<SID>`` (a process id must not pass for a job id).
    """
    ids: dict[str, str] = {}
    top = id_floor - 1

    def job_id(m: re.Match[str]) -> str:
        nonlocal top
        value = int(m.group(1))
        if id_floor <= value < id_floor + _ID_SPAN:
            top = max(top, value)
            return ids.setdefault(m.group(1), f"J{len(ids) + 1}")
        return m.group(1)

    def one(text: str) -> str:
        text = text.replace(cwd, "<CWD>")
        text = re.sub(spool, lambda m: f"<SPOOL>/{int(m.group(1))}/", text)
        for literal, placeholder in sorted(names.items(), key=lambda kv: -len(kv[0])):
            text = re.sub(rf"(?<![\w-]){re.escape(literal)}(?![\w-])", placeholder, text)
        text = _ISO_TIME.sub("<TIME>", text)
        text = _EPOCH.sub("<TIME>", text)
        text = _PIDS.sub(r"\1<PID>", text)
        text = _SID.sub(r"\1<SID>", text)
        return _NUMBER.sub(job_id, text)

    out = one(outcome.stdout)
    err = one(outcome.stderr)
    return Outcome(outcome.rc, out, err), top
