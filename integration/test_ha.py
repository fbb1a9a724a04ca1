"""HA acceptance: 3 (and 5) real spurctld processes in one Raft group, real agents, faults from outside.

Faults: kill -9 of the leader during a stream of 1,000 submissions and its restart on the same state
dir; SIGSTOP of the leader past the election timeout; network isolation of the leader (each controller
in its own network namespace on a veth/bridge; the link is taken down); a follower whose state_dir is a
small loop-mounted ext4 filesystem that is filled up. After each fault the suite checks, by asking every
controller: exactly one leader per term (daemon logs and sampled GetControllerStatus), every acknowledged
submission present exactly once on every controller (each controller's own applied state), job ids
unique and monotonic, no job run twice (each job appends its SLURM_JOB_ID to a shared file), and that
the recorded submit/read history is linearizable on the job-queue model (integration/jobqueue_model.py).
"""

from __future__ import annotations

import math
import random
import time
from collections import Counter
from pathlib import Path

import pytest
import trio

from integration.ha_harness import (
    HACluster,
    History,
    fill_filesystem,
    loop_filesystem,
    loop_mount_available,
    netns_available,
    wait_for,
    workload,
)
from integration.harness import kill_job_processes
from integration.jobqueue_model import Read, Submit, check, check_exhaustive, tag_problems
from spur.rpc.proto import spur_pb2 as pb

pytestmark = pytest.mark.integration

NETNS = netns_available()
ELECTION_MAX_S = 1.0
TERMINAL = {
    "COMPLETED",
    "FAILED",
    "CANCELLED",
    "TIMEOUT",
    "NODE_FAIL",
    "PREEMPTED",
    "OUT_OF_MEMORY",
}  # FAST_TIMEOUTS' election_timeout_max_ms


def _script(marks: Path) -> str:
    return f"#!/bin/sh\necho $SLURM_JOB_ID >> {marks}\n"


@pytest.fixture
def marks(tmp_path: Path) -> Path:
    return tmp_path / "marks"


def _spec(root: Path, marks: Path, run_every: int = 1):
    """Submissions that append their id to `marks` when run; all but every `run_every`-th are held
    (a 2-core machine runs about 10 jobs/s through the whole group, so the 1,000-job stream runs a share)."""

    def make(tag: str) -> pb.JobSpec:
        held = int(tag.rsplit("-", 1)[1]) % run_every != 0
        return pb.JobSpec(
            name=tag, script=_script(marks), work_dir=str(root), stdout_pattern="/dev/null", hold=held
        )

    return make


def _cluster(tmp_path: Path, size: int = 3, agents: int = 2, **kw) -> HACluster:
    c = HACluster(tmp_path, size=size, netns=kw.pop("netns", NETNS), **kw)
    c.start()
    for i in range(1, agents + 1):
        c.start_agent(f"node{i}", cpus=4)
    c.wait_nodes(*(f"node{i}" for i in range(1, agents + 1)))
    return c


@pytest.fixture
def cluster(tmp_path: Path):
    c = _cluster(tmp_path)
    try:
        yield c
    finally:
        c.stop()
        _cleanup_jobs(c)


def _cleanup_jobs(c: HACluster) -> None:
    kill_job_processes(c.root)


# ---------------------------------------------------------------------- the invariants, on every member


