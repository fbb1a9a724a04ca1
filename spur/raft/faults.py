"""Fault injection for Raft tests: drop or delay messages between chosen members.

One `FaultSwitch` is shared by every member of a test cluster (pass it as ``RaftNode(faults=...)``). The
transport consults it on both ends of every RPC, over the real sockets:

* the sender, before sending: a dropped request is never sent and the call fails when its deadline
  passes (what a lost packet looks like); a delayed one is sent late;
* the receiver, before handling: a request from a blocked sender is left unanswered (the caller's deadline
  passes);
* the receiver, after handling: a response to a blocked sender is withheld, so the request *took effect*
  but the sender cannot know (a lost reply).

Links are directed: ``block(1, 2)`` loses messages from 1 to 2 only. Pure bookkeeping, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable


class FaultSwitch:
    """Which directed links between member ids drop or delay messages. Starts with every link healthy."""

    def __init__(self) -> None:
        self._blocked: set[tuple[int, int]] = set()
        self._delays: dict[tuple[int, int], float] = {}
        self._members: set[int] = set()

    def register(self, node_id: int) -> None:
        """Record that `node_id` uses this switch (so `isolate` knows every member)."""
        self._members.add(node_id)

    def block(self, src: int, dst: int) -> None:
        """Drop every message from `src` to `dst`."""
        self._blocked.add((src, dst))

    def unblock(self, src: int, dst: int) -> None:
        """Let messages from `src` to `dst` through again."""
        self._blocked.discard((src, dst))

    def isolate(self, node_id: int) -> None:
        """Cut `node_id` off from every other registered member, both directions."""
        self.partition([node_id])

    def partition(self, group: Iterable[int]) -> None:
        """Split the members in two: `group` and everyone else; no message crosses between the sides."""
        inside = set(group)
        for a in inside:
            for b in self._members - inside:
                self._blocked.add((a, b))
                self._blocked.add((b, a))

    def delay(self, src: int, dst: int, seconds: float) -> None:
        """Hold every message from `src` to `dst` for `seconds` before sending it (0 removes the delay)."""
        if seconds < 0:
            raise ValueError(f"delay must be >= 0 seconds, got {seconds}")
        if seconds == 0:
            self._delays.pop((src, dst), None)
        else:
            self._delays[(src, dst)] = seconds

    def heal(self) -> None:
        """Remove every block and delay."""
        self._blocked.clear()
        self._delays.clear()

    def drops(self, src: int, dst: int) -> bool:
        """Whether a message from `src` to `dst` is lost."""
        return (src, dst) in self._blocked

    def delay_of(self, src: int, dst: int) -> float:
        """Seconds a message from `src` to `dst` is held before sending."""
        return self._delays.get((src, dst), 0.0)
