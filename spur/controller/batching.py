"""The leader's proposal batcher: concurrent proposals leave as one Raft entry.

Under load the controller proposes thousands of small commands a second (a submission, a start, a
launch acknowledgement and an exit per job). Each Raft entry costs an encode, a log record, its
replication, a decode, an apply and a change notification; Raft's group commit already shares the
fsync, but not the rest. :class:`ProposalBatcher` queues the commands proposed while an entry is on its
way and sends everything queued as one :class:`~spur.state.commands.Batch` entry, which the state
machine applies command by command, in order, as if each were its own entry.

Contract, per caller (what ``Controller.propose`` promised before batching, unchanged):

- the caller gets its own command's result; a ``Rejected`` result rejects only that command;
- an error of the whole entry (``NotLeader``, ``StorageError``) is raised to every caller in it;
- a caller that proposes sequentially (awaiting each result) sees its commands applied in its order;
  concurrent callers were never ordered relative to each other;
- a caller cancelled while its command is still queued takes it out (it is never proposed); one
  cancelled after its command left may still see it committed, as with ``RaftNode.propose``.

A lone command is proposed as itself (no Batch wrapper), so a quiet cluster writes exactly the log it
wrote before. The batcher holds no state that survives leadership: it only forwards to Raft, which
refuses proposals on a follower.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import trio

from spur.state import commands as c

__all__ = ["BatcherStopped", "ProposalBatcher"]

DEFAULT_MAX_BATCH = 512
DEFAULT_IN_FLIGHT = 2


class BatcherStopped(RuntimeError):
    """The batcher stopped (the controller is shutting down) before the command's outcome was known."""


class _Item:
    __slots__ = ("cmd", "done", "error", "result", "taken")

    def __init__(self, cmd: Any) -> None:
        self.cmd = cmd
        self.done = trio.Event()
        self.result: Any = None
        self.error: BaseException | None = None
        self.taken = False


class ProposalBatcher:
    """Coalesces concurrent ``propose`` calls into Batch entries; ``run`` must be running.

    ``propose_bytes(data, command)`` is Raft's propose (returns what apply returned for the entry,
    raises for the entry); ``command`` is the command or Batch that ``data`` encodes, which the
    leader's state machine may apply without decoding its own entry (``RaftNode.propose``). At most
    ``in_flight`` entries are outstanding at once; while they are, new commands queue and leave
    together (up to ``max_batch`` per entry), so batches grow with the load by themselves and a single
    command on an idle controller leaves at once.
    """

    def __init__(
        self,
        propose_bytes: Callable[[bytes, object], Awaitable[Any]],
        *,
        max_batch: int = DEFAULT_MAX_BATCH,
        in_flight: int = DEFAULT_IN_FLIGHT,
    ) -> None:
        if max_batch < 1 or in_flight < 1:
            raise ValueError("max_batch and in_flight must be at least 1")
        self._propose_bytes = propose_bytes
        self._max_batch = max_batch
        self._slots = trio.Semaphore(in_flight)
        self._queue: deque[_Item] = deque()
        self._wakeup = trio.Event()
        self.running = False
        self.entries = 0  # Raft entries proposed (for tests and benchmarks)
        self.commands = 0  # commands carried by them

    @property
    def queued(self) -> int:
        """Commands waiting to leave."""
        return len(self._queue)

    async def propose(self, cmd: Any) -> Any:
        """Propose ``cmd`` (in the next entry) and return its own result; see the module contract.

        Raises TypeError at once for an object that is not a state command (nothing is proposed)."""
        [outcome] = await self.propose_many((cmd,))
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    async def propose_many(self, cmds: Sequence[Any]) -> list[Any]:
        """Propose ``cmds`` in their order, queued together (one entry, or consecutive entries past
        ``max_batch``), and return, in order, each command's own result or the exception its entry
        failed with (returned, not raised: commands of an earlier entry may have been applied).

        Raises TypeError at once, proposing nothing, when any of them is not a state command. A caller
        cancelled takes back the commands still queued, as with :meth:`propose`."""
        for cmd in cmds:
            if c.registry().get(type(cmd).__name__) is not type(cmd) or type(cmd) is c.Batch:
                raise TypeError(f"not a state command: {type(cmd).__name__}")
        items = [_Item(cmd) for cmd in cmds]
        self._queue.extend(items)
        self._wakeup.set()
        try:
            for item in items:
                await item.done.wait()
        except BaseException:
            for item in items:
                if not item.taken:
                    try:
                        self._queue.remove(item)
                    except ValueError:
                        pass
            raise
        return [item.error if item.error is not None else item.result for item in items]

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Send queued commands until cancelled. Commands still queued then, and those of entries cut
        short, fail with :class:`BatcherStopped` (outcome unknown for the latter) so no caller waits forever."""
        self.running = True
        try:
            async with trio.open_nursery() as nursery:
                task_status.started()
                while True:
                    if not self._queue:
                        self._wakeup = trio.Event()
                        await self._wakeup.wait()
                        continue
                    await self._slots.acquire()
                    batch = [self._queue.popleft() for _ in range(min(self._max_batch, len(self._queue)))]
                    if not batch:  # every queued caller was cancelled meanwhile
                        self._slots.release()
                        continue
                    for item in batch:
                        item.taken = True
                    nursery.start_soon(self._send, batch)
                    # Let callers woken by the entry just sent queue their next commands before the
                    # next one leaves, so that batches form rather than one entry per command.
                    await trio.lowlevel.checkpoint()
        finally:
            self.running = False
            while self._queue:
                item = self._queue.popleft()
                item.error = BatcherStopped("the proposal batcher stopped before this command was proposed")
                item.done.set()

    async def _send(self, batch: list[_Item]) -> None:
        try:
            entry = batch[0].cmd if len(batch) == 1 else c.Batch([item.cmd for item in batch])
            result = await self._propose_bytes(c.encode(entry), entry)
        except BaseException as exc:  # the whole entry failed: every caller in it hears why
            error: BaseException = exc
            if not isinstance(exc, Exception):  # the batcher is being cancelled: never re-raise that
                error = BatcherStopped("the proposal batcher stopped; the command's outcome is unknown")
            for item in batch:
                item.error = error
                item.done.set()
            if error is not exc:
                raise
            return
        finally:
            self._slots.release()
        self.entries += 1
        self.commands += len(batch)
        results = [result] if len(batch) == 1 else list(result)
        for item, outcome in zip(batch, results, strict=True):
            item.result = outcome
            item.done.set()
