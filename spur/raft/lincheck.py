"""A linearizability checker for histories of operations on registers (Wing & Gong / Lowe search).

A history is a list of `Op`: when the client called it, when it returned (``math.inf`` when the outcome
is unknown: the operation may have taken effect at any point after its call, or never), what it was
(``("write", value)`` or ``("read", None)``) and what it returned (the value read). Operations on
different keys are checked separately (linearizability is compositional). Pure functions, no I/O.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Op:
    """One client operation on `key`: ``kind`` is "write" (with `value`) or "read" (returning `value`)."""

    key: Hashable
    kind: str
    value: Any
    call: float
    ret: float = math.inf  # inf: outcome unknown

    def __post_init__(self) -> None:
        if self.kind not in ("write", "read"):
            raise ValueError(f"operation kind must be 'write' or 'read', got {self.kind!r}")
        if self.ret < self.call:
            raise ValueError(f"operation returns ({self.ret}) before it is called ({self.call})")


@dataclass(frozen=True)
class Result:
    """Whether the history is linearizable; if not, the key whose sub-history is not."""

    ok: bool
    key: Hashable | None = None


def check_registers(history: Iterable[Op], initial: Any = None) -> Result:
    """Check a history of register operations (each key starts at `initial`)."""
    by_key: dict[Hashable, list[Op]] = defaultdict(list)
    for op in history:
        if op.kind == "read" and math.isinf(op.ret):
            continue  # a read with no answer observed nothing
        by_key[op.key].append(op)
    for key, ops in by_key.items():
        if not _linearizable(ops, initial):
            return Result(False, key)
    return Result(True)


def _linearizable(ops: list[Op], initial: Any) -> bool:
    """Depth-first search for an order that respects real time and register semantics, memoised on
    (set of operations done, register value)."""
    n = len(ops)
    order = sorted(range(n), key=lambda i: ops[i].call)
    seen: set[tuple[int, Any]] = set()
    stack: list[tuple[int, Any]] = [(0, initial)]
    full = (1 << n) - 1
    while stack:
        done, value = stack.pop()
        if done == full:
            return True
        if (done, value) in seen:
            continue
        seen.add((done, value))
        # An operation can go next only if it was called before every remaining operation returned.
        horizon = min(ops[i].ret for i in range(n) if not done >> i & 1)
        for i in order:
            op = ops[i]
            if op.call > horizon:
                break
            if done >> i & 1:
                continue
            if op.kind == "write":
                stack.append((done | 1 << i, op.value))
            elif op.value == value:
                stack.append((done | 1 << i, value))
    return False
