"""A leader applies the hot commands as proposed, without decoding its own entry.

``ClusterState.apply`` takes the proposer's object for the ``APPLIED_AS_PROPOSED`` types; a follower
and a replay decode the same entry. Both must end in the same state, so those objects must be
exactly what decoding gives (``first_difference``), which ``verify_proposed`` checks entry by entry.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

import pytest

from spur.core.job import JobState, Node, NodeAllocation, Partition
from spur.core.job_options import build_job_spec, parse_job_options
from spur.core.serde import first_difference
from spur.rpc import convert
from spur.rpc.proto import spur_pb2 as pb
from spur.state import commands as c
from spur.state.machine import ClusterState, ProposedMismatch

# --------------------------------------------------------------------------- first_difference


class _Color(enum.Enum):
    RED = "red"


@dataclass
class _Leaf:
    n: int = 0
    tags: list[str] = field(default_factory=list)


@dataclass
class _Tree:
    leaf: _Leaf
    env: dict[str, str] = field(default_factory=dict)
    when: float = 0.0


def test_first_difference_names_where_two_trees_part() -> None:
    tree = _Tree(_Leaf(1, ["a", "b"]), {"X": "1"}, 2.5)
    assert first_difference(tree, _Tree(_Leaf(1, ["a", "b"]), {"X": "1"}, 2.5)) is None
    assert first_difference(tree, _Tree(_Leaf(1, ["a", "c"]), {"X": "1"}, 2.5)) == ".leaf.tags[1]: 'b' vs 'c'"
    assert first_difference(tree, _Tree(_Leaf(1, ("a", "b")), {"X": "1"}, 2.5)) == ".leaf.tags: list vs tuple"  # type: ignore[arg-type]
    assert first_difference(tree, _Tree(_Leaf(1, ["a"]), {"X": "1"}, 2.5)) == ".leaf.tags: 2 items vs 1"
    assert first_difference(tree, _Tree(_Leaf(1, ["a", "b"]), {"X": "1"}, 2)) == ".when: float vs int"
    assert first_difference(tree, _Tree(_Leaf(1, ["a", "b"]), {}, 2.5)) == ".env['X']: only in the first"
    assert first_difference(_Tree(_Leaf()), _Tree(_Leaf(), {"Y": ""})) == ".env['Y']: only in the second"
    assert first_difference(_Color.RED, "red") == ".: _Color vs str"
    assert first_difference(float("nan"), float("nan")) is None
    assert first_difference([True], [1]) == "[0]: bool vs int"


# --------------------------------------------------------------------------- what the handlers build


def _specs() -> list[pb.JobSpec]:
    """Job specs as sbatch and srun send them, through the wire as the controller receives them."""
    lines = [
        [],
        ["-N2", "-n4", "--mem=2G", "-t", "1:00:00", "-J", "big", "--exclusive"],
        ["--array=1-10%2", "--gres=gpu:2", "--dependency=afterok:7", "-p", "batch", "job.sh", "arg"],
        ["--export=ALL,FOO=bar", "--begin=now+60", "--nice=5", "--hold", "-o", "out.%j"],
    ]
    specs = []
    for argv in lines:
        opts, rest = parse_job_options(argv)
        spec = build_job_spec(opts, script="#!/bin/sh\ntrue\n", argv=rest, cwd="/tmp", environ={"PATH": "/bin", "HOME": "/root"})
        wire = convert.spec_to_proto(spec).SerializeToString()
        specs.append(pb.JobSpec.FromString(wire))
    return specs


@pytest.mark.parametrize("message", _specs(), ids=["plain", "nodes", "array-gres", "export-begin"])
def test_a_submission_as_the_controller_builds_it_is_its_own_decoding(message: pb.JobSpec) -> None:
    # What ControllerService._submission proposes: a spec from the wire and a grant as a plugin gives it.
    grant = [NodeAllocation(node="n1", cpus=2, mem_mb=2000, gpus=[], tasks=1)]
    cmd = c.SubmitJob(convert.spec_from_proto(message), "alice", 1000, 1000, "alice", 1.5, grant=grant, term=3)
    assert first_difference(cmd, c.decode(c.encode(cmd))) is None


# --------------------------------------------------------------------------- apply


def _nodes_and_partitions() -> list[Any]:
    nodes = [Node(name=f"n{i}", address="127.0.0.1", cpus=4, memory_mb=8000) for i in (1, 2)]
    return [c.ConfigurePartitions([Partition("batch", is_default=True, nodes_expr="n[1-2]")])] + [
        c.RegisterNode(node, 10.0) for node in nodes
    ]


def _job_life() -> list[Any]:
    """Commands of two jobs' lives as the leader proposes them (one in a Batch, as the batcher sends)."""
    spec = convert.spec_from_proto(_specs()[0])
    grant = [NodeAllocation(node="n1", cpus=1, mem_mb=100, gpus=[], tasks=1)]
    other = convert.spec_from_proto(_specs()[3])
    return [
        c.SubmitJob(spec, "alice", 1000, 1000, "alice", 20.0, grant=grant, term=1),
        c.Batch([c.SubmitJob(other, "bob", 1001, 1001, "bob", 21.0), c.JobLaunched(1, 1)]),
        c.StepExited(1, 0, "n1", 0, 0, 22.0),
        c.JobExited(1, "n1", 3, 0, 23.0, message="exit 3"),
    ]


