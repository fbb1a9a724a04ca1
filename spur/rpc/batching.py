"""Helpers shared by both ends of the batched agent <-> controller calls (spur/rpc/proto/batch.proto).

Pure, no I/O: items travel serialized inside the batch message and each gets an ``ItemOutcome``
carrying the status the single call would have ended with.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any, TypeVar

import trio

from spur.rpc.proto import batch_pb2
from spur.rpc.status import RpcError, StatusCode

__all__ = ["AGENT_BATCH", "CONTROLLER_BATCH", "fail_item", "outcome_error", "parse_items", "serve_items"]

AGENT_BATCH = batch_pb2.DESCRIPTOR.services_by_name["AgentBatch"]
CONTROLLER_BATCH = batch_pb2.DESCRIPTOR.services_by_name["ControllerBatch"]

M = TypeVar("M")


def outcome_error(outcome: batch_pb2.ItemOutcome) -> RpcError | None:
    """The RpcError an item's outcome stands for, or None when it succeeded."""
    if outcome.code == 0:
        return None
    try:
        code = StatusCode(outcome.code)
    except ValueError:
        code = StatusCode.UNKNOWN
    return RpcError(code, outcome.message)


def parse_items(
    raw_items: Iterable[bytes], parse: Callable[[bytes], M]
) -> tuple[list[M | None], list[batch_pb2.ItemOutcome]]:
    """Each item parsed (None where it does not parse) and a fresh outcome per item; an item that does
    not parse has already failed INVALID_ARGUMENT in its outcome."""
    raws = list(raw_items)
    items: list[M | None] = []
    outcomes = [batch_pb2.ItemOutcome() for _ in raws]
    for i, raw in enumerate(raws):
        try:
            items.append(parse(raw))
        except Exception as exc:  # protobuf's DecodeError and friends
            items.append(None)
            outcomes[i].code = StatusCode.INVALID_ARGUMENT.value
            outcomes[i].message = f"item {i} does not parse: {exc}"
    return items, outcomes


def fail_item(outcome: batch_pb2.ItemOutcome, error: RpcError) -> None:
    """Record in ``outcome`` the status a single call would have ended with."""
    outcome.code = error.code.value
    outcome.message = error.message


async def serve_items(
    raw_items: Iterable[bytes],
    parse: Callable[[bytes], M],
    serve_one: Callable[[M], Awaitable[Any]],
    key: Callable[[M], Any],
    fill: Callable[[batch_pb2.ItemOutcome, Any], None] | None = None,
) -> batch_pb2.BatchOutcomes:
    """Serve every item with ``serve_one``: items with the same ``key`` one after another in request
    order, different keys concurrently (so their state proposals share Raft entries). An item that
    does not parse fails INVALID_ARGUMENT on its own; ``fill(outcome, result)`` copies a result in."""
    items, outcomes = parse_items(raw_items, parse)
    groups: dict[Any, list[int]] = {}
    for i, item in enumerate(items):
        if item is not None:
            groups.setdefault(key(item), []).append(i)

    async def run_group(indexes: list[int]) -> None:
        for i in indexes:
            try:
                result = await serve_one(items[i])  # type: ignore[arg-type]
            except RpcError as exc:
                fail_item(outcomes[i], exc)
                continue
            if fill is not None:
                fill(outcomes[i], result)

    async with trio.open_nursery() as nursery:
        for indexes in groups.values():
            nursery.start_soon(run_group, indexes)
    return batch_pb2.BatchOutcomes(outcomes=outcomes)
