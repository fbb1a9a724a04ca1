"""Several real spurctld processes in one Raft group, with real agents, for HA and fault tests.

Each controller runs from the virtualenv's console script with its own config and state directory.
With ``netns=True`` (needs root and ``ip netns``) every controller lives in its own network namespace
with its own address on a veth pair enslaved to a bridge in the root namespace, so `isolate` cuts it
off the network for real (raft, client and agent traffic alike) by taking its veth link down. Without
namespaces all controllers listen on loopback. Faults are applied to processes and links from the
outside only (SIGKILL, SIGSTOP/SIGCONT, link down, a full filesystem): the daemons run unmodified.

Waiting is always "poll a condition until a deadline", never a fixed sleep.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from integration.harness import BIN, Proc, free_port, spurd_argv, wait_for, with_private_broker

# Fast timeouts for tests (the daemon defaults, 1000-2000 ms and 200 ms, are what bench/ measures).
FAST_TIMEOUTS = {"election_timeout_min_ms": 500, "election_timeout_max_ms": 1000, "heartbeat_ms": 100}
# The metadata header that makes a controller answer GetJobs from its own applied state (no forwarding).
LOCAL_READ_KEY = "x-spur-local-read"


def netns_available() -> bool:
    """Whether this process may create network namespaces (root with a working ``ip netns``)."""
    if os.geteuid() != 0:
        return False
    name = f"spurprobe{secrets.token_hex(3)}"
    ok = subprocess.run(["ip", "netns", "add", name], capture_output=True).returncode == 0
    if ok:
        subprocess.run(["ip", "netns", "del", name], capture_output=True)
    return ok


def loop_mount_available() -> bool:
    """Whether a loop-mounted filesystem can be made here (root, losetup, mkfs.ext4)."""
    return os.geteuid() == 0 and Path("/dev/loop-control").exists() and _which("mkfs.ext4") is not None


def _which(name: str) -> str | None:
    import shutil

    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin")


def _ip(*args: str) -> None:
    proc = subprocess.run(["ip", *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)} failed: {proc.stderr.strip()}")


@dataclass
class Member:
    """One controller of the group (1-based `node_id`, the position in ``controller.peers``)."""

    node_id: int
    host: str
    port: int
    raft_port: int
    state_dir: Path
    conf: Path
    log_path: Path
    netns: str | None = None
    veth: str | None = None  # host-side veth (netns mode)
    proc: Proc | None = None
    rest_port: int = 0  # REST API port (0: any free one, not reachable by tests)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None and self.proc.popen is not None
        return self.proc.popen.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.alive()


@dataclass
class HACluster:
    """`size` controllers in one Raft group plus agents. Call `start`, then `stop` at teardown."""

    root: Path
    size: int = 3
    netns: bool = False
    timeouts: dict[str, int] = field(default_factory=lambda: dict(FAST_TIMEOUTS))
    conf_extra: str = ""
    # spur.rpc.tls.ClientTLS for the harness's own calls when the members run [tls] required.
    tls: Any = None
    state_dirs: dict[int, Path] = field(default_factory=dict)  # override a member's state_dir
    members: list[Member] = field(default_factory=list)
    agents: dict[str, Proc] = field(default_factory=dict)
    agent_ports: dict[str, int] = field(default_factory=dict)
    _token: str = field(default_factory=lambda: secrets.token_hex(2))
    _subnet: str = ""
    _bridge: str = ""

    # ------------------------------------------------------------------ topology

    def __post_init__(self) -> None:
        if self.netns:
            self._subnet = f"10.{200 + int(self._token[:2], 16) % 50}.{int(self._token[2:], 16)}"
            self._bridge = f"spbr{self._token}"
        for i in range(1, self.size + 1):
            host = f"{self._subnet}.{10 + i}" if self.netns else "127.0.0.1"
            # In a namespace of its own each controller has its address to itself: fixed ports do.
            port, raft_port = (6817, 6821) if self.netns else (free_port(), free_port())
            self.members.append(
                Member(
                    node_id=i,
                    host=host,
                    port=port,
                    raft_port=raft_port,
                    state_dir=self.state_dirs.get(i, self.root / f"ctl{i}"),
                    conf=self.root / f"ctl{i}.conf",
                    log_path=self.root / f"spurctld{i}.log",
                    netns=f"spur{self._token}n{i}" if self.netns else None,
                    veth=f"spv{self._token}n{i}" if self.netns else None,
                    rest_port=6820 if self.netns else free_port(),
                )
            )

    @property
    def host_address(self) -> str:
        """The address agents use (and controllers reach them at)."""
        return f"{self._subnet}.1" if self.netns else "127.0.0.1"

    @property
    def addresses(self) -> list[str]:
        return [m.address for m in self.members]

    def member(self, node_id: int) -> Member:
        return self.members[node_id - 1]

    @property
    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["SPUR_CONTROLLER"] = ",".join(self.addresses)
        env.pop("SPUR_CONF", None)
        env["SPUR_AUTH_SOCKET"] = str(self.members[0].state_dir.parent / "auth.sock")
        env["PATH"] = f"{BIN}:{env.get('PATH', '')}"
        return env

    def _setup_network(self) -> None:
        _ip("link", "add", self._bridge, "type", "bridge")
        _ip("addr", "add", f"{self.host_address}/24", "dev", self._bridge)
        _ip("link", "set", self._bridge, "up")
        for m in self.members:
            assert m.netns and m.veth
            _ip("netns", "add", m.netns)
            _ip("link", "add", m.veth, "type", "veth", "peer", "name", "eth0", "netns", m.netns)
            _ip("link", "set", m.veth, "master", self._bridge, "up")
            _ip("-n", m.netns, "addr", "add", f"{m.host}/24", "dev", "eth0")
            _ip("-n", m.netns, "link", "set", "eth0", "up")
            _ip("-n", m.netns, "link", "set", "lo", "up")

    def _teardown_network(self) -> None:
        for m in self.members:
            if m.netns:
                subprocess.run(["ip", "netns", "del", m.netns], capture_output=True)
        if self._bridge:
            subprocess.run(["ip", "link", "del", self._bridge], capture_output=True)

    def write_conf(self, m: Member) -> None:
        peers = ", ".join(f'"{x.host}:{x.raft_port}"' for x in self.members)
        timing = "".join(f"{k} = {v}\n" for k, v in self.timeouts.items())
        m.conf.write_text(
            'cluster_name = "hatest"\n'
            "[controller]\n"
            f"peers = [{peers}]\n"
            f"node_id = {m.node_id}\n"
            f'raft_listen_addr = "{m.host}:{m.raft_port}"\n'
            f'state_dir = "{m.state_dir}"\n'
            f'rest_addr = "{m.host}:{m.rest_port}"\n'
            f'metrics_addr = "{m.host}:0"\n'
            "heartbeat_interval_secs = 1\n"
            "node_timeout_secs = 6\n"
            "kill_grace_secs = 2\n" + timing + "[scheduler]\n"
            "interval_secs = 0.2\n" + with_private_broker(self.conf_extra, m.state_dir.parent / "auth.sock")
        )

    # ------------------------------------------------------------------ lifecycle

    def start(self, wait_leader: bool = True) -> None:
        if self.netns:
            self._setup_network()
        for m in self.members:
            self.start_member(m.node_id, wait=False)
        for m in self.members:
            wait_for(lambda m=m: self._up(m), timeout=30, what=f"spurctld {m.node_id} to answer")
        if wait_leader:
            self.wait_leader()

    def start_member(self, node_id: int, wait: bool = True) -> Member:
        """Start (or restart, with the same state dir) controller `node_id`."""
        m = self.member(node_id)
        self.write_conf(m)
        argv = [str(BIN / "spurctld"), "-D", "-f", str(m.conf), "--listen", m.address]
        if m.netns:  # ``ip netns exec`` execs the daemon: the pid we hold is spurctld's own
            argv = ["ip", "netns", "exec", m.netns, *argv]
        m.proc = Proc(argv, m.log_path, self.env).start()
        if wait:
            wait_for(lambda: self._up(m), timeout=30, what=f"spurctld {node_id} to answer")
        return m

    def _up(self, m: Member) -> bool:
        if not m.alive():
            raise AssertionError(f"spurctld {m.node_id} exited:\n{m.proc.log() if m.proc else ''}")
        return self.status(m.node_id) is not None

    def kill(self, node_id: int) -> None:
        """kill -9 controller `node_id` and reap it."""
        m = self.member(node_id)
        assert m.proc is not None
        m.proc.kill(signal.SIGKILL)

    def pause(self, node_id: int) -> None:
        os.kill(self.member(node_id).pid, signal.SIGSTOP)

    def resume(self, node_id: int) -> None:
        os.kill(self.member(node_id).pid, signal.SIGCONT)

    def isolate(self, node_id: int) -> None:
        """Cut controller `node_id` off the network (its veth link goes down; packets are lost)."""
        m = self.member(node_id)
        if not m.veth:
            raise RuntimeError("isolate needs the cluster to run with netns=True")
        _ip("link", "set", m.veth, "down")

    def heal(self, node_id: int) -> None:
        m = self.member(node_id)
        assert m.veth
        _ip("link", "set", m.veth, "master", self._bridge, "up")

    def stop(self) -> None:
        for proc in self.agents.values():
            with contextlib.suppress(Exception):
                proc.stop()
        for m in self.members:
            if m.alive():
                with contextlib.suppress(OSError):
                    os.kill(m.pid, signal.SIGCONT)
                m.proc.stop()  # type: ignore[union-attr]
        self._teardown_network()

    # ------------------------------------------------------------------ agents

    def start_agent(self, name: str, cpus: int = 2, memory_mb: int = 4000) -> Proc:
        port = self.agent_ports.setdefault(name, free_port())
        argv = spurd_argv(self.root, name, list(self.addresses), self.host_address, port, cpus, memory_mb)
        proc = Proc(argv, self.root / f"spurd-{name}.log", self.env).start()
        self.agents[name] = proc
        return proc

    def wait_nodes(self, *names: str, state: str = "idle", timeout: float = 30) -> None:
        from spur.rpc.proto import spur_pb2 as pb

        def ok() -> bool:
            nodes = {n.name: n.state for n in self.call("GetNodes", pb.GetNodesRequest()).nodes}
            return all(nodes.get(n) == state for n in names)

        wait_for(ok, timeout=timeout, what=f"nodes {names} to be {state}")

    # ------------------------------------------------------------------ gRPC

    def _run(self, fn: Any) -> Any:
        import trio

        return trio.run(fn)

    def call_member(
        self, node_id: int, method: str, request: Any, timeout: float = 10, metadata: dict | None = None
    ) -> Any:
        """One call to controller `node_id` (RpcError on failure)."""
        import trio

        from spur.auth.identity import identity_metadata
        from spur.rpc.channel import open_channel
        from spur.rpc.stub import controller_stub

        md = {**identity_metadata(), **(metadata or {})}

        async def run() -> Any:
            with trio.fail_after(timeout + 1):
                async with open_channel(
                    self.member(node_id).address,
                    connect_timeout=min(timeout, 2.0),
                    metadata_provider=lambda: md,
                    tls=self.tls,
                ) as ch:
                    return await getattr(controller_stub(ch), method)(request, timeout=timeout)

        return self._run(run)

    def raft_call(
        self, node_id: int, method: str, request: Any, timeout: float = 5, metadata: dict | None = None
    ) -> Any:
        """One call of the Raft service (``spur.raft.transport.RAFT_SERVICE``) to controller `node_id`'s
        Raft port, as any process could make it: `metadata` only, no credential of its own (RpcError on
        failure). For hostile-peer tests."""
        import trio

        from spur.raft.transport import RAFT_SERVICE
        from spur.rpc.channel import open_channel
        from spur.rpc.stub import Stub

        m = self.member(node_id)
        md = dict(metadata or {})

        async def run() -> Any:
            with trio.fail_after(timeout + 1):
                async with open_channel(
                    f"{m.host}:{m.raft_port}", connect_timeout=min(timeout, 2.0), metadata_provider=lambda: md
                ) as ch:
                    return await getattr(Stub(ch, RAFT_SERVICE), method)(request, timeout=timeout)

        return self._run(run)

    def restart_all(self) -> int:
        """Stop every controller (SIGTERM), start them again from their state dirs, wait for a leader."""
        for m in self.members:
            if m.alive():
                m.proc.kill(signal.SIGTERM)  # type: ignore[union-attr]
        self.start()
        return self.wait_leader()

    def call(self, method: str, request: Any, timeout: float = 30) -> Any:
        """Call the group like a client with every address: next address on UNAVAILABLE, until `timeout`."""
        import trio

        from spur.rpc.status import RpcError, StatusCode

        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            for m in self.members:
                if not m.alive():
                    continue
                try:
                    return self.call_member(m.node_id, method, request, timeout=5)
                except RpcError as exc:
                    if exc.code not in (StatusCode.UNAVAILABLE, StatusCode.DEADLINE_EXCEEDED):
                        raise
                    last = exc
                except trio.TooSlowError as exc:
                    last = exc
            time.sleep(0.1)
        raise AssertionError(f"no controller answered {method} within {timeout}s: {last!r}")

    def status(self, node_id: int, timeout: float = 1.0) -> Any | None:
        """Controller `node_id`'s own ControllerInfo (role, term, indexes), or None when unreachable."""
        import trio

        from spur.rpc.proto import spur_pb2 as pb
        from spur.rpc.status import RpcError

        if not self.member(node_id).alive():
            return None
        try:
            return self.call_member(node_id, "GetControllerStatus", pb.Empty(), timeout=timeout)
        except (RpcError, trio.TooSlowError, OSError):
            return None

    def statuses(self, node_ids: Sequence[int] | None = None) -> dict[int, Any]:
        ids = node_ids or [m.node_id for m in self.members]
        return {i: s for i in ids if (s := self.status(i)) is not None}

    def wait_leader(self, among: Sequence[int] | None = None, timeout: float = 20) -> int:
        """Wait until exactly one of `among` (default: all) says it leads and the others follow it."""
        ids = list(among or [m.node_id for m in self.members])

        def one() -> int | None:
            st = self.statuses(ids)
            leaders = [i for i, s in st.items() if s.role == "leader"]
            if len(leaders) != 1 or len(st) != len(ids):
                return None
            lead = st[leaders[0]]
            if all(s.term == lead.term and s.leader_address == lead.address for s in st.values()):
                return leaders[0]
            return None

        return wait_for(one, timeout=timeout, interval=0.05, what=f"one leader among {ids}")

    def wait_converged(self, among: Sequence[int] | None = None, timeout: float = 30) -> int:
        """Wait until every member of `among` has applied the same commit index; returns that index."""
        ids = list(among or [m.node_id for m in self.members])

        def same() -> int | None:
            st = self.statuses(ids)
            if len(st) != len(ids):
                return None
            marks = {(s.commit_index, s.applied_index) for s in st.values()}
            if len(marks) == 1 and (mark := marks.pop())[0] == mark[1]:
                return mark[0]
            return None

        return wait_for(same, timeout=timeout, interval=0.1, what=f"members {ids} to converge")

    def wait_caught_up(self, leader: int, among: Sequence[int] | None = None, timeout: float = 30) -> int:
        """Wait until every member of `among` has applied at least the leader's commit index as it is
        now; returns that index. Unlike :meth:`wait_converged` this holds while jobs still run (each
        start and exit commits a new entry, so the members' indexes need never be equal at one instant)."""
        ids = list(among or [m.node_id for m in self.members])
        target = wait_for(
            lambda: (s := self.status(leader)) and s.commit_index,
            timeout=timeout,
            what=f"controller {leader}'s commit index",
        )

        def caught_up() -> bool:
            st = self.statuses(ids)
            return len(st) == len(ids) and all(s.applied_index >= target for s in st.values())

        wait_for(caught_up, timeout=timeout, interval=0.1, what=f"members {ids} to apply index {target}")
        return target

    def local_jobs(self, node_id: int) -> dict[int, Any]:
        """The jobs in controller `node_id`'s own applied state (GetJobs answered locally, no forwarding)."""
        from spur.rpc.proto import spur_pb2 as pb

        resp = self.call_member(
            node_id,
            "GetJobs",
            pb.GetJobsRequest(include_finished=True),
            timeout=10,
            metadata={LOCAL_READ_KEY: "1"},
        )
        return {j.job_id: j for j in resp.jobs}

    # ------------------------------------------------------------------ what the daemons logged

    def leaders_by_term(self) -> dict[int, set[int]]:
        """term -> ids of the controllers that logged taking leadership in it (from every log)."""
        found: dict[int, set[int]] = {}
        for m in self.members:
            text = m.log_path.read_text(errors="replace") if m.log_path.exists() else ""
            for term in re.findall(r"leader for term (\d+)", text):
                found.setdefault(int(term), set()).add(m.node_id)
        return found


