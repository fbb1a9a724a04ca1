"""Hostile peers on the Raft port: three real controllers in ``[auth] mode = "required"`` with a key, and
an attacker that speaks the Raft gRPC service (issue 20, the Raft rows of the attack table).

Each test sends one attack, asserts it is refused with the right status, that the cluster keeps serving
(sbatch and squeue through the CLI), that leader and term did not move where that applies, that no job is
forged (the attacker's jobs are named "evil", for uid 0), and that after restarting all three controllers the state is what it was.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from integration.ha_harness import HACluster
from integration.harness import BIN, Proc, free_port, spurd_argv, wait_for
from integration.test_auth import KEY, _write_key
from spur.auth.tokens import AUD_RAFT, mint
from spur.core.jobspec import JobSpec
from spur.raft import codec
from spur.rpc.proto import raft_pb2 as rpb
from spur.rpc.proto import spur_pb2 as pb
from spur.rpc.status import RpcError, StatusCode
from spur.state import commands as c

USER, UID = "nobody", 65534


def _user_token() -> str:
    return mint(KEY, USER, UID, now=time.time(), ttl_secs=3600)


def _raft_token(member: int) -> dict[str, str]:
    """A Raft credential for `member`, as a buggy (or compromised) controller would hold."""
    token = mint(KEY, "spurctld", 0, now=time.time(), ttl_secs=300, audience=AUD_RAFT, member=member)
    return {"authorization": f"Bearer {token}"}


class _Group(HACluster):
    def call_member(
        self, node_id: int, method: str, request: Any, timeout: float = 10, metadata: dict | None = None
    ) -> Any:
        root = {"authorization": f"Bearer {mint(KEY, 'root', 0, now=time.time(), ttl_secs=600)}"}
        return super().call_member(node_id, method, request, timeout, {**root, **(metadata or {})})

    def start_agent(self, name: str, cpus: int = 2, memory_mb: int = 4000) -> Proc:
        """An agent that reads the [auth] config (its daemon credential) from member 1's file."""
        port = self.agent_ports.setdefault(name, free_port())
        extra = ["-f", str(self.members[0].conf)]
        argv = spurd_argv(
            self.root, name, list(self.addresses), self.host_address, port, cpus, memory_mb, extra
        )
        proc = Proc(argv, self.root / f"spurd-{name}.log", self.env).start()
        self.agents[name] = proc
        return proc


@pytest.fixture
def group(tmp_path: Path) -> Iterator[_Group]:
    conf_extra = f'[auth]\nmode = "required"\njwt_key_file = "{_write_key(tmp_path / "jwt.key")}"\n'
    # Elections slower than the harness default, so that a loaded test machine does not change leader or
    # term on its own while the tests assert that an attack did not.
    timeouts = {"election_timeout_min_ms": 1500, "election_timeout_max_ms": 3000, "heartbeat_ms": 150}
    g = _Group(tmp_path, size=3, conf_extra=conf_extra, timeouts=timeouts)
    try:
        g.start()
        yield g
    finally:
        g.stop()
        for job_dir in tmp_path.glob("agent-*/jobs/*"):  # what an agent left running
            for name in ("pgid", "pid"):
                with contextlib.suppress(OSError, ValueError):
                    os.killpg(int((job_dir / name).read_text().split()[0]), signal.SIGKILL)


