"""What refusing unauthenticated floods costs a 3-controller group in ``[auth] mode = "required"``.

Run: ``.venv/bin/python -m bench.unauth_flood [--seconds 10] [--grpc-rounds 3] [--main /work/main/.venv/bin]``.
Starts three real spurctld (the daemons' default Raft timing: election 1000-2000 ms, heartbeat 200 ms)
and floods the leader with no credential:

- gRPC: ``--grpc-rounds`` rounds of four concurrent SubmitJob requests of 60 MiB (a stock channel);
- REST: ``--rest-clients`` clients posting 8 MB submit bodies (valid JSON, many small elements) in a
  loop for ``--seconds``, each streaming its body while it waits for the answer.

For each: refusals/s (bound by the clients on this side for gRPC: each builds a 60 MiB message), the
leader's CPU per refusal (less its own idle rate, measured for 3 s just before), its RSS before, after and at its peak during the flood (VmHWM, reset first: a freed 60 MiB
buffer goes back to the OS at once), and, while the REST flood
runs, the longest time the leader went without answering a status poll (every 50 ms; a stalled event loop
sends no heartbeats either), how many terms and leaders were seen. With ``--main BIN`` the same is run
against the spurctld in BIN (main's virtualenv) in the same invocation. Prints a table and writes
``bench/results/unauth_flood.csv``. Not a pass/fail test (integration/test_hostile_floods.py asserts).
"""

from __future__ import annotations

import argparse
import csv
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import print_table
from integration import ha_harness
from integration.floods import (
    MIB,
    LeaderWatch,
    cpu_secs,
    grpc_submit_unauthenticated,
    heavy_json,
    in_threads,
    reset_peak_rss,
    rest_post_unauthenticated,
    rss_kib,
)
from spur.rpc.proto import spur_pb2 as pb

DEFAULT_TIMEOUTS = {"election_timeout_min_ms": 1000, "election_timeout_max_ms": 2000, "heartbeat_ms": 200}
KEY = b"bench-unauth-flood-cluster-key-0123456789"
RESULTS = Path(__file__).parent / "results" / "unauth_flood.csv"


def _group(root: Path) -> ha_harness.HACluster:
    key = root / "jwt.key"
    key.write_bytes(KEY)
    key.chmod(0o600)
    conf = f'[auth]\nmode = "required"\njwt_key_file = "{key}"\nbroker_socket = "{root / "auth.sock"}"\n'

    class Group(ha_harness.HACluster):
        def call_member(self, node_id: int, method: str, request: Any, timeout: float = 10, metadata=None):
            from spur.auth.tokens import mint

            token = mint(KEY, "root", 0, now=time.time(), ttl_secs=3600)
            md = {"authorization": f"Bearer {token}", **(metadata or {})}
            return super().call_member(node_id, method, request, timeout, md)

    return Group(root, size=3, timeouts=dict(DEFAULT_TIMEOUTS), conf_extra=conf)


def _idle_cpu_rate(pid: int, seconds: float = 3.0) -> float:
    """The leader's own CPU use (s/s) with no flood: heartbeats, scheduler passes."""
    cpu0, began = cpu_secs(pid), time.monotonic()
    time.sleep(seconds)
    return (cpu_secs(pid) - cpu0) / (time.monotonic() - began)


def _grpc_phase(group: ha_harness.HACluster, leader: int, rounds: int) -> dict[str, Any]:
    member = group.member(leader)
    idle = _idle_cpu_rate(member.pid)
    rss0, cpu0, began = rss_kib(member.pid), cpu_secs(member.pid), time.monotonic()
    reset_peak_rss(member.pid)
    codes: list[str] = []
    for _ in range(rounds):
        codes += [
            str(c) for c in in_threads(4, lambda _: grpc_submit_unauthenticated(member.address, 60 * MIB))
        ]
    wall = time.monotonic() - began
    refused = sum(c in ("UNAUTHENTICATED", "PERMISSION_DENIED") for c in codes)
    cpu = max(0.0, cpu_secs(member.pid) - cpu0 - idle * wall)
    return {
        "flood": "gRPC 4 x 60 MiB",
        "requests": len(codes),
        "refused": refused,
        "answers": ",".join(sorted(set(codes))),
        "refusals_per_s": refused / wall if wall else 0.0,
        "cpu_ms_per_refusal": 1000 * cpu / max(1, refused),
        "rss_before_mib": rss0 / 1024,
        "rss_after_mib": rss_kib(member.pid) / 1024,
        "rss_peak_mib": rss_kib(member.pid, "VmHWM") / 1024,
    }


