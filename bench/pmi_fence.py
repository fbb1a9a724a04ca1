"""PMI-2 fence latency for simulated ranks (4, 16, 64): every rank puts its business card, enters
the fence, the launcher merges the puts and releases every rank, then each rank reads a peer's card.

Measures the protocol work of spur.core.pmi (encode, decode, merge), in one process; no sockets.
Run: python bench/pmi_fence.py
"""

from __future__ import annotations

import time

from spur.core.pmi import Fence, RankInfo, RankSession, encode_pmi2


def one_fence(size: int) -> float:
    sessions = [RankSession(RankInfo(rank, size, "1.0"), version=2) for rank in range(size)]
    start = time.perf_counter()
    merged: dict[str, str] = {}
    for s in sessions:
        s.receive(encode_pmi2([("cmd", "kvs-put"), ("key", f"bc-{s.info.rank}"), ("value", "x" * 64)]))
        [fence] = s.receive(encode_pmi2([("cmd", "kvs-fence")]))
        assert isinstance(fence, Fence)
        merged.update(fence.puts)
    for s in sessions:
        s.fence_done(merged)
        s.receive(encode_pmi2([("cmd", "kvs-get"), ("key", f"bc-{(s.info.rank + 1) % size}")]))
    return time.perf_counter() - start


def main() -> None:
    for size in (4, 16, 64):
        runs = sorted(one_fence(size) for _ in range(200))
        print(
            f"PMI-2 fence, {size:3d} simulated ranks: median {runs[100] * 1e6:8.1f} us, p95 {runs[190] * 1e6:8.1f} us"
        )


if __name__ == "__main__":
    main()