def _cli(group: _Group, tmp_path: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    # The test runs as root (the CLI sends its process identity), so it presents root's token; the
    # attacks below forge jobs named "evil" for uid 0, which must never appear.
    token = mint(KEY, "root", 0, now=time.time(), ttl_secs=600)
    env = {**group.env, "SLURM_JWT": token, "SPUR_AUTH_SOCKET": str(tmp_path / "no-broker.sock")}
    return subprocess.run(
        [str(BIN / argv[0]), *argv[1:]], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )


def _submit(group: _Group, tmp_path: Path) -> int:
    out = _cli(group, tmp_path, "sbatch", "--parsable", "-o", "/dev/null", "--wrap", "true")
    assert out.returncode == 0, out.stderr
    return int(out.stdout.strip().split(";")[0])


def _squeue_ids(group: _Group, tmp_path: Path) -> set[int]:
    # every state: a `--wrap true` job may already have completed when squeue runs
    out = _cli(group, tmp_path, "squeue", "-h", "-t", "all", "-o", "%i")
    assert out.returncode == 0, out.stderr
    return {int(x) for x in out.stdout.split()}


def _jobs(group: _Group) -> dict[int, Any]:
    resp = group.call("GetJobs", pb.GetJobsRequest(include_finished=True))
    return {j.job_id: j for j in resp.jobs}


def _snapshot(group: _Group) -> tuple[int, int]:
    """(leader id, term) once the group has one leader."""
    leader = group.wait_leader()
    status = group.status(leader)
    assert status is not None
    return leader, status.term


def _assert_serving_and_intact(group: _Group, tmp_path: Path, before: set[int], leader_term: Any) -> None:
    """The cluster still serves, leader/term unchanged (when given), no forged job; then a restart of all
    three keeps every job and comes back without a crash loop."""
    if leader_term is not None:
        assert _snapshot(group) == leader_term, "the attack moved the leader or the term"
    new = _submit(group, tmp_path)
    assert before | {new} <= _squeue_ids(group, tmp_path) | before
    jobs = _jobs(group)
    assert set(jobs) == before | {new}, f"jobs changed: {sorted(jobs)} vs {sorted(before | {new})}"
    assert not [j for j in jobs.values() if j.spec.name == "evil"], "a forged job is recorded"
    group.restart_all()
    wait_for(lambda: set(_jobs(group)) == before | {new}, timeout=30, what="the jobs after a restart")
    for m in group.members:
        assert m.alive(), f"spurctld {m.node_id} did not come back:\n{m.proc.log() if m.proc else ''}"
    group.wait_caught_up(group.wait_leader())


def _forged_submit(group: _Group, leader: int, term: int) -> rpb.AppendEntriesRequest:
    """The next log entry, as the leader would send it, carrying a SubmitJob for uid 0 that would write
    ``forged-ran`` in the group's directory."""
    status = group.status(leader)
    assert status is not None
    script = f"#!/bin/sh\nid -u > {group.root / 'forged-ran'}\n"
    spec = JobSpec(script=script, name="evil", work_dir=str(group.root), stdout_pattern="/dev/null")
    data = c.encode(c.SubmitJob(spec=spec, user="root", uid=0, gid=0, group="root", submit_time=time.time()))
    index = status.commit_index + 1
    return rpb.AppendEntriesRequest(
        term=term,
        leader_id=leader,
        prev_log_index=status.commit_index,
        prev_log_term=term,
        entries=[rpb.Entry(index=index, term=term, data=data)],
        leader_commit=index,
    )


def _follower(group: _Group, leader: int) -> int:
    return next(m.node_id for m in group.members if m.node_id != leader)


def test_forged_append_entries_with_a_root_job_is_refused(group: _Group, tmp_path: Path) -> None:
    group.start_agent("n1")
    group.wait_nodes("n1")
    before = {_submit(group, tmp_path)}
    leader, term = _snapshot(group)
    request = _forged_submit(group, leader, term)
    for member in (m.node_id for m in group.members):
        with pytest.raises(RpcError) as refused:
            group.raft_call(member, "AppendEntries", request)
        assert refused.value.code is StatusCode.UNAUTHENTICATED, refused.value
    # The scheduler runs jobs (a job submitted after the attack completes), and the forged one never ran.
    later = _submit(group, tmp_path)
    wait_for(
        lambda: _jobs(group)[later].state == "COMPLETED", timeout=30, what="a job to run after the attack"
    )
    assert not (group.root / "forged-ran").exists()
    before.add(later)
    _assert_serving_and_intact(group, tmp_path, before, (leader, term))


def test_a_user_token_on_the_raft_port_is_refused(group: _Group, tmp_path: Path) -> None:
    before = {_submit(group, tmp_path)}
    leader, term = _snapshot(group)
    request = _forged_submit(group, leader, term)
    admin = mint(KEY, "root", 0, now=time.time(), ttl_secs=600, admin=True)
    for token in (_user_token(), admin):
        with pytest.raises(RpcError) as refused:
            group.raft_call(
                _follower(group, leader),
                "AppendEntries",
                request,
                metadata={"authorization": f"Bearer {token}"},
            )
        assert refused.value.code is StatusCode.PERMISSION_DENIED, refused.value
        assert "audience" in refused.value.message
    _assert_serving_and_intact(group, tmp_path, before, (leader, term))


def test_forged_install_snapshot_is_refused(group: _Group, tmp_path: Path) -> None:
    before = {_submit(group, tmp_path), _submit(group, tmp_path)}
    leader, term = _snapshot(group)
    from spur.state.machine import ClusterState

    empty = ClusterState().snapshot()  # every job gone, ids restart at 1
    request = rpb.InstallSnapshotRequest(
        term=term, leader_id=leader, last_index=10**6, last_term=term, offset=0, data=empty, done=True
    )
    for member in (m.node_id for m in group.members):
        with pytest.raises(RpcError) as refused:
            group.raft_call(member, "InstallSnapshot", request)
        assert refused.value.code is StatusCode.UNAUTHENTICATED
    _assert_serving_and_intact(group, tmp_path, before, (leader, term))


def test_garbage_snapshot_is_refused_even_from_a_member(group: _Group, tmp_path: Path) -> None:
    """16 garbage bytes as a snapshot: refused without a credential, and with a member's credential (a
    buggy leader) refused at decode time, before anything is stored."""
    before = {_submit(group, tmp_path)}
    leader, term = _snapshot(group)
    follower = _follower(group, leader)
    request = rpb.InstallSnapshotRequest(
        term=term,
        leader_id=leader,
        last_index=10**6,
        last_term=term,
        offset=0,
        data=os.urandom(16),
        done=True,
    )
    with pytest.raises(RpcError) as refused:
        group.raft_call(follower, "InstallSnapshot", request)
    assert refused.value.code is StatusCode.UNAUTHENTICATED
    with pytest.raises(RpcError) as refused:
        group.raft_call(follower, "InstallSnapshot", request, metadata=_raft_token(leader))
    assert refused.value.code is StatusCode.INVALID_ARGUMENT, refused.value
    assert "does not decode" in refused.value.message
    assert not (group.member(follower).state_dir / "raft" / "snapshot").exists()
    assert "refused the snapshot at index 1000000" in group.member(follower).log_path.read_text()
    _assert_serving_and_intact(group, tmp_path, before, (leader, term))


def test_garbage_snapshot_file_at_start_is_reported_and_refilled(group: _Group, tmp_path: Path) -> None:
    """A snapshot file whose data does not decode (16 garbage bytes, valid header): one log line naming
    the file, the member comes back empty and the leader refills it; no crash loop."""
    before = {_submit(group, tmp_path), _submit(group, tmp_path)}
    leader, term = _snapshot(group)
    victim = _follower(group, leader)
    group.wait_caught_up(group.wait_leader())
    m = group.member(victim)
    m.proc.kill()  # type: ignore[union-attr]
    garbage = os.urandom(16)
    path = m.state_dir / "raft" / "snapshot"
    path.write_bytes(codec.encode_snapshot_header(3, 1, garbage) + garbage)
    group.start_member(victim)
    log = m.log_path.read_text()
    assert f"snapshot {path} (index 3) does not decode" in log
    assert (m.state_dir / "raft" / "snapshot.corrupt").exists()
    wait_for(
        lambda: set(group.local_jobs(victim)) == before, timeout=30, what="the leader to refill the member"
    )
    _assert_serving_and_intact(group, tmp_path, before, None)


def test_term_out_of_range_is_refused_and_never_persisted(group: _Group, tmp_path: Path) -> None:
    before = {_submit(group, tmp_path)}
    leader, term = _snapshot(group)
    follower = _follower(group, leader)
    huge = 2**64 - 1
    heartbeat = rpb.AppendEntriesRequest(term=huge, leader_id=leader)
    vote = rpb.RequestVoteRequest(term=huge, candidate_id=leader, last_log_index=huge, last_log_term=huge)
    for metadata, code in (
        ({}, StatusCode.UNAUTHENTICATED),
        (_raft_token(leader), StatusCode.INVALID_ARGUMENT),
    ):
        for method, request in (("AppendEntries", heartbeat), ("RequestVote", vote)):
            with pytest.raises(RpcError) as refused:
                group.raft_call(follower, method, request, metadata=metadata)
            assert refused.value.code is code, (method, refused.value)
    assert all(s.term == term for s in group.statuses().values())
    _assert_serving_and_intact(group, tmp_path, before, (leader, term))
    assert all(s.term < 2**53 for s in group.statuses().values())


def test_heartbeats_from_a_made_up_leader_are_refused(group: _Group, tmp_path: Path) -> None:
    before = {_submit(group, tmp_path)}
    leader, term = _snapshot(group)
    follower = _follower(group, leader)
    everyone = [m.node_id for m in group.members]
    attempts = [
        (rpb.AppendEntriesRequest(term=term + 1, leader_id=7), {}, everyone, StatusCode.UNAUTHENTICATED),
        (
            rpb.AppendEntriesRequest(term=term + 1, leader_id=7),
            _raft_token(7),
            everyone,
            StatusCode.PERMISSION_DENIED,
        ),
        # A member's credential naming another member as leader.
        (
            rpb.AppendEntriesRequest(term=term + 1, leader_id=leader),
            _raft_token(follower),
            everyone,
            StatusCode.PERMISSION_DENIED,
        ),
        # A member's credential presented to that member itself.
        (
            rpb.AppendEntriesRequest(term=term + 1, leader_id=follower),
            _raft_token(follower),
            [follower],
            StatusCode.PERMISSION_DENIED,
        ),
    ]
    deadline = time.monotonic() + 4.0  # keep it up for longer than an election timeout
    while time.monotonic() < deadline:
        for request, metadata, targets, code in attempts:
            for member in targets:
                with pytest.raises(RpcError) as refused:
                    group.raft_call(member, "AppendEntries", request, metadata=metadata)
                assert refused.value.code is code, (request, refused.value)
        assert group.status(leader).role == "leader"  # type: ignore[union-attr]
    _assert_serving_and_intact(group, tmp_path, before, (leader, term))


def test_damaged_wal_at_start_is_cut_back_and_refilled(group: _Group, tmp_path: Path) -> None:
    """A flipped byte in the middle of a member's WAL: one line naming the file and offset, the log is
    cut back to the records before it, and the leader refills the rest."""
    before = {_submit(group, tmp_path) for _ in range(3)}
    leader = group.wait_leader()
    victim = _follower(group, leader)
    group.wait_caught_up(leader)
    m = group.member(victim)
    m.proc.kill()  # type: ignore[union-attr]
    (segment,) = sorted((m.state_dir / "raft").glob("wal-*.log"))
    raw = bytearray(segment.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    segment.write_bytes(bytes(raw))
    group.start_member(victim)
    log = m.log_path.read_text()
    assert f"corrupt Raft storage: {segment} at offset" in log and "cut back to" in log
    wait_for(
        lambda: set(group.local_jobs(victim)) == before, timeout=30, what="the leader to refill the member"
    )
    _assert_serving_and_intact(group, tmp_path, before, None)


def test_damaged_hardstate_stops_the_start_with_one_line(tmp_path: Path) -> None:
    """The term and vote cannot be guessed: spurctld says which file is damaged and exits (no traceback)."""
    from integration.harness import free_port

    raft = tmp_path / "state" / "raft"
    raft.mkdir(parents=True)
    (raft / "hardstate").write_bytes(b"\x00" * 16)
    conf = tmp_path / "spur.conf"
    conf.write_text(
        f'[controller]\nstate_dir = "{tmp_path / "state"}"\nrest_addr = "127.0.0.1:{free_port()}"\n'
        f'metrics_addr = "127.0.0.1:0"\n[auth]\nbroker_socket = "{tmp_path / "auth.sock"}"\n'
    )
    proc = subprocess.run(
        [str(BIN / "spurctld"), "-f", str(conf), "--listen", f"127.0.0.1:{free_port()}"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("spurctld: error: corrupt Raft storage:") and f"{raft / 'hardstate'}" in last
    assert "Traceback" not in proc.stderr
