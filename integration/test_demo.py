"""The README's first command, as a new user runs it: ``bash scripts/demo.sh`` sets up the runtime,
starts spurctld and spurd on localhost (the default ports 6817/6818), runs the sample job and a
``spur run``, and shows what a user would check: the queue, the node, the job's end and its output.

Run twice: the second run (same checkout, same default ports) must look the same as the first.
"""

from __future__ import annotations

import re
import socket
import subprocess
from pathlib import Path

import pytest

from integration.harness import port_free

ROOT = Path(__file__).resolve().parent.parent


def _section(out: str, command: str) -> str:
    """The lines the demo printed after ``$ command`` up to the next ``$`` line."""
    m = re.search(rf"^\$ {re.escape(command)}\n(.*?)(?=^\$ |\Z)", out, re.S | re.M)
    assert m, f"no '$ {command}' in the demo's output:\n{out}"
    return m.group(1)


@pytest.mark.timeout(400)
def test_the_demo_runs_the_sample_job_on_a_registered_node_twice() -> None:
    if not (port_free(6817) and port_free(6818)):
        pytest.fail("ports 6817/6818 are taken on this machine; the demo uses Spur's default ports")
    for run in (1, 2):
        done = subprocess.run(
            ["bash", "scripts/demo.sh"], cwd=ROOT, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL
        )
        out = done.stdout
        assert done.returncode == 0, f"run {run}: exit {done.returncode}\n{out}\n{done.stderr}"
        assert _section(out, "sbatch hello.sh").strip() == "Submitted batch job 1"
        # The node is registered before the job is submitted: sinfo shows it, and the job does not
        # wait for a node to exist (ReqNodeNotAvail).
        sinfo = _section(out, "sinfo").splitlines()
        assert sinfo[0].split() == ["PARTITION", "AVAIL", "TIMELIMIT", "NODES", "STATE", "NODELIST"]
        nodes = {fields[4]: int(fields[3]) for fields in (line.split() for line in sinfo[1:]) if len(fields) == 6}
        assert sum(nodes.values()) >= 1 and set(nodes) <= {"idle", "mix", "alloc"}, "\n".join(sinfo)
        squeue = _section(out, "squeue")
        assert "ReqNodeNotAvail" not in squeue and re.search(r"^\s+1\s+default\s+hello\s", squeue, re.M), squeue
        assert "JobState=COMPLETED" in _section(out, "scontrol show job 1 | grep JobState")
        output = _section(out, "cat slurm-1.out").splitlines()
        assert re.fullmatch(r"Hello from job 1 \(hello\) on \S+ with \d+ CPU\(s\)", output[0]) and output[1] == "Done."
        assert _section(out, "spur run -- hostname").strip() == socket.gethostname().split(".")[0]
        assert re.search(r"demo: \[\d+s\] done", done.stderr)
