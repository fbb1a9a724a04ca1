"""Agent pieces without job processes: systemd backend, backend choice, flags, reporter, registrar."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
import trio.testing

from spur.agent.backends import ProcessBackend
from spur.agent.controller_link import ControllerLink, local_address_towards, normalize_controller
from spur.agent.jobdir import JobDir, proc_starttime, process_identity, process_matches
from spur.agent.launchspec import LaunchSpec
from spur.agent.main import UsageError, main, parse_args, select_backend
from spur.agent.registration import Registrar
from spur.agent.reporter import Reporter
from spur.agent.systemd import (
    SystemdBackend,
    memory_limit_support,
    parse_show,
    systemd_is_pid1,
    systemd_run_command,
    unit_name,
    unit_out_of_memory,
)
from spur.rpc.proto import spur_pb2 as pb
from spur.rpc.status import RpcError, StatusCode

# ---------------------------------------------------------------- systemd backend


def _proc_fixture(tmp_path: Path, comm: str) -> Path:
    proc = tmp_path / "proc"
    (proc / "1").mkdir(parents=True)
    (proc / "1" / "comm").write_text(comm + "\n")
    return proc


def test_pid1_detection(tmp_path: Path) -> None:
    assert systemd_is_pid1(_proc_fixture(tmp_path / "a", "systemd"))
    assert not systemd_is_pid1(_proc_fixture(tmp_path / "b", "tini"))
    assert not systemd_is_pid1(tmp_path / "missing")


def test_systemd_run_command_line(tmp_path: Path) -> None:
    jd = JobDir(tmp_path / "jobs" / "77")
    spec = LaunchSpec(
        job_id=77,
        job_name="train",
        node="n1",
        user="alice",
        uid=1000,
        gid=1000,
        mem_mb=2048,
        environment={"SLURM_CLUSTER_NAME": "lab-a"},
    )
    cmd = systemd_run_command(jd, spec, systemd_run="/usr/bin/systemd-run")
    assert cmd[0] == "/usr/bin/systemd-run"
    assert "--unit=spur-lab_a-job-77.service" in cmd
    # a failed unit (Result=oom-kill) is kept until finish() has read it; an inactive one goes at once
    assert "--property=CollectMode=inactive" in cmd and "--collect" not in cmd
    assert "--service-type=exec" in cmd
    assert "--property=KillMode=control-group" in cmd
    assert "--property=MemoryMax=2048M" in cmd
    sep = cmd.index("--")
    assert cmd[sep + 1 :][1:] == ["-S", "-m", "spur.agent.shim", str(jd.path)]
    assert all(not a.startswith("--setenv=") or "=" in a[9:] for a in cmd[:sep])
    spec.mem_mb = 0
    assert not any("MemoryMax" in a for a in systemd_run_command(jd, spec))


def test_out_of_memory_from_systemctl_show() -> None:
    """``systemctl show -p Result,ExecMainCode,ExecMainStatus`` of job units as systemd 252 prints them
    (its own property order): only ``Result=oom-kill`` is Slurm's OUT_OF_MEMORY."""
    oom = parse_show("Result=oom-kill\nExecMainCode=1\nExecMainStatus=0\n")
    assert oom == {"Result": "oom-kill", "ExecMainCode": "1", "ExecMainStatus": "0"}
    assert unit_out_of_memory(oom)
    for result in ("success", "exit-code", "signal", "core-dump", "timeout", "resources", ""):
        assert not unit_out_of_memory({"Result": result, "ExecMainCode": "2", "ExecMainStatus": "9"}), result
    assert not unit_out_of_memory(None) and not unit_out_of_memory({})


def test_unit_names_are_named_by_cluster_and_job() -> None:
    assert unit_name("itest", 5) == "spur-itest-job-5.service"
    assert unit_name("itest", 5, 0) == "spur-itest-job-5-step-0.service"
    assert unit_name("a b/c-d", 5) == "spur-a_b_c_d-job-5.service"
    assert unit_name("", 5) == "spur-spur-job-5.service"


