"""The dashboard's minute sample read a slice at a time: the same answer as one whole scan, the event
loop's other tasks running between slices, and the controller's state read as it is when each slice is."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st
from state_helpers import Log, register, submit
from step_marks import StepMarks, items_per_step

from spur.state import commands as c
from spur.ui.app import ControllerSource
from spur.ui.samples import JobTimes, NodeLoad, Sample, Tally, sample_in_slices, take_sample

_loads = st.builds(NodeLoad, *[st.integers(0, 512)] * 6)
_times = st.builds(
    JobTimes,
    st.sampled_from(["PENDING", "RUNNING", "SUSPENDED", "COMPLETED", "FAILED", "CANCELLED"]),
    st.sampled_from([0.0, 50.0, 119.0, 120.0, 150.0, 179.9, 180.0]),
    st.sampled_from([0.0, 60.0, 120.0, 179.0, 180.0, 200.0]),
)


class ListSource:
    """A sample source over fixed lists that logs each item as it is read."""

    def __init__(self, nodes: list[NodeLoad], jobs: list[JobTimes], log: list[str]) -> None:
        self.nodes, self.jobs, self.log = nodes, jobs, log

    def node_loads(self) -> Iterator[NodeLoad]:
        for n in self.nodes:
            self.log.append("item")
            yield n

    def job_times(self) -> Iterator[JobTimes]:
        for j in self.jobs:
            self.log.append("item")
            yield j


@given(st.lists(_loads, max_size=12), st.lists(_times, max_size=30), st.integers(1, 7))
@settings(max_examples=200, deadline=None)
def test_a_sample_added_up_in_slices_equals_the_whole_scan(
    nodes: list[NodeLoad], jobs: list[JobTimes], size: int
) -> None:
    whole = take_sample(nodes, jobs, 180)
    tally = Tally(180)
    for i in range(0, max(len(nodes), len(jobs)), size):
        tally.add_jobs(jobs[i : i + size])
        tally.add_nodes(nodes[i : i + size])
    assert tally.sample() == whole
    assert trio.run(lambda: sample_in_slices(ListSource(nodes, jobs, []), 180, slice_items=size)) == whole


def test_the_loop_gets_a_turn_after_every_slice() -> None:
    log: list[str] = []
    marks = StepMarks(log)
    nodes = [NodeLoad(4, 1, 0, 0, 1000, 10)] * 5
    jobs = [JobTimes("RUNNING", 130.0, 0.0)] * 6

    async def main() -> Sample:
        marks.task = trio.lowlevel.current_task()
        await trio.lowlevel.checkpoint()
        return await sample_in_slices(ListSource(nodes, jobs, log), 180, slice_items=4)

    sample = trio.run(main, instruments=[marks])
    assert (sample.cpus_total, sample.running, sample.started) == (20, 6, 6)
    # 5 nodes and 6 jobs in slices of at most 4: 4+1 then 4+2, never more than one slice in a step.
    assert items_per_step(log) == [4, 1, 4, 2]


def test_a_slice_holds_at_least_one_item() -> None:
    with pytest.raises(ValueError, match="at least one item"):
        trio.run(lambda: sample_in_slices(ListSource([], [], []), 60, slice_items=0))


def test_the_controller_source_reads_each_node_and_job_as_it_is_when_read() -> None:
    log = Log()
    for name in ("n1", "n2", "n3"):
        register(log, name, cpus=4, mem=1000)
    submit(log)
    submit(log)
    source = ControllerSource(log.state)

    loads = source.node_loads()
    first = next(loads)
    assert log(c.RemoveNode(["n3"], 60.0)) is not None
    rest = list(loads)
    assert [first, *rest] == [NodeLoad(4, 0, 0, 0, 1000, 0)] * 2  # n3 went before its turn
    assert "n3" not in log.state.nodes

    times = source.job_times()
    assert next(times).state == "PENDING"
    submit(log)  # a job submitted after the listing began is the next sample's
    assert [t.state for t in times] == ["PENDING"]
