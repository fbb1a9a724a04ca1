"""Snapshots serialized by a forked child (spur.raft.forked): consistent at the fork, failures
reported, a cancelled wait leaves no child behind."""

from __future__ import annotations

import json
import os

import pytest
import trio

from spur.raft.forked import ChildSnapshotError, fork_snapshot


async def test_child_serializes_the_state_as_it_was_at_the_fork() -> None:
    state = {"jobs": list(range(200_000))}  # a few MB of JSON: more than one pipe buffer
    child = fork_snapshot(lambda: json.dumps(state).encode())
    state["jobs"].append(-1)  # applied after the fork: must not be in the snapshot
    state["later"] = True
    data = await child.result()
    assert json.loads(data) == {"jobs": list(range(200_000))}


async def test_a_failing_serializer_is_reported_and_the_child_reaped() -> None:
    def boom() -> bytes:
        raise RuntimeError("cannot serialize")

    child = fork_snapshot(boom)
    with pytest.raises(ChildSnapshotError, match="status 1"):
        await child.result()
    with pytest.raises(ChildProcessError):
        os.waitpid(child.pid, os.WNOHANG)  # already reaped: no zombie left


async def test_cancelled_wait_kills_and_reaps_the_child() -> None:
    import time

    child = fork_snapshot(lambda: (time.sleep(60), b"never")[1])
    with trio.move_on_after(0.2):
        await child.result()
    with pytest.raises(ChildProcessError):
        os.waitpid(child.pid, os.WNOHANG)


async def test_the_parent_keeps_running_while_the_child_works() -> None:
    import time

    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await trio.sleep(0.01)
            ticks += 1

    async with trio.open_nursery() as nursery:
        nursery.start_soon(ticker)
        data = await fork_snapshot(lambda: (time.sleep(0.5), b"done")[1]).result()
        nursery.cancel_scope.cancel()
    assert data == b"done"
    assert ticks >= 10  # the loop ran on while the child spent 0.5 s serializing