def test_memory_limit_support_by_cgroup_layout(tmp_path: Path) -> None:
    v2 = tmp_path / "v2"
    v2.mkdir()
    (v2 / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    assert memory_limit_support(v2) is None
    (v2 / "cgroup.controllers").write_text("cpuset cpu pids\n")
    assert "no memory controller" in (memory_limit_support(v2) or "")
    hybrid = tmp_path / "hybrid"
    (hybrid / "memory").mkdir(parents=True)
    (hybrid / "unified").mkdir()
    assert memory_limit_support(hybrid, writable=lambda p: True) is None
    assert "read-only" in (memory_limit_support(hybrid, writable=lambda p: False) or "")
    assert "no memory cgroup" in (memory_limit_support(tmp_path / "none") or "")


def test_backend_auto_picks_systemd_only_when_detected(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from spur.agent import systemd

    systemd_proc = _proc_fixture(tmp_path / "s", "systemd")
    other_proc = _proc_fixture(tmp_path / "o", "init")
    monkeypatch.setattr(systemd, "systemd_run_path", lambda: "/usr/bin/systemd-run")
    assert isinstance(select_backend("auto", euid=0, proc=systemd_proc), SystemdBackend)
    assert isinstance(select_backend("auto", euid=0, proc=other_proc), ProcessBackend)
    assert isinstance(select_backend("auto", euid=1000, proc=systemd_proc), ProcessBackend)
    monkeypatch.setattr(systemd, "systemd_run_path", lambda: None)
    assert isinstance(select_backend("auto", euid=0, proc=systemd_proc), ProcessBackend)
    assert isinstance(select_backend("systemd"), SystemdBackend)
    assert isinstance(select_backend("process", euid=0, proc=systemd_proc), ProcessBackend)
    with pytest.raises(ValueError, match="unknown backend 'docker'"):
        select_backend("docker")


# ---------------------------------------------------------------- job dir identity


def test_process_identity_detects_pid_reuse() -> None:
    import os

    me = process_identity(os.getpid())
    assert process_matches(me)
    assert not process_matches({**me, "starttime": (me["starttime"] or 0) + 1})
    assert not process_matches({**me, "boot_id": "another-boot"})
    assert not process_matches({"pid": 0})
    assert proc_starttime(2**22 + 12345) is None


# ---------------------------------------------------------------- flags


def test_defaults_and_overrides(tmp_path: Path) -> None:
    opts = parse_args(["-D", "--name", "n7"])
    assert opts.controllers == ["localhost:6817"]
    assert (opts.listen_host, opts.listen_port) == ("0.0.0.0", 6818)
    assert opts.kill_grace == 30.0 and opts.backend == "auto" and opts.heartbeat is None
    opts = parse_args(
        [
            "--controller",
            "http://c1:7000,c2",
            "--controller",
            "c3:7001",
            "--listen",
            "127.0.0.1:0",
            "--port",
            "6900",
            "--state-dir",
            str(tmp_path),
            "--cpus",
            "3",
            "--memory-mb",
            "100",
            "--kill-grace",
            "2.5",
            "--heartbeat",
            "1",
            "--backend",
            "process",
        ]
    )
    assert opts.controllers == ["c1:7000", "c2:6817", "c3:7001"]
    assert (opts.listen_host, opts.listen_port) == ("127.0.0.1", 6900)
    assert (opts.cpus, opts.memory_mb, opts.kill_grace, opts.heartbeat) == (3, 100, 2.5, 1.0)
    assert opts.state_dir == tmp_path


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--cpus", "0"], "--cpus 0"),
        (["--listen", "nowhere"], "--listen 'nowhere'"),
        (["--controller", "c1:99999"], "--controller"),
        (["--kill-grace", "-1"], "--kill-grace"),
        (["--heartbeat", "0"], "--heartbeat"),
        (["--name", "a b"], "--name"),
    ],
)
def test_bad_flag_values(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(UsageError, match=message):
        parse_args(argv)
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("spurd: error:") and message.split()[0] in err[0]


def test_unknown_flag_exits_2() -> None:
    with pytest.raises(SystemExit) as exc:
        parse_args(["--bogus"])
    assert exc.value.code == 2


def test_conf_file_supplies_defaults(tmp_path: Path) -> None:
    conf = tmp_path / "spur.conf"
    conf.write_text(
        'cluster_name = "lab"\n[agent]\ncontroller = ["ctl:7777"]\nnode_name = "gpu01"\n'
        f'state_dir = "{tmp_path}/st"\n'
    )
    try:
        opts = parse_args(["--conf", str(conf)])
    except UsageError as e:  # the config schema may differ; it must still be one clear error
        pytest.skip(f"config schema differs: {e}")
    assert opts.controllers == ["ctl:7777"]
    assert opts.name == "gpu01"
    assert opts.cluster_name == "lab"
    assert parse_args(["--conf", str(conf), "--name", "x"]).name == "x"


def test_normalize_controller() -> None:
    assert normalize_controller("http://10.0.0.1:6817/") == "10.0.0.1:6817"
    assert normalize_controller("ctl") == "ctl:6817"
    assert normalize_controller("[::1]:7") == "[::1]:7"
    with pytest.raises(ValueError):
        normalize_controller("")


async def test_local_address_for_loopback() -> None:
    assert await local_address_towards("127.0.0.1:6817") == "127.0.0.1"


# ---------------------------------------------------------------- controller link failover


class _FakeStub:
    def __init__(self, name: str, fail: StatusCode | None, calls: list[str]) -> None:
        self.name, self.fail, self.calls = name, fail, calls

    async def Heartbeat(self, request: object, timeout: float | None = None) -> str:
        self.calls.append(self.name)
        if self.fail is not None:
            raise RpcError(self.fail, f"{self.name} failed")
        return self.name


async def test_controller_link_fails_over_on_unavailable_only() -> None:
    calls: list[str] = []
    link = ControllerLink.__new__(ControllerLink)
    link.targets = ["a:1", "b:1"]
    link._stubs = [_FakeStub("a", StatusCode.UNAVAILABLE, calls), _FakeStub("b", None, calls)]  # type: ignore[list-item]
    link._current = 0
    link.call_timeout = 1
    link.metadata = {}
    assert await link.call("Heartbeat", object()) == "b"
    assert link.current_target == "b:1"
    assert await link.call("Heartbeat", object()) == "b"
    assert calls == ["a", "b", "b"]
    link._stubs[1].fail = StatusCode.PERMISSION_DENIED  # type: ignore[attr-defined]
    with pytest.raises(RpcError) as exc:
        await link.call("Heartbeat", object())
    assert exc.value.code == StatusCode.PERMISSION_DENIED


# ---------------------------------------------------------------- reporter


async def test_reporter_retries_with_backoff_until_acknowledged(
    autojump_clock: trio.testing.MockClock,
) -> None:
    attempts: list[float] = []
    acked: list[int] = []

    async def send(report: pb.JobStatusReport) -> None:
        attempts.append(trio.current_time())
        if len(attempts) < 5:
            raise RpcError(StatusCode.UNAVAILABLE, "controller down")

    reporter = Reporter(send, lambda r: acked.append(r.job_id), initial_backoff=1, max_backoff=4)
    async with trio.open_nursery() as nursery:
        await nursery.start(reporter.run)
        reporter.submit(pb.JobStatusReport(job_id=9, exit_code=2))
        with trio.fail_after(100):
            while not acked:
                await trio.sleep(0.5)
        nursery.cancel_scope.cancel()
    assert acked == [9]
    gaps = [round(b - a, 3) for a, b in zip(attempts, attempts[1:], strict=False)]
    assert gaps == [1, 2, 4, 4]  # exponential, capped
    assert reporter.pending == []


async def test_reporter_drops_reports_the_controller_rejects(autojump_clock: trio.testing.MockClock) -> None:
    acked: list[int] = []

    async def send(report: pb.JobStatusReport) -> None:
        if report.job_id == 1:
            raise RpcError(StatusCode.NOT_FOUND, "no job 1")

    reporter = Reporter(send, lambda r: acked.append(r.job_id))
    async with trio.open_nursery() as nursery:
        await nursery.start(reporter.run)
        reporter.submit(pb.JobStatusReport(job_id=1))
        reporter.submit(pb.JobStatusReport(job_id=2))
        with trio.fail_after(10):
            while len(acked) < 2:
                await trio.sleep(0.1)
        nursery.cancel_scope.cancel()
    assert acked == [1, 2]


# ---------------------------------------------------------------- registrar


async def test_registrar_retries_then_heartbeats_and_reregisters(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log: list[tuple[float, str]] = []
    state = {"register_failures": 3, "known": True}

    async def call(name: str, request: object) -> object:
        log.append((trio.current_time(), name))
        if name == "RegisterNode":
            if state["register_failures"]:
                state["register_failures"] -= 1  # type: ignore[operator]
                raise RpcError(StatusCode.UNAVAILABLE, "no controller")
            return pb.RegisterNodeResponse(heartbeat_interval_secs=10, cluster_name="lab")
        assert isinstance(request, pb.HeartbeatRequest)
        assert list(request.running_job_ids) == [5, 6]
        return pb.HeartbeatResponse(known=bool(state["known"]))

    async def build() -> pb.RegisterNodeRequest:
        return pb.RegisterNodeRequest(name="n1")

    seen: list[str] = []
    registrar = Registrar(
        call,
        build_request=build,
        running_job_ids=lambda: [5, 6],
        node_name="n1",
        on_registered=lambda r: seen.append(r.cluster_name),
        initial_backoff=1,
        max_backoff=2,
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(registrar.run)
        await registrar.registered.wait()
        t0 = trio.current_time()
        assert [round(t) for t, n in log if n == "RegisterNode"] == [0, 1, 3, 5]
        await trio.sleep(25)
        beats = [round(t - t0) for t, n in log if n == "Heartbeat"]
        assert beats == [10, 20]
        state["known"] = False
        await trio.sleep(10)
        nursery.cancel_scope.cancel()
    assert registrar.registrations == 2
    assert seen == ["lab", "lab"]


async def test_heartbeat_override(autojump_clock: trio.testing.MockClock) -> None:
    times: list[float] = []

    async def call(name: str, request: object) -> object:
        if name == "RegisterNode":
            return pb.RegisterNodeResponse(heartbeat_interval_secs=30)
        times.append(trio.current_time())
        return pb.HeartbeatResponse(known=True)

    async def build() -> pb.RegisterNodeRequest:
        return pb.RegisterNodeRequest(name="n1")

    registrar = Registrar(
        call, build_request=build, running_job_ids=list, node_name="n1", heartbeat_override=2
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(registrar.run)
        await trio.sleep(7)
        nursery.cancel_scope.cancel()
    assert [round(t) for t in times] == [2, 4, 6]
