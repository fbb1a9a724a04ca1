"""Batched proposals keep per-command semantics: one Raft entry, each caller its own result.

Driven in-process against a real single-member Raft log (as tests/test_controller_duties.py does).
"""

from __future__ import annotations

import pytest
import trio

from spur.config import parse_config_text
from spur.controller.app import Controller
from spur.controller.duties import SchedulerLoop
from spur.core.job import JobSpec, JobState, Node
from spur.rpc.status import RpcError, StatusCode
from spur.state import commands as c
from spur.state.machine import ClusterState, Rejected


def make_controller(tmp_path) -> Controller:
    cfg = parse_config_text("", overrides={"controller.state_dir": str(tmp_path / "state")})
    ctl = Controller(cfg, listen=("127.0.0.1", 0))
    from spur.plugins import load_plugin_manager

    ctl.plugin_manager = load_plugin_manager("scheduler", "backfill")
    return ctl


def spec(**kw) -> JobSpec:
    return JobSpec(script="#!/bin/sh\ntrue\n", work_dir="/tmp", **kw)


def submit(s: JobSpec, t: float = 1.0) -> c.SubmitJob:
    return c.SubmitJob(s, "u", 1, 1, "u", t)


def test_batch_round_trips_through_the_log_codec() -> None:
    batch = c.Batch([submit(spec(name="a")), c.CancelJob(7, 0, 2.0)])
    back = c.decode(c.encode(batch))
    assert back == batch
    with pytest.raises(TypeError):
        c.encode(c.Batch([batch]))  # no nesting


def test_batch_applies_in_order_and_a_rejection_stays_its_own() -> None:
    state = ClusterState()
    state.apply_command(c.RegisterNode(Node(name="n1", address="h", cpus=4, memory_mb=1000), 0.0))
    results = state.apply(
        5,
        c.encode(
            c.Batch(
                [
                    submit(spec(name="first")),
                    c.CancelJob(999, 0, 1.5),  # unknown job: rejected, the others still apply
                    submit(spec(name="second", dependency="afterok:1")),
                ]
            )
        ),
    )
    assert results[0] == 1 and results[2] == 2
    assert isinstance(results[1], Rejected)
    assert state.applied_index == 5
    assert [state.jobs[i].spec.name for i in (1, 2)] == ["first", "second"]
    # the same commands as separate entries give the same state
    single = ClusterState()
    single.apply_command(c.RegisterNode(Node(name="n1", address="h", cpus=4, memory_mb=1000), 0.0))
    single.apply_command(submit(spec(name="first")))
    single.apply_command(c.CancelJob(999, 0, 1.5))
    single.apply_command(submit(spec(name="second", dependency="afterok:1")))
    assert single.snapshot().replace(b'"applied_index":0', b"") == state.snapshot().replace(
        b'"applied_index":5', b""
    )


async def test_concurrent_proposals_share_entries_and_get_their_own_results(tmp_path) -> None:
    ctl = make_controller(tmp_path)
    async with trio.open_nursery() as nursery:
        await nursery.start(ctl.raft.run)
        await nursery.start(ctl.batcher.run)
        await ctl.propose(c.RegisterNode(Node(name="n1", address="h", cpus=64, memory_mb=1000), 0.0))
        ids: list[int] = []
        refused: list[RpcError] = []

        async def one(i: int) -> None:
            if i % 10 == 5:
                try:
                    await ctl.propose(c.CancelJob(100_000 + i, 0, 2.0))
                except RpcError as exc:
                    refused.append(exc)
            else:
                ids.append(await ctl.propose(submit(spec(name=f"j{i}"))))

        entries_before, commands_before = ctl.batcher.entries, ctl.batcher.commands
        async with trio.open_nursery() as inner:
            for i in range(200):
                inner.start_soon(one, i)
        commands = ctl.batcher.commands - commands_before
        entries = ctl.batcher.entries - entries_before
        assert commands == 200
        assert entries < commands / 4, (entries, commands)  # batched, not one entry per command
        assert sorted(ids) == list(range(1, 181))  # every submission its own, distinct id
        assert len(refused) == 20 and all(e.code is StatusCode.NOT_FOUND for e in refused)
        assert all(ctl.state.jobs[i].spec.name.startswith("j") for i in ids)

        # sequential proposals of one caller are applied in its order
        seq = [await ctl.propose(submit(spec(name=f"s{k}"))) for k in range(5)]
        assert seq == sorted(seq)
        nursery.cancel_scope.cancel()


async def test_propose_many_keeps_order_shares_entries_and_returns_each_outcome(tmp_path) -> None:
    """Commands proposed together leave in one entry (more than one past max_batch), are applied in
    their order, and each gets its own result or error, as SubmitJobs relies on."""
    ctl = make_controller(tmp_path)
    async with trio.open_nursery() as nursery:
        await nursery.start(ctl.raft.run)
        await nursery.start(ctl.batcher.run)
        await ctl.propose(c.RegisterNode(Node(name="n1", address="h", cpus=64, memory_mb=1000), 0.0))
        cmds = [
            submit(spec(name="a")),
            c.CancelJob(99_999, 0, 2.0),
            submit(spec(name="b")),
            submit(spec(name="c")),
        ]
        entries_before = ctl.batcher.entries
        outcomes = await ctl.propose_many(cmds)
        assert ctl.batcher.entries - entries_before == 1
        assert isinstance(outcomes[1], RpcError) and outcomes[1].code is StatusCode.NOT_FOUND
        ids = [outcomes[i] for i in (0, 2, 3)]
        assert ids == sorted(ids) and [ctl.state.jobs[i].spec.name for i in ids] == ["a", "b", "c"]
        many = [submit(spec(name=f"m{k}")) for k in range(1200)]  # past DEFAULT_MAX_BATCH (512)
        entries_before = ctl.batcher.entries
        ids = await ctl.propose_many(many)
        assert ids == sorted(ids) and len(set(ids)) == 1200
        assert ctl.batcher.entries - entries_before == 3
        assert await ctl.propose_many([]) == []
        with pytest.raises(TypeError):
            await ctl.batcher.propose_many([submit(spec(name="x")), "not a command"])
        assert ctl.batcher.queued == 0  # nothing of the refused call was queued
        nursery.cancel_scope.cancel()