def assert_invariants(c: HACluster, history: History | None, marks: Path, *, expect_jobs: int) -> None:
    """Check every invariant of the issue by asking every controller (all must be running)."""
    # Exactly one leader per term: what the daemons logged, and what clients sampled.
    for source, terms in (
        ("logs", c.leaders_by_term()),
        ("samples", history.leaders_by_term() if history else {}),
    ):
        doubled = {t: ids for t, ids in terms.items() if len(ids) > 1}
        assert not doubled, f"two leaders in one term ({source}): {doubled}"
    leader = c.wait_leader()
    # Every member has applied all that the leader had committed once the stream ended (every submit
    # included); jobs may still be starting and ending, so exact equality of indexes is not awaited.
    c.wait_caught_up(leader)
    views = {m.node_id: c.local_jobs(m.node_id) for m in c.members}
    reference = views[leader]
    for node_id, jobs in views.items():
        assert sorted(jobs) == sorted(reference), f"controller {node_id} holds other job ids than the leader"
        assert {i: j.spec.name for i, j in jobs.items()} == {i: j.spec.name for i, j in reference.items()}
    ids = sorted(reference)
    assert len(ids) >= expect_jobs
    if history is not None:
        acked = history.acked()
        assert len(acked) == expect_jobs
        # Every acknowledged submission is present exactly once (duplicates only from unknown outcomes).
        assert not tag_problems(history.submits, [j.spec.name for j in reference.values()])
        lost = {s.job_id for s in acked} - set(ids)
        assert not lost, f"acknowledged submits missing on every controller: {sorted(lost)}"
        verdict = check(history.submits, history.reads, ids)
        assert verdict.ok, verdict.problems
        assert len(history.reads) > 0
    # Ids are unique (dict keys of one listing checked above as the raw list) and dense from 1.
    assert ids == list(range(1, len(ids) + 1)), "job ids skip or repeat"
    # No job ran twice: wait until every job finished, then count the markers.
    seen: list[Counter] = []

    def all_done() -> bool:
        jobs = c.local_jobs(c.wait_leader())
        seen.append(Counter(f"{j.state}/{j.reason}" for j in jobs.values()))
        return all(j.state in TERMINAL or j.reason == "JobHeldUser" for j in jobs.values())

    try:
        wait_for(all_done, timeout=180, interval=0.5, what="every job to complete")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; job states last seen: {seen[-1:]}\n{_stuck_report(c)}") from None
    runs = Counter(int(x) for x in (marks.read_text().split() if marks.exists() else []))
    twice = {i: n for i, n in runs.items() if n > 1}
    assert not twice, f"jobs that ran more than once: {twice}"
    final = c.local_jobs(c.wait_leader())
    completed = {i for i, j in final.items() if j.state == "COMPLETED"}
    held = {i for i, j in final.items() if j.reason == "JobHeldUser"}
    assert not completed - set(runs), f"COMPLETED without having run: {sorted(completed - set(runs))}"
    # Against the final state: a submit whose outcome the client never learned may still commit (and run)
    # after the listing above, as a duplicate that tag_problems allows.
    known = set(final)
    assert not set(runs) - (known - held), f"ran but unknown or held: {sorted(set(runs) - (known - held))}"
    # NODE_FAIL is a legitimate end when the leader lost contact with the node during the fault.
    assert {j.state for i, j in final.items() if i not in held} <= {"COMPLETED", "NODE_FAIL"}


def _stuck_report(c: HACluster) -> str:
    """What the daemons logged about jobs that never reached an end (for a failing run's message)."""
    import re

    jobs = c.local_jobs(c.wait_leader())
    stuck = [i for i, j in jobs.items() if j.state not in TERMINAL and j.reason != "JobHeldUser"]
    lines = []
    for path in sorted(c.root.glob("*.log")):
        for line in path.read_text(errors="replace").splitlines():
            if any(re.search(rf"\bjob {i}\b", line) for i in stuck[:5]):
                lines.append(f"{path.name}: {line}")
    return f"stuck jobs {stuck[:20]}:\n" + "\n".join(lines[-60:])


def _stream(
    c: HACluster, marks: Path, total: int, milestones=(), clients: int = 8, run_every: int = 1
) -> History:
    async def main() -> History:
        return await workload(
            c.addresses,
            total=total,
            spec=_spec(c.root, marks, run_every),
            clients=clients,
            milestones=milestones,
        )

    return trio.run(main)


def _raw_job_ids(c: HACluster, node_id: int) -> list[int]:
    from integration.ha_harness import LOCAL_READ_KEY

    resp = c.call_member(
        node_id, "GetJobs", pb.GetJobsRequest(include_finished=True), metadata={LOCAL_READ_KEY: "1"}
    )
    return [j.job_id for j in resp.jobs]


# ---------------------------------------------------------------------- faults


@pytest.mark.slow
def test_kill_leader_during_1000_submissions_then_restart_it(cluster: HACluster, marks: Path):
    first = cluster.wait_leader()
    state: dict[str, float | int] = {}

    def kill_leader() -> None:
        state["killed_at"] = time.monotonic()
        cluster.kill(first)
        state["new"] = cluster.wait_leader(among=[m.node_id for m in cluster.members if m.node_id != first])
        state["elected_after"] = time.monotonic() - state["killed_at"]

    def restart_it() -> None:
        cluster.start_member(first)

    history = _stream(cluster, marks, 1000, milestones=[(300, kill_leader), (650, restart_it)], run_every=4)
    assert state["new"] != first
    assert state["elected_after"] < 3 * ELECTION_MAX_S + 2  # generous: a loaded 2-core machine
    statuses = cluster.statuses()
    assert statuses[first].role == "follower" and statuses[first].term > 0
    assert_invariants(cluster, history, marks, expect_jobs=1000)
    for m in cluster.members:
        raw = _raw_job_ids(cluster, m.node_id)
        assert len(raw) == len(set(raw)) == len(cluster.local_jobs(first))


