"""Unauthenticated floods against three real controllers in ``[auth] mode = "required"`` (issue 20, item 5).

Attacker: any process that reaches the ports, with no credential. Each test replays one row of the
issue's table and asserts what the attacker and the cluster's users see: the flood is refused from the
request headers (UNAUTHENTICATED / 401), the controller does no work for it (RSS stays put), the leader
keeps its leadership (same member, same term throughout), and authenticated clients keep being served.
"""

from __future__ import annotations

import statistics
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from integration.floods import (
    MIB,
    LeaderWatch,
    closed_by_peer,
    grpc_submit_unauthenticated,
    heavy_json,
    in_threads,
    open_idle_connections,
    reset_peak_rss,
    rest_post_unauthenticated,
    rss_kib,
)
from integration.harness import BIN, wait_for
from integration.test_auth import _kill_jobs, _write_key
from integration.test_auth_ha import _RequiredGroup, _root_token
from spur.rpc.proto import spur_pb2 as pb

# Growth allowed in the leader's (peak) RSS over four refused 60 MiB requests (main's: +362 MiB).
RSS_BOUND_KIB = 24 * 1024
# The pre-auth connection bound of spur.rpc.server.PreAuthLimits (its default).
PREAUTH_MAX = 512


@pytest.fixture
def group(tmp_path: Path) -> Iterator[_RequiredGroup]:
    conf_extra = (
        f'[auth]\nmode = "required"\njwt_key_file = "{_write_key(tmp_path / "jwt.key")}"\n'
        f'broker_socket = "{tmp_path / "auth.sock"}"\n'
    )
    g = _RequiredGroup(tmp_path, size=3, conf_extra=conf_extra)
    try:
        g.start()
        yield g
    finally:
        g.stop()
        _kill_jobs(g)  # type: ignore[arg-type]


def _stable_leader(group: _RequiredGroup) -> tuple[int, int]:
    leader = group.wait_leader()
    return leader, group.status(leader).term


def test_unauthenticated_60mib_grpc_requests_are_refused_without_buffering(group: _RequiredGroup) -> None:
    leader, _ = _stable_leader(group)
    member = group.member(leader)
    # Warm the leader's own paths first so the figure is the flood's alone.
    group.call_member(leader, "GetJobs", pb.GetJobsRequest())
    before, peak_before = rss_kib(member.pid), reset_peak_rss(member.pid)

    codes = in_threads(4, lambda _: grpc_submit_unauthenticated(member.address, 60 * MIB))

    assert codes == ["UNAUTHENTICATED"] * 4
    # The peak is what counts (a freed 60 MiB buffer goes back to the OS at once); and what stays.
    peak = rss_kib(member.pid, "VmHWM") - peak_before
    assert peak < RSS_BOUND_KIB, f"leader peak RSS grew by {peak} KiB over four refused 60 MiB requests"
    grown = rss_kib(member.pid) - before
    assert grown < RSS_BOUND_KIB, f"leader RSS grew by {grown} KiB over four refused 60 MiB requests"
    # Nothing was submitted, and the leader still serves its users.
    assert [
        j for j in group.call_member(leader, "GetJobs", pb.GetJobsRequest()).jobs if j.spec.name == "flood"
    ] == []


def test_rest_flood_of_unauthenticated_8mb_bodies_leaves_the_leader_leading(
    group: _RequiredGroup, tmp_path: Path
) -> None:
    leader, term = _stable_leader(group)
    member = group.member(leader)
    body = heavy_json(8_000_000)
    env = {**group.env, "SLURM_JWT": _root_token()["authorization"].split()[1]}
    results: list = []
    submitted: list[int] = []
    stop_at = time.monotonic() + 8.0

    def flood(_: int) -> None:
        while time.monotonic() < stop_at:
            results.append(rest_post_unauthenticated(member.host, member.rest_port, body))

    def users(_: int) -> None:
        while time.monotonic() < stop_at:
            out = subprocess.run(
                [str(BIN / "sbatch"), "-H", "--parsable", "-D", str(tmp_path), "--wrap", "true"],
                env=env,
                capture_output=True,
                text=True,
                timeout=30,
            )
            assert out.returncode == 0, out.stderr
            job_id = int(out.stdout.strip().split(";")[0])
            listed = subprocess.run(
                [str(BIN / "squeue"), "-h", "-o", "%i", "-j", str(job_id)],
                env=env,
                capture_output=True,
                text=True,
                timeout=30,
            )
            assert listed.returncode == 0, listed.stderr
            assert listed.stdout.split() == [str(job_id)]
            submitted.append(job_id)

    with LeaderWatch(group.statuses, interval=0.1) as watch:
        outcome = in_threads(4, lambda i: flood(i) if i < 3 else users(i))
    for item in outcome:
        if isinstance(item, BaseException):
            raise item

    # Refusals are cheap: each is answered from the headers (main parsed each body first: ~2 per second,
    # each taking the leader's event loop for about a quarter of a second).
    assert len(results) >= 100, f"only {len(results)} refusals in 8 s"
    assert {r.status for r in results} == {401}
    assert statistics.median(r.seconds for r in results) < 0.25
    assert watch.max_gap(leader) < 1.0, f"the leader did not answer for {watch.max_gap(leader):.2f} s"
    assert submitted, "no authenticated submission got through during the flood"
    assert watch.leaders() == {(leader, term)}, watch.leaders()
    assert watch.terms() == {term}


def test_idle_unauthenticated_connections_are_bounded_and_users_still_get_in(group: _RequiredGroup) -> None:
    leader, term = _stable_leader(group)
    member = group.member(leader)
    count = PREAUTH_MAX + 88
    socks = open_idle_connections(member.host, member.port, count)
    try:
        # At most PREAUTH_MAX of them stay open: the oldest are closed to make room.
        wait_for(
            lambda: sum(closed_by_peer(s) for s in socks) >= count - PREAUTH_MAX,
            timeout=20,
            what="the pre-auth connection bound to close the excess",
        )
        # An authenticated client still gets in, at once.
        began = time.monotonic()
        group.call_member(leader, "GetJobs", pb.GetJobsRequest(), timeout=5)
        assert time.monotonic() - began < 5
        # The idle ones are closed after the pre-auth timeout (10 s).
        wait_for(
            lambda: all(closed_by_peer(s) for s in socks),
            timeout=30,
            what="idle pre-auth connections to close",
        )
        assert group.status(leader).term == term
        group.call_member(leader, "GetJobs", pb.GetJobsRequest(), timeout=5)
    finally:
        for s in socks:
            s.close()
