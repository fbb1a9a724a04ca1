"""docs/rest.md's examples, run exactly as written against a live spurctld and spurd.

Each ```sh block runs in bash (``set -euo pipefail``) in one working directory, in document order;
exported variables carry from block to block. The cluster runs ``[auth] mode = "required"``, so the
token ``scontrol token`` prints (from the local credential broker) is what every request rides on.
"""

from __future__ import annotations

import getpass
import os
import re
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from integration.harness import Cluster, wait_for
from spur.auth.tokens import mint

pytestmark = pytest.mark.integration

DOC = Path(__file__).resolve().parent.parent / "docs" / "rest.md"
BLOCK = re.compile(r"```sh\n(?P<code>.*?)```", re.S)
KEY = b"rest-docs-test-key-0123456789abcdef"


def blocks() -> list[str]:
    return [m.group("code") for m in BLOCK.finditer(DOC.read_text())]


def test_doc_examples_run_against_a_live_controller(tmp_path: Path) -> None:
    key = tmp_path / "jwt.key"
    key.write_bytes(KEY)
    key.chmod(0o600)
    conf = f'[auth]\nmode = "required"\njwt_key_file = "{key}"\nbroker_socket = "{tmp_path / "auth.sock"}"\n'
    c = Cluster(tmp_path, conf_extra=conf, agent_conf=True)
    me = getpass.getuser()
    c.metadata = {"authorization": "Bearer " + mint(KEY, me, os.getuid(), now=time.time(), ttl_secs=600)}
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
        env = dict(c.env, SPUR_REST=rest, SPUR_METRICS=f"http://127.0.0.1:{c.metrics_port}", USER=me,
                   SPUR_CONF=str(tmp_path / "spur.conf"))  # fmt: skip
        env.pop("SLURM_JWT", None)
        outputs: list[str] = []
        found = blocks()
        assert len(found) >= 8, "docs/rest.md lost its examples"
        for code in found:
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
        assert "errors: []\n" in text and re.search(r"^\[.*'physics'.*\]$", text, re.M)  # the account the example added is listed
    finally:
        for proc in [*c.agents.values(), c.controller]:
            if proc is not None:
                proc.kill()


def _state(rest: str, job_id: str) -> str:
    token = mint(KEY, getpass.getuser(), os.getuid(), now=time.time(), ttl_secs=60)
    r = httpx.get(f"{rest}/slurm/v0.0.38/job/{job_id}", headers={"Authorization": f"Bearer {token}"})
    return r.json()["jobs"][0]["job_state"]