def test_sigstop_leader_past_election_timeout(cluster: HACluster, marks: Path):
    first = cluster.wait_leader()
    old_term = cluster.status(first).term
    others = [m.node_id for m in cluster.members if m.node_id != first]
    seen: dict[str, int] = {}

    def pause_leader() -> None:
        cluster.pause(first)
        seen["new"] = cluster.wait_leader(among=others)
        # Stay stopped well past the election timeout while the others go on without it.
        target = cluster.status(seen["new"]).commit_index + 20
        wait_for(lambda: cluster.status(seen["new"]).commit_index >= target, what="progress without it")
        cluster.resume(first)

    history = _stream(cluster, marks, 150, milestones=[(40, pause_leader)])
    assert seen["new"] != first
    cluster.wait_leader()
    status = cluster.status(first)
    assert status.role == "follower" and status.term > old_term  # it stepped down on waking
    assert_invariants(cluster, history, marks, expect_jobs=150)


@pytest.mark.skipif(not NETNS, reason="network namespaces need root and ip netns")
def test_isolate_leader_by_network(cluster: HACluster, marks: Path):
    first = cluster.wait_leader()
    others = [m.node_id for m in cluster.members if m.node_id != first]
    seen: dict[str, int] = {}

    def isolate_leader() -> None:
        cluster.isolate(first)
        seen["new"] = cluster.wait_leader(among=others)

    def heal() -> None:
        cluster.heal(first)

    history = _stream(cluster, marks, 150, milestones=[(40, isolate_leader), (110, heal)])
    assert seen["new"] != first
    assert_invariants(cluster, history, marks, expect_jobs=150)
    assert cluster.status(first).term >= cluster.status(seen["new"]).term


@pytest.mark.skipif(not NETNS, reason="network namespaces need root and ip netns")
def test_isolated_leader_cannot_acknowledge_writes(cluster: HACluster, marks: Path):
    """A leader cut off from the others must not acknowledge a submit (it cannot reach a majority)."""
    from spur.rpc.status import RpcError

    first = cluster.wait_leader()
    cluster.isolate(first)
    with pytest.raises(RpcError) as err:
        # Straight to the old leader's own namespace: only it can be asked while it is cut off.
        _submit_inside_netns(cluster, first, marks)
    assert err.value.code.name in ("UNAVAILABLE", "DEADLINE_EXCEEDED")
    cluster.heal(first)
    assert_invariants(cluster, None, marks, expect_jobs=0)


