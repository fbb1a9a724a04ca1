"""Linearizability of submit/read histories against a job-queue model. Pure functions, no I/O.

The model: the queue is the set of job ids created so far; ``submit`` creates one job whose id is larger
than every id before it and returns that id; ``read`` returns the whole set. A history records, for every
client operation, when it was called and when it returned (``math.inf`` when the outcome is unknown: a
submit whose reply was lost may have created a job at any time after its call, or never).

`check` decides whether some total order of the operations respects real time (an operation that returned
before another was called comes first) and the model, given the set of ids that finally exist (read from
every controller after the faults). Because each created id fixes its submit's place in the order (ids
grow), the search space collapses: the order must be the jobs in id order with every read placed right
after the last job it saw, so a read must return a prefix of the final ids, and the remaining question is
whether points can be chosen inside the operations' intervals in that order, which a greedy
earliest-point sweep answers exactly. Final ids that no acknowledged submit returned are attributed to
unknown-outcome submits (earliest call first, which is optimal because their intervals never close).

`check_exhaustive` is a direct Wing & Gong style search on the same model for small histories; the tests
use it to cross-check `check`.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Submit:
    """A submit attempt: `job_id` is what it returned, None when the outcome is unknown (then ret=inf)."""

    call: float
    ret: float = math.inf
    job_id: int | None = None
    tag: str = ""  # the job name the client gave, to tell retries of one logical submission apart

    def __post_init__(self) -> None:
        if (self.job_id is None) != math.isinf(self.ret):
            raise ValueError("a submit has a job id exactly when it returned (ret < inf)")
        if self.ret < self.call:
            raise ValueError(f"submit returns ({self.ret}) before it is called ({self.call})")


@dataclass(frozen=True)
class Read:
    """A completed read: the set of job ids it returned."""

    call: float
    ret: float
    ids: frozenset[int]

    def __post_init__(self) -> None:
        if self.ret < self.call:
            raise ValueError(f"read returns ({self.ret}) before it is called ({self.call})")


@dataclass
class Verdict:
    """`ok` when the history is linearizable; otherwise `problems` says what broke, first problem first."""

    ok: bool
    problems: list[str] = field(default_factory=list)
    unknown_applied: int = 0  # unknown-outcome submits that must have created a job

    def __bool__(self) -> bool:
        return self.ok


def check(submits: Iterable[Submit], reads: Iterable[Read], final_ids: Sequence[int]) -> Verdict:
    """Is the history linearizable on the job-queue model, ending with exactly `final_ids` existing?"""
    submits, reads = list(submits), list(reads)
    problems: list[str] = []
    dup_final = [i for i, n in Counter(final_ids).items() if n > 1]
    if dup_final:
        problems.append(f"job ids listed more than once in the final state: {sorted(dup_final)[:10]}")
    final = sorted(set(final_ids))
    acked = [s for s in submits if s.job_id is not None]
    twice = [i for i, n in Counter(s.job_id for s in acked).items() if n > 1]
    if twice:
        problems.append(f"job ids returned by more than one submit: {sorted(twice)[:10]}")
    lost = sorted({s.job_id for s in acked} - set(final))  # type: ignore[misc]
    if lost:
        problems.append(f"acknowledged submits missing from the final state: {lost[:10]}")
    by_id = {s.job_id: s for s in acked}
    unknown = sorted((s for s in submits if s.job_id is None), key=lambda s: s.call)
    unattributed = [i for i in final if i not in by_id]
    if len(unattributed) > len(unknown):
        problems.append(
            f"{len(unattributed)} jobs exist that no acknowledged submit created, but only "
            f"{len(unknown)} submits have an unknown outcome (e.g. ids {unattributed[:10]})"
        )
    reads_at: dict[int, list[Read]] = {}
    for r in reads:
        k = len(r.ids)
        if r.ids != frozenset(final[:k]):
            extra = sorted(r.ids - set(final))
            missing = sorted(set(final[:k]) - r.ids)
            problems.append(
                f"read [{r.call:.3f}, {r.ret:.3f}] is no prefix of the job sequence: "
                f"ids never created {extra[:5]}, ids skipped {missing[:5]}"
            )
            continue
        reads_at.setdefault(k, []).append(r)
    if problems:
        return Verdict(False, problems)

    # Greedy sweep: place every operation at the earliest instant the order allows.
    t = -math.inf
    next_unknown = 0
    for k in range(len(final) + 1):
        group_end = t
        for r in reads_at.get(k, []):  # reads of one prefix do not order each other
            point = max(t, r.call)
            if point > r.ret:
                after = f"job {final[k - 1]}" if k else "the start"
                return Verdict(
                    False,
                    [
                        f"read [{r.call:.3f}, {r.ret:.3f}] saw {k} jobs (up to {after}) but must "
                        f"follow operations linearized at {t:.3f}: a stale read or out-of-order ids"
                    ],
                )
            group_end = max(group_end, point)
        t = group_end
        if k == len(final):
            break
        job_id = final[k]
        op = by_id.get(job_id)
        if op is None:
            op = unknown[next_unknown]
            next_unknown += 1
        point = max(t, op.call)
        if point > op.ret:
            return Verdict(
                False,
                [
                    f"submit [{op.call:.3f}, {op.ret:.3f}] returned job {job_id}, but operations "
                    f"that must precede it (smaller ids, or reads not showing it) happened until {t:.3f}"
                ],
            )
        t = point
    return Verdict(True, unknown_applied=next_unknown)


def check_exhaustive(submits: Sequence[Submit], reads: Sequence[Read], final_ids: Sequence[int]) -> bool:
    """The same question by brute-force search over linearization orders (small histories only)."""
    final = sorted(set(final_ids))
    if len(final) != len(final_ids):
        return False
    ops: list[Submit | Read] = [*submits, *reads]
    n = len(ops)
    acked_ids = {s.job_id for s in submits if s.job_id is not None}
    full = (1 << n) - 1
    seen: set[tuple[int, int]] = set()
    stack = [(0, 0)]  # (operations done or dropped, number of jobs created)
    while stack:
        done, k = stack.pop()
        if (done, k) in seen:
            continue
        seen.add((done, k))
        if done == full:
            if k == len(final):
                return True
            continue
        horizon = min(ops[i].ret for i in range(n) if not done >> i & 1)
        for i, op in enumerate(ops):
            if done >> i & 1 or op.call > horizon:
                continue
            bit = done | 1 << i
            if isinstance(op, Read):
                if op.ids == frozenset(final[:k]):
                    stack.append((bit, k))
            elif op.job_id is not None:
                if k < len(final) and final[k] == op.job_id:
                    stack.append((bit, k + 1))
            else:
                stack.append((bit, k))  # it never took effect
                if k < len(final) and final[k] not in acked_ids:
                    stack.append((bit, k + 1))
    return False


def tag_problems(submits: Iterable[Submit], tags_in_final: Iterable[str]) -> list[str]:
    """Each logical submission (its tag) must have created one job per acknowledged attempt, plus at most
    one per unknown-outcome attempt (a retried submit whose first try was lost may duplicate); jobs
    whose tag no client used are reported too."""
    attempts: dict[str, list[Submit]] = {}
    for s in submits:
        attempts.setdefault(s.tag, []).append(s)
    counts = Counter(tags_in_final)
    problems = []
    for tag, tries in attempts.items():
        acked = sum(s.job_id is not None for s in tries)
        have = counts.get(tag, 0)
        if not acked <= have <= len(tries):
            problems.append(
                f"submission {tag!r}: {have} jobs after {acked} acknowledged and "
                f"{len(tries) - acked} unknown-outcome attempts"
            )
    strangers = set(counts) - set(attempts)
    if strangers:
        problems.append(f"jobs no client submitted: {sorted(strangers)[:5]}")
    return problems
