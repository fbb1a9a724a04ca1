"""What srun (outside an allocation) makes of its job's updates (spur.cli.srun_follow.Follow, pure), and
the signal pipe its blocking loop watches (spur.cli.signal_pipe)."""

from __future__ import annotations

import os
import select
import signal

import pytest

from spur.cli.client import CliError
from spur.cli.signal_pipe import SignalPipe
from spur.cli.srun_follow import Follow
from spur.rpc.proto import spur_pb2 as pb


def _info(state: str, reason: str = "None", nodes: tuple[str, ...] = ()) -> pb.JobInfo:
    return pb.JobInfo(
        job_id=9, state=state, reason=reason, allocation=[pb.NodeAllocation(node=n, cpus=1) for n in nodes]
    )


def test_waiting_lines_come_once_the_job_has_a_reason_then_the_grant_is_announced() -> None:
    follow = Follow(9)
    assert follow.on_job(_info("PENDING")) == []  # no reason yet: Slurm's srun says nothing
    assert follow.on_job(_info("PENDING", "PartitionNodeLimit")) == [
        "srun: Requested partition configuration not available now",
        "srun: job 9 queued and waiting for resources",
    ]
    assert follow.on_job(_info("PENDING", "Resources")) == []  # said once
    assert follow.on_job(_info("RUNNING", nodes=("n1", "n2"))) == ["srun: job 9 has been allocated resources"]
    assert follow.allocated and follow.nodes_wanted == ["n1", "n2"]
    assert follow.on_job(_info("RUNNING", nodes=("n1", "n2"))) == []


def test_a_job_granted_at_once_is_silent() -> None:
    follow = Follow(9)
    assert follow.on_job(_info("RUNNING", nodes=("n1",))) == []
    assert follow.on_job(_info("COMPLETED", nodes=("n1",))) == []
    follow.on_exit(0, 0)
    assert follow.closing_lines() == [] and follow.exit_code() == 0


def test_a_job_that_ends_before_it_starts_is_an_error() -> None:
    follow = Follow(9)
    with pytest.raises(CliError) as err:
        follow.on_job(_info("CANCELLED", "DependencyNeverSatisfied"))
    assert err.value.message == "srun: error: job 9 ended CANCELLED before it started: DependencyNeverSatisfied"
    with pytest.raises(CliError) as err:
        Follow(9).on_watch_end()
    assert "stopped reporting it before it started" in err.value.message


@pytest.mark.parametrize(
    ("final", "results", "code", "lines"),
    [
        ("COMPLETED", [(0, 0), (3, 0)], 3, []),  # the largest node code
        ("FAILED", [(0, 9)], 128 + 9, []),  # a signal outweighs codes
        ("CANCELLED", [(0, 0)], 1, ["srun: error: job 9 was cancelled"]),
        ("TIMEOUT", [], 1, ["srun: error: job 9: time limit exceeded"]),
        ("NODE_FAIL", [(0, 0)], 1, []),
    ],
)
def test_exit_codes(final: str, results: list[tuple[int, int]], code: int, lines: list[str]) -> None:
    follow = Follow(9)
    follow.on_job(_info("RUNNING", nodes=("n1",)))
    follow.on_job(_info(final, nodes=("n1",)))
    for exit_code, sig in results:
        follow.on_exit(exit_code, sig)
    assert follow.exit_code() == code
    assert follow.closing_lines() == lines


def test_the_signal_pipe_wakes_a_select_and_hands_out_each_signal_once() -> None:
    before = signal.getsignal(signal.SIGUSR1)
    with SignalPipe(signal.SIGUSR1, signal.SIGUSR2) as signals:
        assert select.select([signals.fileno()], [], [], 0)[0] == []
        os.kill(os.getpid(), signal.SIGUSR1)
        os.kill(os.getpid(), signal.SIGUSR2)
        assert select.select([signals.fileno()], [], [], 5)[0] == [signals.fileno()]
        assert signals.take() == [signal.SIGUSR1, signal.SIGUSR2]
        assert signals.take() == []
        assert select.select([signals.fileno()], [], [], 0)[0] == []  # the pipe was emptied
    assert signal.getsignal(signal.SIGUSR1) == before
