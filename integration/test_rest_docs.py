"""docs/rest.md's examples, run exactly as written against a live spurctld and spurd.

Each ```sh block runs in bash (``set -euo pipefail``) in one working directory, in document order;
exported variables carry from block to block. A block preceded by ``<!-- requires: NAME -->`` is
skipped, with the reason, when this build lacks that piece (see ``MISSING``).
"""

from __future__ import annotations

import getpass
import importlib.util
import re
import subprocess
from pathlib import Path

import httpx
import pytest

from integration.harness import Cluster, wait_for

pytestmark = pytest.mark.integration

DOC = Path(__file__).resolve().parent.parent / "docs" / "rest.md"
SKIPPED: list[str] = []  # reasons of the blocks the live run left out (reported by the test below)
BLOCK = re.compile(r"(?:<!-- requires: (?P<req>[\w-]+) -->\n)?```sh\n(?P<code>.*?)```", re.S)


def blocks() -> list[tuple[str | None, str]]:
    return [(m.group("req"), m.group("code")) for m in BLOCK.finditer(DOC.read_text())]


def missing(requirement: str, rest_url: str) -> str | None:
    """Why a required piece is absent from this build (None: present)."""
    if requirement == "scontrol-token":
        if importlib.util.find_spec("spur.cli.token") is None:
            return "`scontrol token` is not in this build (identity/auth issue)"
        return None
    if requirement == "slurmdb-accounts":
        paths = httpx.get(f"{rest_url}/openapi.json").json()["paths"]
        if "/slurmdb/v0.0.38/accounts" not in paths:
            return "the slurmdb accounts endpoint needs the accounting backend (accounting issue)"
        return None
    raise AssertionError(f"unknown requirement {requirement!r} in docs/rest.md")


def test_doc_examples_run_against_a_live_controller(tmp_path: Path) -> None:
    c = Cluster(tmp_path)
    c.start_controller()
    c.wait_rest()
    c.start_agent("n1")
    try:
        c.wait_nodes("n1")
        rest = f"http://127.0.0.1:{c.rest_port}"
        work = tmp_path / "work"
        work.mkdir()
        state = tmp_path / "env.sh"
        state.write_text("")
        env = dict(c.env, SPUR_REST=rest, SPUR_METRICS=f"http://127.0.0.1:{c.metrics_port}", USER=getpass.getuser())
        env.pop("SLURM_JWT", None)
        outputs: list[str] = []
        skipped: list[str] = []
        found = blocks()
        assert len(found) >= 7, "docs/rest.md lost its examples"
        for requirement, code in found:
            if requirement is not None:
                reason = missing(requirement, rest)
                if reason is not None:
                    skipped.append(reason)
                    continue
            script = f"set -euo pipefail\nsource {state}\n{code}\nexport -p > {state}\n"
            proc = subprocess.run(
                ["bash", "-c", script], cwd=work, env=env, capture_output=True, text=True, timeout=120
            )
            assert proc.returncode == 0, f"block failed:\n{code}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
            outputs.append(proc.stdout)
            if "hello from" in proc.stdout:  # sattach followed the job to its end
                job_id = re.search(r"submitted job (\d+)", "".join(outputs)).group(1)  # type: ignore[union-attr]
                wait_for(lambda job_id=job_id: _state(rest, job_id) == "COMPLETED", timeout=30, what="completion")
        text = "\n".join(outputs)
        assert re.search(r"submitted job \d+", text)
        assert re.search(r"\d+ COMPLETED", text)
        assert re.search(r"hello from \S+\nbye\n", text)  # sattach printed the job's output, in order
        assert re.search(r"^spur_jobs_submitted_total \d", text, re.M)
        assert re.search(r"^spur_raft_term \d", text, re.M)
        sleeper = (work / "sleeper.json").read_text()
        sleeper_id = re.search(r'"job_id":(\d+)', sleeper).group(1)  # type: ignore[union-attr]
        wait_for(lambda: _state(rest, sleeper_id) == "CANCELLED", timeout=30, what="the cancelled sleeper")
        SKIPPED.extend(skipped)
    finally:
        for proc in [*c.agents.values(), c.controller]:
            if proc is not None:
                proc.kill()


def _state(rest: str, job_id: str) -> str:
    r = httpx.get(f"{rest}/slurm/v0.0.38/job/{job_id}", headers={"X-SLURM-USER-NAME": getpass.getuser()})
    return r.json()["jobs"][0]["job_state"]


@pytest.mark.parametrize("requirement", ["scontrol-token", "slurmdb-accounts"])
def test_doc_examples_that_need_other_pieces(requirement: str) -> None:
    """Reports, by name, each example the live run above had to leave out (it ran all others)."""
    needs = {"scontrol-token": "`scontrol token`", "slurmdb-accounts": "accounts endpoint"}[requirement]
    reasons = [r for r in SKIPPED if needs in r]
    if reasons:
        pytest.skip(f"docs/rest.md example not run: {reasons[0]}")