def _leader_and_follower(verify: bool = False) -> tuple[ClusterState, ClusterState]:
    leader, follower = ClusterState(), ClusterState()
    leader.verify_proposed = verify
    for i, cmd in enumerate(_nodes_and_partitions(), 1):
        data = c.encode(cmd)
        leader.apply(i, data, cmd)
        follower.apply(i, data)
    return leader, follower


@pytest.mark.parametrize("verify", [False, True])
def test_a_leader_applying_as_proposed_ends_where_a_follower_decoding_does(verify: bool) -> None:
    leader, follower = _leader_and_follower(verify)
    for i, cmd in enumerate(_job_life(), 4):
        data = c.encode(cmd)
        assert leader.apply(i, data, cmd) == follower.apply(i, data)
    assert leader.snapshot() == follower.snapshot()
    job = leader.jobs[1]
    assert (job.state, job.exit_code) == (JobState.FAILED, 3) and leader.jobs[2].state is JobState.PENDING


def test_the_listed_commands_are_taken_as_proposed_and_the_others_decoded() -> None:
    leader, _ = _leader_and_follower()
    submit = _job_life()[0]
    assert leader.apply(4, c.encode(submit), submit) == 1
    assert leader.jobs[1].spec is submit.spec  # no decode: the proposer's own object
    configure = c.ConfigurePartitions([Partition("other", is_default=True, nodes_expr="n2")])
    assert leader.apply(5, c.encode(configure), configure) is True
    assert leader.partitions["other"] is not configure.partitions[0]  # not listed: decoded
    mixed = c.Batch([c.JobLaunched(1, 1), configure])
    assert c.as_proposed(mixed) is None and c.as_proposed(c.Batch([c.JobLaunched(1, 1)])) is not None


def test_with_verification_a_command_unlike_its_decoding_fails_and_changes_nothing() -> None:
    leader, _ = _leader_and_follower(verify=True)
    before = leader.snapshot()
    spec = convert.spec_from_proto(_specs()[0])
    odd = c.SubmitJob(spec, "alice", 1000, 1000, "alice", 20.0, grant=(NodeAllocation("n1", 1),), term=1)  # type: ignore[arg-type]
    with pytest.raises(ProposedMismatch, match=r"entry 4: the proposed SubmitJob .* \(at \.grant: tuple vs list\)"):
        leader.apply(4, c.encode(odd), odd)
    assert leader.snapshot() == before and leader.applied_index == 3
    # Without verification the same object is applied (what production does with a faulty builder).
    leader.verify_proposed = False
    assert leader.apply(4, c.encode(odd), odd) == 1


def test_an_entry_that_does_not_decode_is_rejected_as_before() -> None:
    state = ClusterState()
    result = state.apply(1, b'{"type":"Nope","body":{}}')
    assert result.code == "INVALID_ARGUMENT" and "unknown state command 'Nope'" in result.message
    assert state.applied_index == 1
