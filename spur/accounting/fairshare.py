"""Decayed usage and Slurm's classic fair-share factor over the account tree (pure).

Usage decays with a half-life: ``U(t1) = U(t0) * 2 ** (-(t1 - t0) / half_life)``. Every time is
read from the state or the command (never the clock), so all controllers compute the same values.

Fair share (priority/multifactor, classic algorithm): an association's normalized shares ``S`` is
the product, down the tree, of its shares divided by the shares of it and its siblings; its
normalized usage ``U`` is its (subtree) decayed usage divided by the whole cluster's; the factor is
``2 ** (-U / S)`` (1.0 for no usage, 0.5 at exactly its share, towards 0 above it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

DEFAULT_HALF_LIFE_SECS = 7 * 86400.0


def decayed(usage: float, since: float, now: float, half_life: float) -> float:
    """``usage`` recorded at ``since`` as seen at ``now`` (no decay backwards or with half-life 0)."""
    if half_life <= 0 or now <= since or usage == 0:
        return usage
    return usage * float(2.0 ** (-(now - since) / half_life))


def add_usage(
    usage: float, since: float, amount: float, when: float, half_life: float
) -> tuple[float, float]:
    """Record ``amount`` at ``when`` on top of ``usage`` (as of ``since``): new (usage, time).

    A record older than ``since`` is decayed to ``since`` instead, so the order in which finished
    jobs arrive does not matter beyond floating-point rounding.
    """
    if when >= since:
        return decayed(usage, since, when, half_life) + amount, when
    return usage + decayed(amount, when, since, half_life), since


@dataclass(frozen=True)
class ShareNode:
    """One association in the tree: ``parent`` is the key of its account's association ("" for root)."""

    key: str
    parent: str
    shares: int
    usage: float  # its own decayed usage (a user association's jobs; 0 for an account)


@dataclass(frozen=True)
class ShareRow:
    key: str
    raw_shares: int
    norm_shares: float
    raw_usage: float  # subtree usage
    norm_usage: float
    fairshare: float


def share_table(nodes: Sequence[ShareNode]) -> dict[str, ShareRow]:
    """Normalized shares, usage and the fair-share factor of every node (root first in ``nodes``)."""
    children: dict[str, list[ShareNode]] = {}
    for n in nodes:
        children.setdefault(n.parent, []).append(n)
    subtree: dict[str, float] = {}

    def total(n: ShareNode) -> float:
        value = n.usage + sum(total(c) for c in children.get(n.key, []))
        subtree[n.key] = value
        return value

    roots = children.get("", [])
    grand = sum(total(r) for r in roots)
    out: dict[str, ShareRow] = {}

    def walk(siblings: list[ShareNode], parent_norm: float) -> None:
        share_sum = sum(max(0, s.shares) for s in siblings) or 1
        for n in siblings:
            norm = parent_norm * max(0, n.shares) / share_sum
            used = subtree[n.key]
            norm_usage = used / grand if grand > 0 else 0.0
            if norm > 0:
                factor = 2.0 ** (-norm_usage / norm)
            else:
                factor = 0.0
            out[n.key] = ShareRow(n.key, n.shares, norm, used, norm_usage, factor)
            walk(children.get(n.key, []), norm)

    walk(roots, 1.0)
    return out


def fairshare_factors(nodes: Sequence[ShareNode]) -> Mapping[str, float]:
    """Key -> fair-share factor in [0, 1]."""
    return {k: r.fairshare for k, r in share_table(nodes).items()}
