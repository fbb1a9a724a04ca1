"""ClusterState composes state domains: command routing, snapshots, job-finished notifications."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from spur.state import commands as c
from spur.state import domains as domains_mod
from spur.state.domain import StateDomain
from spur.state.machine import ClusterState, Rejected
from tests.state_helpers import spec


@dataclass
class AddTally:
    key: str
    amount: int


class TallyDomain(StateDomain):
    """A small domain: named counters, plus the ids of jobs it saw finish."""

    name = "tally"
    commands = (AddTally,)

    def __init__(self, state: ClusterState) -> None:
        super().__init__(state)
        self.counts: dict[str, int] = {}
        self.finished: list[int] = []

    def _apply_AddTally(self, cmd: AddTally) -> Any:
        if cmd.amount < 0:
            return Rejected("INVALID_ARGUMENT", "amount must not be negative")
        self.counts[cmd.key] = self.counts.get(cmd.key, 0) + cmd.amount
        return self.counts[cmd.key]

    def snapshot(self) -> Any:
        return {"counts": self.counts, "finished": self.finished}

    def restore(self, body: Any | None) -> None:
        body = body or {}
        self.counts = dict(body.get("counts", {}))
        self.finished = list(body.get("finished", []))

    def on_job_finished(self, job) -> None:
        self.finished.append(job.job_id)


@pytest.fixture
def with_tally(monkeypatch):
    monkeypatch.setattr(domains_mod, "DOMAINS", [TallyDomain])
    monkeypatch.setattr(c, "_REGISTRY", None)
    yield
    c._REGISTRY = None


def _apply(state: ClusterState, cmd: Any) -> Any:
    state.applied_index += 1
    return state.apply(state.applied_index, c.encode(cmd))


def test_domain_commands_go_through_the_log_codec_and_reach_their_domain(with_tally) -> None:
    state = ClusterState()
    assert _apply(state, AddTally("a", 2)) == 2
    assert _apply(state, AddTally("a", 3)) == 5
    assert isinstance(_apply(state, AddTally("a", -1)), Rejected)
    assert state.domains["tally"].counts == {"a": 5}


def test_domain_data_survives_snapshot_and_restore(with_tally) -> None:
    state = ClusterState()
    _apply(state, AddTally("x", 7))
    fresh = ClusterState()
    fresh.restore(state.snapshot())
    assert fresh.domains["tally"].counts == {"x": 7}


def test_a_snapshot_from_before_the_domain_existed_restores_it_empty(monkeypatch) -> None:
    monkeypatch.setattr(domains_mod, "DOMAINS", [])
    monkeypatch.setattr(c, "_REGISTRY", None)
    old = ClusterState().snapshot()
    monkeypatch.setattr(domains_mod, "DOMAINS", [TallyDomain])
    monkeypatch.setattr(c, "_REGISTRY", None)
    fresh = ClusterState()
    fresh.restore(old)
    assert fresh.domains["tally"].counts == {}


def test_domains_hear_of_every_job_that_finishes(with_tally) -> None:
    state = ClusterState()
    job_id = _apply(state, c.SubmitJob(spec(), "alice", 1000, 1000, "alice", 1.0))
    _apply(state, c.CancelJob(job_id, 0, 10.0))
    assert state.domains["tally"].finished == [job_id]


def test_a_command_name_declared_twice_is_refused(monkeypatch) -> None:
    @dataclass
    class SubmitJob:  # clashes with the core command of that name
        x: int

    class Clash(StateDomain):
        name = "clash"
        commands = (SubmitJob,)

    monkeypatch.setattr(domains_mod, "DOMAINS", [Clash])
    monkeypatch.setattr(c, "_REGISTRY", None)
    with pytest.raises(TypeError, match="declared twice"):
        c.registry()
    c._REGISTRY = None


def test_the_cluster_id_is_set_once_and_kept_through_snapshots() -> None:
    state = ClusterState()
    assert state.cluster_id == ""
    assert _apply(state, c.InitClusterId("aaaa")) == "aaaa"
    assert _apply(state, c.InitClusterId("bbbb")) == "aaaa"
    assert isinstance(_apply(state, c.InitClusterId("")), Rejected)
    fresh = ClusterState()
    fresh.restore(state.snapshot())
    assert fresh.cluster_id == "aaaa"
