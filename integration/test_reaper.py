"""The session reaper (integration/reaper.py): a test session that fails leaves no process behind."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from integration import reaper
from integration.harness import wait_for

ROOT = Path(__file__).resolve().parent.parent

# Starts a controller and an agent with the harness, plus a daemon outside it (double fork, own
# session, re-parented to init), records their pids, then fails before any teardown of its own.
LEAKY_TEST = """
import subprocess
from pathlib import Path

from integration.harness import Cluster


def test_fails_with_daemons_running(tmp_path):
    c = Cluster(tmp_path)
    c.start_controller()
    agent = c.start_agent("n1")
    c.wait_nodes("n1")
    subprocess.run(["sh", "-c", "setsid sleep 600 </dev/null >/dev/null 2>&1 & echo $! > {orphan}"], check=True)
    Path("{pids}").write_text(f"{{c.controller.popen.pid}} {{agent.popen.pid}}")
    assert False, "deliberate failure with the daemons still running"
"""


def test_plugin_is_loaded_for_the_whole_suite(request: pytest.FixtureRequest) -> None:
    assert request.config.pluginmanager.has_plugin("integration.reaper")
    assert os.environ[reaper.MARKER] == reaper.session_id()


def test_failed_session_leaves_no_process(tmp_path: Path) -> None:
    pids_file, orphan_file = tmp_path / "pids", tmp_path / "orphan"
    test_file = tmp_path / "test_leaky.py"
    test_file.write_text(textwrap.dedent(LEAKY_TEST.format(pids=pids_file, orphan=orphan_file)))
    # A probe of this test's own in every process of the nested session: independent of the marker
    # the reaper itself uses.
    probe = secrets.token_hex(8)
    env = {**os.environ, "SPUR_REAPER_PROBE": probe}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "integration.reaper",
         "--rootdir", str(tmp_path), "-o", "addopts=", str(test_file)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=180,
    )
    assert run.returncode == 1, run.stdout + run.stderr
    assert "deliberate failure" in run.stdout
    ctl_pid, agent_pid = map(int, pids_file.read_text().split())
    orphan_pid = int(orphan_file.read_text())
    assert "reaper: killed" in run.stderr
    for pid in (ctl_pid, agent_pid, orphan_pid):
        assert str(pid) in run.stderr
    # The reaper waits until they are gone; the orphan's zombie is init's to collect, hence the wait.
    wait_for(lambda: not list(reaper.processes_with("SPUR_REAPER_PROBE", probe)), timeout=5,
             what="no process of the nested session to remain")
    for pid in (ctl_pid, agent_pid, orphan_pid):
        assert not reaper._live(pid), pid