def _submit_inside_netns(c: HACluster, node_id: int, marks: Path) -> None:
    import subprocess
    import sys

    m = c.member(node_id)
    code = (
        "import trio, sys\n"
        "from spur.rpc.channel import open_channel\n"
        "from spur.rpc.stub import controller_stub\n"
        "from spur.rpc.proto import spur_pb2 as pb\n"
        "from spur.auth.identity import identity_metadata\n"
        "from spur.rpc.status import RpcError\n"
        "async def main():\n"
        f"    async with open_channel({m.address!r}, metadata_provider=identity_metadata) as ch:\n"
        "        try:\n"
        f"            r = await controller_stub(ch).SubmitJob(pb.SubmitJobRequest(spec=pb.JobSpec("
        f"name='x', script='#!/bin/sh\\n', work_dir={str(c.root)!r})), timeout=4)\n"
        "            print('OK', r.job_id)\n"
        "        except RpcError as e:\n"
        "            print('ERR', e.code.name)\n"
        "trio.run(main)\n"
    )
    out = subprocess.run(
        ["ip", "netns", "exec", m.netns, sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=Path(__file__).parent.parent,
    )
    words = out.stdout.split()
    assert words, out.stderr
    if words[0] == "ERR":
        from spur.rpc.status import RpcError, StatusCode

        raise RpcError(StatusCode[words[1]], "from inside the namespace")


@pytest.mark.skipif(not loop_mount_available(), reason="loop devices need root, losetup and mkfs.ext4")
def test_follower_disk_full(tmp_path: Path, marks: Path):
    mount = tmp_path / "fullfs"
    with loop_filesystem(tmp_path / "fs.img", mount, size_mb=16):
        c = HACluster(tmp_path, size=3, netns=NETNS, state_dirs={3: mount / "ctl3"})
        c.start()
        try:
            c.start_agent("node1", cpus=4)
            c.wait_nodes("node1")
            leader = c.wait_leader()
            if leader == 3:  # the full disk must be a follower's: move leadership by restarting it
                c.kill(3)
                leader = c.wait_leader(among=[1, 2])
                c.start_member(3)
            filler = fill_filesystem(mount)
            history = _stream(c, marks, 150)
            lagging = c.status(3)
            assert lagging is None or lagging.applied_index < c.status(leader).applied_index
            filler.unlink()
            if not c.member(3).alive():  # a follower that gave up on its disk is restarted by its operator
                c.start_member(3)
            assert_invariants(c, history, marks, expect_jobs=150)
        finally:
            c.stop()
            _cleanup_jobs(c)


@pytest.mark.slow
def test_five_controllers_survive_two_failures(tmp_path: Path, marks: Path):
    c = _cluster(tmp_path, size=5, agents=1)
    try:
        first = c.wait_leader()
        victims = [first, next(m.node_id for m in c.members if m.node_id != first)]

        def kill_two() -> None:
            for v in victims:
                c.kill(v)
            c.wait_leader(among=[m.node_id for m in c.members if m.node_id not in victims])

        def restart_them() -> None:
            for v in victims:
                c.start_member(v)

        history = _stream(c, marks, 300, milestones=[(80, kill_two), (200, restart_them)])
        assert_invariants(c, history, marks, expect_jobs=300)
    finally:
        c.stop()
        _cleanup_jobs(c)


# ---------------------------------------------------------------------- the checker itself (no processes)


def test_checker_accepts_a_sequential_history():
    subs = [Submit(0, 1, 1, "a"), Submit(2, 3, 2, "b")]
    reads = [Read(1.5, 1.8, frozenset({1})), Read(3.5, 4, frozenset({1, 2})), Read(-1, -0.5, frozenset())]
    assert check(subs, reads, [1, 2]).ok


def test_checker_rejects_a_stale_read():
    subs = [Submit(0, 1, 1, "a")]
    verdict = check(subs, [Read(2, 3, frozenset())], [1])
    assert not verdict.ok and "submit [0.000, 1.000] returned job 1" in verdict.problems[0]


def test_checker_rejects_a_read_showing_a_job_before_its_submit_was_called():
    subs = [Submit(5, 6, 1, "a")]
    assert not check(subs, [Read(1, 2, frozenset({1}))], [1]).ok


def test_checker_rejects_ids_out_of_real_time_order():
    subs = [Submit(0, 1, 2, "a"), Submit(2, 3, 1, "b")]
    assert not check(subs, [], [1, 2]).ok


def test_checker_rejects_lost_acknowledged_submit_and_accounts_for_unknown_ones():
    assert not check([Submit(0, 1, 1, "a")], [], []).ok
    unknown = Submit(0, tag="a")
    assert check([unknown, Submit(1, 2, 2, "a")], [], [1, 2]).unknown_applied == 1
    assert check([unknown, Submit(1, 2, 1, "a")], [], [1]).ok  # the lost try never took effect
    assert not check([Submit(1, 2, 2, "a")], [], [1, 2]).ok  # job 1 came from nowhere
    assert tag_problems([unknown, Submit(1, 2, 2, "a")], ["a", "a"]) == []
    assert tag_problems([Submit(1, 2, 2, "a")], ["a", "a"]) != []


def test_checker_agrees_with_exhaustive_search_on_random_histories():
    rng = random.Random(7)
    disagreements = 0
    for _ in range(400):
        subs, reads, final = _random_history(rng)
        fast = check(subs, reads, final).ok
        assert fast == check_exhaustive(subs, reads, final), (subs, reads, final)
        disagreements += not fast
    assert 0 < disagreements < 400  # both verdicts were exercised


def _random_history(rng: random.Random) -> tuple[list[Submit], list[Read], list[int]]:
    """A correct execution on a simulated queue, then sometimes one perturbation."""
    subs: list[Submit] = []
    reads: list[Read] = []
    created: list[tuple[float, int]] = []
    t = 0.0
    next_id = 1
    for _ in range(rng.randint(1, 6)):
        call = t + rng.random()
        point = call + rng.random()
        ret = point + rng.random()
        t = call
        if rng.random() < 0.6:
            created.append((point, next_id))
            if rng.random() < 0.2:
                subs.append(Submit(call, tag="x"))
            else:
                subs.append(Submit(call, ret, next_id, "x"))
            next_id += 1
        else:
            if rng.random() < 0.2:
                subs.append(Submit(call, tag="x"))  # lost and never applied
            else:
                seen = frozenset(i for p, i in created if p < point)
                reads.append(Read(call, ret, seen))
        # points must be increasing for the simulated order to be the creation order
        t = max(t, point)
    final = [i for _, i in created]
    if rng.random() < 0.5 and reads:
        r = rng.randrange(len(reads))
        old = reads[r]
        ids = set(old.ids)
        if ids and rng.random() < 0.5:
            ids.discard(max(ids))
        else:
            ids.add(len(ids) + 1)
        reads[r] = Read(old.call, old.ret, frozenset(ids))
    if rng.random() < 0.2 and len(subs) > 1:
        a, b = rng.sample(range(len(subs)), 2)
        if subs[a].job_id is not None and subs[b].job_id is not None:
            sa, sb = subs[a], subs[b]
            subs[a] = Submit(sa.call, sa.ret, sb.job_id, "x")
            subs[b] = Submit(sb.call, sb.ret, sa.job_id, "x")
    assert all(not math.isnan(s.call) for s in subs)
    return subs, reads, final