def _rest_phase(group: ha_harness.HACluster, leader: int, seconds: float, clients: int) -> dict[str, Any]:
    member = group.member(leader)
    body = heavy_json(8_000_000)
    term0 = group.status(leader).term
    results: list[Any] = []
    stop_at = time.monotonic() + seconds

    def flood(_: int) -> None:
        while time.monotonic() < stop_at:
            results.append(rest_post_unauthenticated(member.host, member.rest_port, body, timeout=60))

    idle = _idle_cpu_rate(member.pid)
    rss0, cpu0, began = rss_kib(member.pid), cpu_secs(member.pid), time.monotonic()
    reset_peak_rss(member.pid)
    with LeaderWatch(group.statuses, interval=0.05) as watch:
        in_threads(clients, flood)
    wall = time.monotonic() - began
    cpu = max(0.0, cpu_secs(member.pid) - cpu0 - idle * wall)
    refused = sum(r.status == 401 for r in results)
    return {
        "flood": f"REST {clients} clients x 8 MB",
        "requests": len(results),
        "refused": refused,
        "answers": ",".join(sorted({str(r.status) for r in results})),
        "refusals_per_s": refused / wall if wall else 0.0,
        "cpu_ms_per_refusal": 1000 * cpu / max(1, refused),
        "rss_before_mib": rss0 / 1024,
        "rss_after_mib": rss_kib(member.pid) / 1024,
        "rss_peak_mib": rss_kib(member.pid, "VmHWM") / 1024,
        "leader_max_gap_s": watch.max_gap(leader),
        "terms_seen": len(watch.terms() | {term0}),
        "leaders_seen": len({i for i, _ in watch.leaders()} | {leader}),
    }


def run_tree(name: str, bin_dir: Path | None, args: argparse.Namespace) -> list[dict[str, Any]]:
    if bin_dir is not None:
        ha_harness.BIN = bin_dir  # the spurctld to measure; the clients are this checkout's
    with tempfile.TemporaryDirectory(prefix="spur-unauth-flood-") as tmp:
        group = _group(Path(tmp))
        group.start()
        try:
            leader = group.wait_leader()
            group.call_member(leader, "GetJobs", pb.GetJobsRequest())  # warm
            rows = [_grpc_phase(group, leader, args.grpc_rounds)]
            leader = group.wait_leader(timeout=30)
            rows.append(_rest_phase(group, leader, args.seconds, args.rest_clients))
        finally:
            group.stop()
    for row in rows:
        row["tree"] = name
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="REST flood duration")
    parser.add_argument("--rest-clients", type=int, default=3)
    parser.add_argument("--grpc-rounds", type=int, default=3)
    parser.add_argument("--main", type=Path, default=None, help="bin dir of main's virtualenv to compare")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()

    own_bin = ha_harness.BIN
    rows = run_tree("this branch", own_bin, args)
    if args.main is not None:
        rows += run_tree("main", args.main, args)
    columns = [
        "tree",
        "flood",
        "requests",
        "refused",
        "answers",
        "refusals_per_s",
        "cpu_ms_per_refusal",
        "rss_before_mib",
        "rss_after_mib",
        "rss_peak_mib",
        "leader_max_gap_s",
        "terms_seen",
        "leaders_seen",
    ]
    table = [[_fmt(row.get(c, "")) for c in columns] for row in rows]
    print_table(columns, table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns)
        writer.writeheader()
        for row in rows:
            writer.writerow({c: _fmt(row.get(c, "")) for c in columns})
    print(f"wrote {args.out}")


def _fmt(value: Any) -> str:
    return f"{value:.2f}" if isinstance(value, float) else str(value)


if __name__ == "__main__":
    main()