# ---------------------------------------------------------------------- client workload under faults


@dataclass
class History:
    """What the clients saw: every submit attempt and completed read, plus sampled controller roles."""

    submits: list[Any] = field(default_factory=list)  # jobqueue_model.Submit
    reads: list[Any] = field(default_factory=list)  # jobqueue_model.Read
    errors: dict[str, int] = field(default_factory=dict)  # why attempts failed, by status / exception
    roles: list[tuple[int, int, str]] = field(default_factory=list)  # (node_id, term, role) samples

    def acked(self) -> list[Any]:
        return [s for s in self.submits if s.job_id is not None]

    def leaders_by_term(self) -> dict[int, set[int]]:
        found: dict[int, set[int]] = {}
        for node_id, term, role in self.roles:
            if role == "leader":
                found.setdefault(term, set()).add(node_id)
        return found


RETRYABLE = ("UNAVAILABLE", "DEADLINE_EXCEEDED")


async def workload(
    addresses: Sequence[str],
    *,
    total: int,
    spec: Any,
    clients: int = 8,
    readers: int = 2,
    milestones: Sequence[tuple[int, Any]] = (),
    attempt_timeout: float = 3.0,
    give_up_after: float = 90.0,
) -> History:
    """Submit `total` jobs from `clients` concurrent gRPC clients while `readers` poll GetJobs.

    `spec(tag)` builds each submission's JobSpec (its name must be the tag). A client tries the address
    that last answered and, on UNAVAILABLE/DEADLINE_EXCEEDED or a transport failure, the next one; such
    an attempt is recorded with an unknown outcome (it may have been applied). `milestones` are
    ``(acked_count, blocking_fn)``: each fn runs in a worker thread once that many submits were
    acknowledged (in order; the clients keep going). Returns after every submission was acknowledged
    and every milestone ran. Raises on any other error status.
    """
    import trio

    from integration.jobqueue_model import Read, Submit
    from spur.auth.identity import identity_metadata
    from spur.rpc.channel import open_channel
    from spur.rpc.proto import spur_pb2 as pb
    from spur.rpc.status import RpcError
    from spur.rpc.stub import controller_stub

    md = identity_metadata()
    history = History()
    queue = list(range(total))
    acked = 0
    acked_changed = trio.Event()
    submits_done = trio.Event()
    preferred = [0]
    deadline = time.monotonic() + give_up_after

    def failed(why: str) -> None:
        history.errors[why] = history.errors.get(why, 0) + 1

    async def attempt(stubs: list[Any], index: int, method: str, request: Any) -> Any:
        with trio.fail_after(attempt_timeout + 1):
            return await getattr(stubs[index], method)(request, timeout=attempt_timeout)

    def classify(exc: BaseException) -> str:
        if isinstance(exc, RpcError):
            name = exc.code.name
            if name not in RETRYABLE:
                raise exc
            return name
        return type(exc).__name__

    async def with_stubs(body: Any) -> None:
        async with contextlib.AsyncExitStack() as stack:
            chans = [
                await stack.enter_async_context(
                    open_channel(a, connect_timeout=1.0, metadata_provider=lambda: md)
                )
                for a in addresses
            ]
            await body([controller_stub(ch) for ch in chans])

    async def submitter(stubs: list[Any]) -> None:
        nonlocal acked, acked_changed
        while queue:
            n = queue.pop()
            tag = f"ha-{n}"
            request = pb.SubmitJobRequest(spec=spec(tag))
            index = preferred[0]
            while True:
                if time.monotonic() > deadline:
                    raise AssertionError(
                        f"submissions still failing after {give_up_after}s: {history.errors}"
                    )
                call = time.monotonic()
                try:
                    resp = await attempt(stubs, index, "SubmitJob", request)
                except (RpcError, trio.TooSlowError, OSError, trio.BrokenResourceError) as exc:
                    failed(classify(exc))
                    history.submits.append(Submit(call=call, tag=tag))
                    index = (index + 1) % len(stubs)
                    await trio.sleep(0.05)
                    continue
                history.submits.append(Submit(call, time.monotonic(), resp.job_id, tag))
                preferred[0] = index
                acked += 1
                acked_changed.set()
                acked_changed = trio.Event()
                break

    async def reader(stubs: list[Any]) -> None:
        index = 0
        request = pb.GetJobsRequest(include_finished=True)
        while not submits_done.is_set():
            call = time.monotonic()
            try:
                resp = await attempt(stubs, index, "GetJobs", request)
            except (RpcError, trio.TooSlowError, OSError, trio.BrokenResourceError) as exc:
                classify(exc)
                index = (index + 1) % len(stubs)
                await trio.sleep(0.05)
                continue
            history.reads.append(Read(call, time.monotonic(), frozenset(j.job_id for j in resp.jobs)))
            await trio.sleep(0.02)

    async def monitor(stubs: list[Any]) -> None:
        while not submits_done.is_set():
            for i, stub in enumerate(stubs, start=1):
                try:
                    with trio.move_on_after(0.5):
                        st = await stub.GetControllerStatus(pb.Empty(), timeout=0.5)
                        history.roles.append((i, st.term, st.role))
                except (RpcError, OSError, trio.BrokenResourceError):
                    pass
            await trio.sleep(0.1)

    async def run_milestones() -> None:
        for count, fn in milestones:
            while acked < count:
                await acked_changed.wait()
            await trio.to_thread.run_sync(fn)

    async with trio.open_nursery() as outer:
        outer.start_soon(with_stubs, monitor)
        for _ in range(readers):
            outer.start_soon(with_stubs, reader)
        async with trio.open_nursery() as inner:
            inner.start_soon(run_milestones)
            for _ in range(clients):
                inner.start_soon(with_stubs, submitter)
        submits_done.set()
    return history


