"""Big listings built a slice at a time (spur.controller.slicing): the same answer as one pass, the
event loop's other tasks running between slices, no extra checkpoint for a small answer, and a
``GetNodes`` that meets a node removed while it was being listed."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st
from state_helpers import Log, register
from step_marks import StepMarks, items_per_step

import spur.controller.service as service_module
from spur.controller.service import ControllerService
from spur.controller.slicing import map_in_slices
from spur.rpc.proto import spur_pb2 as pb
from spur.state import commands as c


def _items_per_step(n: int, slice_items: int) -> list[int]:
    log: list[str] = []
    marks = StepMarks(log)

    def fn(x: int) -> int:
        log.append("item")
        return x * 2

    async def main() -> list[int]:
        marks.task = trio.lowlevel.current_task()
        await trio.lowlevel.checkpoint()
        return await map_in_slices(list(range(n)), fn, slice_items=slice_items)

    assert trio.run(main, instruments=[marks]) == [x * 2 for x in range(n)]
    return items_per_step(log)


def test_each_slice_is_its_own_step() -> None:
    assert _items_per_step(11, 4) == [4, 4, 3]
    assert _items_per_step(8, 4) == [4, 4]  # no checkpoint after the last slice


def test_a_small_answer_takes_no_checkpoint() -> None:
    assert _items_per_step(4, 4) == [4]
    assert _items_per_step(0, 4) == []


@given(st.lists(st.integers()), st.integers(1, 9))
@settings(max_examples=100, deadline=None)
def test_the_answer_is_the_plain_map(items: list[int], size: int) -> None:
    assert trio.run(lambda: map_in_slices(items, str, slice_items=size)) == [str(x) for x in items]


def test_a_slice_holds_at_least_one_item() -> None:
    with pytest.raises(ValueError, match="at least one item"):
        trio.run(lambda: map_in_slices([1], str, slice_items=0))


class _Ctl:
    """The part of the controller GetNodes reads: leadership and the applied state."""

    is_leader = True

    def __init__(self, state: Any) -> None:
        self.state = state

    async def leader_ready(self) -> None:
        return None


def test_get_nodes_leaves_out_a_node_removed_while_it_was_listed(monkeypatch: pytest.MonkeyPatch) -> None:
    log = Log()
    for name in ("n1", "n2", "n3"):
        register(log, name)

    async def one_at_a_time(items: Sequence[str], fn: Callable[[str], Any], **_: Any) -> list[Any]:
        def then_remove(name: str) -> Any:
            info = fn(name)
            if name == "n1":  # another task's command applied between the first slice and the next
                assert log(c.RemoveNode(["n3"], 60.0)) is not None
            return info

        return await map_in_slices(items, then_remove, slice_items=1)

    monkeypatch.setattr(service_module, "map_in_slices", one_at_a_time)
    service = ControllerService(_Ctl(log.state))  # type: ignore[arg-type]  # what GetNodes reads
    answer = trio.run(lambda: service.GetNodes(pb.GetNodesRequest(), None))  # type: ignore[arg-type]
    assert [n.name for n in answer.nodes] == ["n1", "n2"]
    assert all(n.cpus == 4 for n in answer.nodes)