async def test_propose_many_without_the_batcher_proposes_one_by_one(tmp_path) -> None:
    ctl = make_controller(tmp_path)
    async with trio.open_nursery() as nursery:
        await nursery.start(ctl.raft.run)
        await ctl.propose(c.RegisterNode(Node(name="n1", address="h", cpus=64, memory_mb=1000), 0.0))
        outcomes = await ctl.propose_many([submit(spec(name="a")), c.CancelJob(99_999, 0, 2.0)])
        assert outcomes[0] == 1 and isinstance(outcomes[1], RpcError)
        nursery.cancel_scope.cancel()


async def test_a_cancelled_caller_takes_its_queued_command_back(tmp_path) -> None:
    ctl = make_controller(tmp_path)
    async with trio.open_nursery() as nursery:
        await nursery.start(ctl.raft.run)
        # the batcher is not running: a proposal waits in its queue until cancelled
        ctl.batcher.running = True
        with trio.move_on_after(0.05):
            await ctl.propose(submit(spec(name="never")))
        assert ctl.batcher.queued == 0
        ctl.batcher.running = False
        await nursery.start(ctl.batcher.run)
        job_id = await ctl.propose(submit(spec(name="later")))
        assert [j.spec.name for j in ctl.state.jobs.values()] == ["later"]
        assert job_id == 1
        nursery.cancel_scope.cancel()


async def test_batched_scheduling_keeps_dependency_order_and_array_throttle(tmp_path) -> None:
    ctl = make_controller(tmp_path)
    async with trio.open_nursery() as nursery:
        await nursery.start(ctl.raft.run)
        await nursery.start(ctl.batcher.run)
        for n in range(4):
            await ctl.propose(c.RegisterNode(Node(name=f"n{n}", address="h", cpus=8, memory_mb=1000), 0.0))
        first = await ctl.propose(submit(spec(name="first")))
        after = await ctl.propose(submit(spec(name="after", dependency=f"afterok:{first}")))
        array = await ctl.propose(submit(spec(name="arr", array="1-20%3")))
        loop = SchedulerLoop(ctl)
        await loop.cycle()
        jobs = ctl.state.jobs
        assert jobs[first].state is JobState.RUNNING
        assert jobs[after].state is JobState.PENDING  # its dependency has not ended
        tasks = ctl.state.array_tasks[array]
        assert sum(t.state is JobState.RUNNING for t in tasks) == 3  # %3, although 32 CPUs are free

        # every running job exits in one batch; the next pass starts the dependent job and 3 more tasks
        running = [j for j in ctl.state.active_jobs()]
        async with trio.open_nursery() as inner:
            for j in running:
                inner.start_soon(ctl.propose, c.JobLaunched(j.job_id, j.alloc_term))
        async with trio.open_nursery() as inner:
            for j in running:
                inner.start_soon(ctl.propose, c.JobExited(j.job_id, j.allocation[0].node, 0, 0, 5.0))
        await loop.cycle()
        assert jobs[first].state is JobState.COMPLETED
        assert jobs[after].state is JobState.RUNNING
        assert sum(t.state is JobState.RUNNING for t in tasks) == 3
        assert sum(t.state is JobState.COMPLETED for t in tasks) == 3
        nursery.cancel_scope.cancel()


async def test_a_cancel_racing_a_start_in_one_batch_ends_cancelled(tmp_path) -> None:
    ctl = make_controller(tmp_path)
    async with trio.open_nursery() as nursery:
        await nursery.start(ctl.raft.run)
        await nursery.start(ctl.batcher.run)
        await ctl.propose(c.RegisterNode(Node(name="n1", address="h", cpus=8, memory_mb=1000), 0.0))
        ids = [await ctl.propose(submit(spec(name=f"r{i}"))) for i in range(6)]
        loop = SchedulerLoop(ctl)
        # a scheduling pass and cancellations proposed at the same time share entries
        async with trio.open_nursery() as inner:
            inner.start_soon(loop.cycle)
            for job_id in ids[::2]:
                inner.start_soon(ctl.propose, c.CancelJob(job_id, 1, 3.0))
        for job_id in ids[::2]:
            job = ctl.state.jobs[job_id]
            # cancelled before the start (CANCELLED) or after it (COMPLETING until the agent confirms)
            assert job.state in (JobState.CANCELLED, JobState.COMPLETING), job.state
            assert not job.launched
        for job_id in ids[1::2]:
            assert ctl.state.jobs[job_id].state is JobState.RUNNING
        nursery.cancel_scope.cancel()