@contextlib.contextmanager
def loop_filesystem(image: Path, mountpoint: Path, size_mb: int = 16) -> Iterator[Path]:
    """A small ext4 filesystem on a loop device mounted at `mountpoint` for the block's duration."""
    with open(image, "wb") as f:
        f.truncate(size_mb * 1024 * 1024)
    subprocess.run([_which("mkfs.ext4") or "mkfs.ext4", "-q", "-F", "-m", "0", str(image)], check=True)
    mountpoint.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-o", "loop", str(image), str(mountpoint)], check=True)
    try:
        yield mountpoint
    finally:
        for _ in range(50):
            if subprocess.run(["umount", str(mountpoint)], capture_output=True).returncode == 0:
                break
            time.sleep(0.1)
        else:
            subprocess.run(["umount", "-l", str(mountpoint)], capture_output=True)


def fill_filesystem(mountpoint: Path, name: str = "filler") -> Path:
    """Write zeros under `mountpoint` until the filesystem is full (ENOSPC); returns the filler file."""
    path = mountpoint / name
    chunk = b"\0" * (1 << 20)
    with open(path, "wb", buffering=0) as f:
        try:
            while True:
                f.write(chunk)
        except OSError:
            pass
        try:
            while True:  # the last partial megabyte, block by block
                f.write(b"\0" * 4096)
        except OSError:
            pass
    return path


__all__ = [
    "FAST_TIMEOUTS",
    "HACluster",
    "LOCAL_READ_KEY",
    "Member",
    "fill_filesystem",
    "free_port",
    "loop_filesystem",
    "loop_mount_available",
    "netns_available",
    "wait_for",
]
