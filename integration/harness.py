"""Real spurctld/spurd processes on loopback for multi-process tests.

Every process is started from the virtualenv's console scripts exactly as a user would, with its
own state directory, and is killed (SIGKILL) at teardown. Waiting is always "poll a condition until
a deadline", never a fixed sleep.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from integration import reaper

BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_free(port: int) -> bool:
    """Whether nothing listens on (or holds) loopback ``port`` now."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def wait_for(
    predicate: Callable[[], Any], timeout: float = 20.0, interval: float = 0.05, what: str = ""
) -> Any:
    """Poll ``predicate`` until it returns a truthy value; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    last_exc: Exception | None = None
    while time.monotonic() < deadline:
        try:
            value = predicate()
            if value:
                return value
        except Exception as exc:  # the condition may not be checkable yet (e.g. file not there)
            last_exc = exc
        time.sleep(interval)
    raise AssertionError(
        f"timed out after {timeout}s waiting for {what or predicate}: last error {last_exc!r}"
    )


def kill_job_processes(root: Path) -> int:
    """Kill what the jobs of every test agent under ``root`` left running (a job's processes outlive
    its agent by design): each job directory's task process group (``tasks.json``) and its shim
    (``shim.json``, ``launch.json``; only while the pid still names the process recorded there).
    Returns how many process groups and processes were signalled."""
    import json

    from spur.agent.jobdir import proc_starttime

    killed = 0
    for job_dir in [*root.glob("agent-*/jobs/*"), *root.glob("agent-*/clusters/*/jobs/*")]:
        try:
            pgid = int(json.loads((job_dir / "tasks.json").read_text()).get("pgid") or 0)
        except (OSError, ValueError, AttributeError):
            pgid = 0
        if pgid > 1 and pgid != os.getpgrp():
            try:
                os.killpg(pgid, signal.SIGKILL)
                killed += 1
            except OSError:
                pass
        for name in ("shim.json", "launch.json"):
            try:
                ident = json.loads((job_dir / name).read_text())
                pid, started = int(ident["pid"]), ident.get("starttime")
            except (OSError, ValueError, KeyError, TypeError):
                continue
            if pid > 1 and started is not None and proc_starttime(pid) == started:
                try:
                    os.kill(pid, signal.SIGKILL)
                    killed += 1
                except OSError:
                    pass
    return killed


def with_private_broker(conf_extra: str, socket_path: Path) -> str:
    """``conf_extra`` with ``[auth] broker_socket`` pointing at ``socket_path`` (unless it names one).

    A test daemon with a key must never serve the default ``/run/spur/auth.sock``: the CLI of every
    other test cluster on the machine would fetch tokens from it.
    """
    if "broker_socket" in conf_extra:
        return conf_extra
    line = f'broker_socket = "{socket_path}"\n'
    if re.search(r"^\[auth\]\s*$", conf_extra, re.M):
        return re.sub(r"^\[auth\]\s*\n", lambda m: m.group(0) + line, conf_extra, count=1, flags=re.M)
    return conf_extra + ("" if not conf_extra or conf_extra.endswith("\n") else "\n") + "[auth]\n" + line


def spurd_argv(
    root: Path,
    name: str,
    controllers: list[str],
    host: str,
    port: int,
    cpus: int,
    memory_mb: int,
    extra: list[str] | None = None,
) -> list[str]:
    """The command line of a test agent: fixed resources, 2 s kill grace, state under ``root``."""
    return [
        str(BIN / "spurd"),
        "-D",
        *(arg for address in controllers for arg in ("--controller", address)),
        "--listen",
        f"{host}:{port}",
        "--name",
        name,
        "--address",
        host,
        "--state-dir",
        str(root / f"agent-{name}"),
        "--cpus",
        str(cpus),
        "--memory-mb",
        str(memory_mb),
        "--kill-grace",
        "2",
        "--metrics-addr",
        "127.0.0.1:0",
        *(extra or []),
    ]


@dataclass
class Proc:
    argv: list[str]
    log_path: Path
    env: dict[str, str]
    popen: subprocess.Popen | None = None

    def start(self) -> Proc:
        log = open(self.log_path, "ab")
        self.popen = subprocess.Popen(
            self.argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=self.env,
            start_new_session=True,
        )
        log.close()
        reaper.track(self.popen)
        return self

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.popen and self.popen.poll() is None:
            self.popen.send_signal(sig)
            if sig in (signal.SIGKILL, signal.SIGTERM):
                self.popen.wait(timeout=20)

    def stop(self) -> None:
        """Teardown: SIGKILL. In a measured run (SPUR_COVERAGE set, see scripts/test.sh) SIGTERM
        first, so the daemon exits through its own shutdown and writes its coverage data; SIGKILL
        after 10 s."""
        if os.environ.get("SPUR_COVERAGE") and self.alive():
            assert self.popen is not None
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        self.kill()

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


@dataclass
class Cluster:
    root: Path
    conf_extra: str = ""
    # Extra lines for the [controller] section (``conf_extra`` goes after [scheduler]).
    controller_extra: str = ""
    # [controller] node_timeout_secs: an agent silent this long is marked DOWN.
    node_timeout_secs: int = 4
    port: int = field(default_factory=free_port)
    rest_port: int = field(default_factory=free_port)
    metrics_port: int = field(default_factory=free_port)
    controller: Proc | None = None
    # Start agents with ``-f spur.conf`` too (they then read [auth] and the cluster name from it).
    agent_conf: bool = False
    # Extra metadata on every call of :meth:`call` (e.g. an ``authorization`` header).
    metadata: dict[str, str] = field(default_factory=dict)
    # spur.rpc.tls.ClientTLS for :meth:`call` when the cluster runs [tls] required.
    tls: Any = None
    agents: dict[str, Proc] = field(default_factory=dict)
    agent_ports: dict[str, int] = field(default_factory=dict)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["SPUR_CONTROLLER"] = self.address
        env.pop("SPUR_CONF", None)
        env["SPUR_AUTH_SOCKET"] = str(self.root / "auth.sock")
        env["PATH"] = f"{BIN}:{env.get('PATH', '')}"
        return env

    def write_conf(self) -> Path:
        conf = self.root / "spur.conf"
        conf.write_text(
            'cluster_name = "itest"\n'
            "[controller]\n"
            f'state_dir = "{self.root / "ctl"}"\n'
            f'rest_addr = "127.0.0.1:{self.rest_port}"\n'
            f'metrics_addr = "127.0.0.1:{self.metrics_port}"\n'
            "heartbeat_interval_secs = 1\n"
            f"node_timeout_secs = {self.node_timeout_secs}\n"
            "kill_grace_secs = 2\n" + self.controller_extra + "[scheduler]\n"
            "interval_secs = 0.5\n" + with_private_broker(self.conf_extra, self.root / "auth.sock")
        )
        return conf

    def start_controller(self) -> Proc:
        conf = self.write_conf()
        argv = [str(BIN / "spurctld"), "-D", "-f", str(conf), "--listen", self.address]
        self.controller = Proc(argv, self.root / "spurctld.log", self.env).start()
        wait_for(self._controller_up, timeout=20, what="spurctld to answer")
        return self.controller

    def wait_rest(self, timeout: float = 20) -> None:
        """Wait until spurctld's REST API (and its metrics endpoint) accept connections."""

        def up() -> bool:
            for port in (self.rest_port, self.metrics_port):
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    pass
            return True

        wait_for(up, timeout=timeout, what="the REST API and metrics of spurctld")

    def _controller_up(self) -> bool:
        if self.controller and not self.controller.alive():
            raise AssertionError(f"spurctld exited:\n{self.controller.log()}")
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                return True
        except OSError:
            return False

    def start_agent(
        self, name: str, cpus: int = 2, memory_mb: int = 4000, extra: list[str] | None = None
    ) -> Proc:
        port = self.agent_ports.setdefault(name, free_port())
        if self.agent_conf:
            extra = ["-f", str(self.root / "spur.conf"), *(extra or [])]
        argv = spurd_argv(self.root, name, [self.address], "127.0.0.1", port, cpus, memory_mb, extra)
        proc = Proc(argv, self.root / f"spurd-{name}.log", self.env).start()
        self.agents[name] = proc
        return proc

    def wait_nodes(self, *names: str, state: str = "idle", timeout: float = 30) -> None:
        def ok() -> bool:
            nodes = {n.name: n.state for n in self.nodes()}
            return all(nodes.get(n) == state for n in names)

        wait_for(ok, timeout=timeout, what=f"nodes {names} to be {state}")

    def cli(
        self,
        *args: str,
        cwd: Path | None = None,
        input: str | None = None,
        check: bool = True,
        timeout: float = 60,
    ) -> subprocess.CompletedProcess:
        proc = subprocess.run(
            [str(BIN / args[0]), *args[1:]],
            cwd=cwd or self.root,
            env=self.env,
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"{args} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
        return proc

    # -------------------------------------------------------------- direct API (a real gRPC client)

    def call(self, method: str, request: Any, timeout: float = 30) -> Any:
        import trio

        from spur.auth.identity import identity_metadata
        from spur.rpc.channel import open_channel
        from spur.rpc.stub import controller_stub

        md = {**identity_metadata(), **self.metadata}

        async def run() -> Any:
            async with open_channel(self.address, metadata_provider=lambda: md, tls=self.tls) as ch:
                return await getattr(controller_stub(ch), method)(request, timeout=timeout)

        return trio.run(run)

    def jobs(self, *ids: int) -> dict[int, Any]:
        from spur.rpc.proto import spur_pb2 as pb

        resp = self.call("GetJobs", pb.GetJobsRequest(job_ids=list(ids), include_finished=True))
        return {j.job_id: j for j in resp.jobs}

    def job(self, job_id: int) -> Any:
        return self.jobs(job_id)[job_id]

    def nodes(self) -> list[Any]:
        from spur.rpc.proto import spur_pb2 as pb

        return list(self.call("GetNodes", pb.GetNodesRequest()).nodes)

    def wait_job(self, job_id: int, *states: str, timeout: float = 30) -> Any:
        return wait_for(
            lambda: (j := self.job(job_id)).state in states and j,
            timeout=timeout,
            what=f"job {job_id} to reach {states}",
        )

    def submit_spec(self, **spec: Any) -> int:
        from spur.rpc.proto import spur_pb2 as pb

        spec.setdefault("work_dir", str(self.root))
        return self.call("SubmitJob", pb.SubmitJobRequest(spec=pb.JobSpec(**spec))).job_id

    def stop(self) -> None:
        for proc in self.agents.values():
            proc.stop()
        if self.controller:
            self.controller.stop()
