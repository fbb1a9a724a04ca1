"""kill -9 durability: every proposal a RaftNode acknowledged survives a SIGKILL at a random moment."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from spur.raft import RaftStorage

REPO = Path(__file__).resolve().parents[1]

# The child proposes from several concurrent tasks (so group commit and snapshots happen while it is
# killed) and prints "ack <index> <data>" after each proposal returns.
CHILD = r"""
import json, sys
import trio
from spur.raft import RaftNode, RaftStorage

class Log:
    def __init__(self):
        self.items = []
    def apply(self, index, data, proposed=None):
        self.items.append(data.decode())
        return index
    def snapshot(self):
        return json.dumps(self.items).encode()
    def restore(self, data):
        self.items = json.loads(data)
    def decode_snapshot(self, data):
        return json.loads(data)
    def adopt(self, decoded):
        self.items = decoded
    def check_command(self, data):
        pass

async def main(path, workers, fork):
    node = RaftNode(
        node_id=1, storage=RaftStorage(path), state_machine=Log(), snapshot_every=40, fork_snapshots=fork
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(node.run)
        print(f"start {node.applied_index} {node.term}", flush=True)

        async def worker(w):
            for n in range(1, 10**9):
                data = f"t{node.term}-w{w}-{n}"
                index = await node.propose(data.encode())
                print(f"ack {index} {data}", flush=True)

        for w in range(workers):
            nursery.start_soon(worker, w)

trio.run(main, sys.argv[1], int(sys.argv[2]), sys.argv[3] == "fork")
"""


def stored_items(path: Path) -> list[str]:
    """What a restarted node would have applied: the snapshot's items plus the log after it."""
    storage = RaftStorage(path)
    try:
        _, snapshot, entries = storage.load()
    finally:
        storage.close()
    items: list[str] = json.loads(snapshot.data) if snapshot else []
    assert len(items) == (snapshot.last_index if snapshot else 0)
    for entry in entries:
        assert entry.index == len(items) + 1
        items.append(entry.data.decode())
    return items


def run_and_kill(path: Path, acks_before_kill: int, fork: bool = False) -> tuple[int, int, dict[int, str]]:
    """Start the child, SIGKILL it after `acks_before_kill` acks; return (applied at start, term, acks)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(path), "4", "fork" if fork else "inline"],
        stdout=subprocess.PIPE,
        env=env,
        text=True,
        bufsize=1,
    )
    watchdog = threading.Timer(30, child.kill)  # never hang the test suite on a stuck child
    watchdog.start()
    try:
        assert child.stdout is not None
        start = child.stdout.readline().split()
        assert start and start[0] == "start", f"child did not start: {start}"
        acks: dict[int, str] = {}
        for line in child.stdout:
            _, index, data = line.split()
            acks[int(index)] = data
            if len(acks) >= acks_before_kill:
                child.send_signal(signal.SIGKILL)
                break
        # Acks printed before the kill are still in the pipe: they were acknowledged, so they count.
        for line in child.stdout:
            parts = line.split()
            if len(parts) == 3:
                acks[int(parts[1])] = parts[2]
        child.wait(10)
        assert child.returncode == -signal.SIGKILL, f"child exited with {child.returncode}"
    finally:
        watchdog.cancel()
        child.kill()
        child.wait()
    return int(start[1]), int(start[2]), acks


@pytest.mark.parametrize("fork", [False, True], ids=["inline-snapshots", "forked-snapshots"])
def test_acknowledged_entries_survive_sigkill(tmp_path: Path, fork: bool) -> None:
    """Also with snapshots serialized by a forked child (spur.raft.forked), as the controller takes
    them: a snapshot holds exactly the entries up to its index, whatever was applied meanwhile."""
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    all_acks: dict[int, str] = {}
    for round_ in range(1, 5):
        applied_at_start, term, acks = run_and_kill(tmp_path, rng.randint(1, 300), fork)
        context = f"seed {seed}, round {round_}"
        assert term == round_, context
        # The restarted child recovered at least everything acknowledged in earlier rounds.
        assert applied_at_start >= max(all_acks, default=0), context
        all_acks.update(acks)
        items = stored_items(tmp_path)
        lost = {i: d for i, d in all_acks.items() if i > len(items) or items[i - 1] != d}
        assert not lost, f"{context}: acknowledged entries lost or changed: {sorted(lost.items())[:5]}"
