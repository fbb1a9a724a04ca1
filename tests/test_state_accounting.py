"""The replicated accounting domain: applies, refusals that change nothing, submit checks, usage."""

from __future__ import annotations

import copy

import pytest

from spur.core.job import JobSpec, JobState, Node, NodeAllocation
from spur.state import commands as c
from spur.state.accounting import AcctAdd, AcctDelete, AcctModify, ConfigureAccounting
from spur.state.machine import ClusterState, Rejected


def _state(enforce: list[str] | None = None) -> ClusterState:
    state = ClusterState()
    state.apply_command(ConfigureAccounting("anchor", enforce or [], 7 * 86400.0))
    return state


def _ok(state: ClusterState, cmd) -> list[str]:
    result = state.apply_command(cmd)
    assert not isinstance(result, Rejected), result
    return result


def _domain_snapshot(state: ClusterState) -> dict:
    return copy.deepcopy(state.domains["accounting"].snapshot())


def test_commands_round_trip_through_the_log_codec() -> None:
    cmd = AcctModify("account", {"name": "physics"}, {"grptres": "cpu=16"})
    assert c.decode(c.encode(cmd)) == cmd


def test_adding_accounts_and_users_prints_what_slurm_prints() -> None:
    state = _state()
    lines = _ok(
        state, AcctAdd("account", ["physics"], {"description": "physics dept", "organization": "science"})
    )
    assert lines == [
        " Adding Account(s)",
        "  physics",
        " Settings",
        "  Description     = physics dept",
        "  Organization    = science",
        " Associations",
        "  A = physics    C = anchor    ",
        " Settings",
        "  Parent        = root",
    ]
    assert _ok(state, AcctAdd("user", ["alice"], {"account": "physics"}))[-2:] == [
        "  U = alice     A = physics    C = anchor    ",
        " Non Default Settings",
    ]
    assert state.domains["accounting"].users["alice"].default_account == "physics"


@pytest.mark.parametrize(
    ("cmd", "message"),
    [
        (AcctAdd("account", ["physics"], {}), " Nothing new added."),
        (AcctAdd("account", ["x"], {"parent": "nosuch"}), " Parent account 'nosuch' doesn't exist."),
        (AcctAdd("account", ["x"], {"grptres": "cpu=abc"}), "Invalid count 'abc'"),
        (AcctAdd("user", ["bob"], {}), " Need name of account to add user to."),
        (AcctAdd("user", ["bob"], {"account": "nosuch"}), " This account 'nosuch' doesn't exist."),
        (AcctAdd("user", ["bob"], {"account": "physics", "adminlevel": "god"}), "Invalid AdminLevel 'god'"),
        (AcctModify("account", {"name": "nosuch"}, {"grptres": "cpu=1"}), " Nothing modified"),
        (AcctModify("account", {"name": "physics"}, {"parent": "theory"}), "would make a loop"),
        (AcctModify("account", {"name": "physics"}, {"frob": "1"}), " Unknown option: frob"),
        (
            AcctModify("user", {"name": "alice"}, {"defaultaccount": "root"}),
            "has no association with account",
        ),
        (AcctDelete("account", {"name": "physics"}), "still has account theory, user alice"),
        (AcctDelete("account", {"name": "root"}), "root account can not be deleted"),
        (AcctDelete("account", {"name": "nosuch"}), " Nothing deleted"),
        (AcctModify("qos", {"name": "low"}, {"preempt": "high"}), "preemption loop (low -> high -> low)"),
        (AcctModify("qos", {"name": "high"}, {"preempt": "high"}), "preemption loop (high -> high)"),
        (AcctDelete("qos", {"name": "normal"}), "normal QOS can not be deleted"),
        (AcctModify("qos", {"name": "high"}, {"usagefactor": "nan"}), "Invalid value 'nan' for UsageFactor"),
        (AcctAdd("account", [""], {}), "Invalid name ''"),
        (AcctAdd("user", ["a b"], {"account": "physics"}), "Invalid name 'a b'"),
        (AcctAdd("qos", ["x|y"], {}), "Invalid name 'x|y'"),
    ],
)
def test_refusals_change_nothing(cmd, message: str) -> None:
    state = _state()
    _ok(state, AcctAdd("account", ["physics"], {}))
    _ok(state, AcctAdd("account", ["theory"], {"parent": "physics"}))
    _ok(state, AcctAdd("user", ["alice"], {"account": "physics"}))
    _ok(state, AcctAdd("qos", ["low"], {}))
    _ok(state, AcctAdd("qos", ["high"], {"preempt": "low"}))
    before = _domain_snapshot(state)
    result = state.apply_command(cmd)
    assert isinstance(result, Rejected)
    assert message in result.message
    assert _domain_snapshot(state) == before


def test_limits_set_clear_and_show() -> None:
    state = _state()
    acct = state.domains["accounting"]
    _ok(state, AcctAdd("account", ["myaccount"], {}))
    _ok(
        state,
        AcctModify(
            "account", {"name": "myaccount"}, {"grptres": "cpu=16,mem=32768,gres/gpu=8", "maxjobs": "4"}
        ),
    )
    rows = [r for r in acct.records("association") if r["account"] == "myaccount"]
    assert (rows[0]["grptres"], rows[0]["maxjobs"]) == ("cpu=16,gres/gpu=8,mem=32G", "4")
    _ok(state, AcctModify("account", {"name": "myaccount"}, {"grptres": "cpu=-1", "maxjobs": "-1"}))
    rows = [r for r in acct.records("association") if r["account"] == "myaccount"]
    assert (rows[0]["grptres"], rows[0]["maxjobs"]) == ("gres/gpu=8,mem=32G", "")


def test_snapshot_restores_the_same_domain() -> None:
    state = _state(["limits"])
    _ok(state, AcctAdd("account", ["physics"], {"grpjobs": "3"}))
    _ok(state, AcctAdd("user", ["alice"], {"account": "physics", "adminlevel": "Operator"}))
    _ok(state, AcctAdd("qos", ["high"], {"priority": "10", "maxwall": "1:00:00"}))
    again = ClusterState()
    again.restore(state.snapshot())
    assert again.domains["accounting"].snapshot() == state.domains["accounting"].snapshot()
    assert again.domains["accounting"].admin_level("alice") == "Operator"


def _submit(state: ClusterState, user: str = "alice", **spec) -> object:
    return state.apply_command(
        c.SubmitJob(JobSpec(script="#!/bin/sh\n", work_dir="/tmp", **spec), user, 1000, 1000, "g", 100.0)
    )


def test_submit_is_checked_only_when_enforced() -> None:
    state = _state()
    assert _submit(state, account="anything") == 1  # nothing enforced: any account goes


def test_enforced_submit_fills_defaults_and_refuses_unknown_pairs_and_qos() -> None:
    state = _state(["associations", "limits", "qos"])
    _ok(state, AcctAdd("account", ["physics"], {}))
    _ok(state, AcctAdd("user", ["alice"], {"account": "physics", "maxsubmitjobs": "2"}))
    job_id = _submit(state)
    job = state.jobs[job_id]
    assert (job.spec.account, job.spec.qos) == ("physics", "normal")
    assert _submit(state, user="mallory") == Rejected(
        "INVALID_ARGUMENT", "Invalid account or account/partition combination specified"
    )
    assert _submit(state, account="root").message.startswith("Invalid account")
    assert _submit(state, qos="nosuch").message == "Invalid qos specification"
    next_id = state.next_job_id
    refused = _submit(state, array="0-1")  # two more would make three
    assert "job submit limit" in refused.message and state.next_job_id == next_id
    assert isinstance(_submit(state), int)
    assert "job submit limit" in _submit(state).message
    state.apply_command(c.CancelJob(job_id, 0, 200.0))
    assert isinstance(_submit(state), int)  # a finished job no longer counts


def test_finished_jobs_add_decayed_usage_to_their_association() -> None:
    state = _state()
    _ok(state, AcctAdd("account", ["physics"], {}))
    _ok(state, AcctAdd("user", ["alice"], {"account": "physics"}))
    state.apply_command(c.RegisterNode(Node("n1", cpus=4), 0.0))
    job_id = _submit(state, account="physics")
    state.apply_command(c.StartJob(job_id, [NodeAllocation("n1", 4)], 1000.0, 1))
    state.apply_command(c.JobExited(job_id, "n1", 0, 0, 1100.0))
    assert state.jobs[job_id].state is JobState.COMPLETED
    acct = state.domains["accounting"]
    assoc = acct.assoc_for("physics", "alice")
    assert (assoc.usage, assoc.usage_time) == (400.0, 1100.0)
    rows = dict((a.key, r) for a, r in acct.share_rows(1100.0 + 7 * 86400))
    assert rows["physics||"].raw_usage == pytest.approx(200.0)
    assert rows["physics|alice|"].fairshare < 1.0


def test_scheduler_priorities_agree_with_sprio_factors() -> None:
    from spur.accounting.priority import PriorityWeights

    state = _state(["associations"])
    _ok(state, AcctAdd("account", ["physics"], {}))
    _ok(state, AcctAdd("account", ["bio"], {}))
    _ok(state, AcctAdd("user", ["alice"], {"account": "physics"}))
    _ok(state, AcctAdd("user", ["bob"], {"account": "bio"}))
    _ok(state, AcctAdd("qos", ["high"], {"priority": "10"}))
    state.apply_command(c.RegisterNode(Node("n1", cpus=8), 0.0))
    done = _submit(state, account="physics")
    state.apply_command(c.StartJob(done, [NodeAllocation("n1", 8)], 1000.0, 1))
    state.apply_command(c.JobExited(done, "n1", 0, 0, 5000.0))
    jobs = [state.jobs[_submit(state, **kw)] for kw in ({}, {"qos": "high", "nice": 5})]
    jobs.append(state.jobs[_submit(state, user="bob", cpus_per_task=4)])
    acct = state.domains["accounting"]
    w = PriorityWeights(age=1000, fairshare=10000, job_size=500, partition=10, qos=2000, max_age_secs=3600)
    factors = acct.job_factors(jobs, w, 3000.0)
    assert acct.priorities(jobs, w, 3000.0) == {j: f.priority(w) for j, f in factors.items()}
    by_id = {j.job_id: j for j in jobs}
    bob = next(j for j in jobs if j.user == "bob")
    assert factors[bob.job_id].fairshare == 1.0  # no usage yet
    assert max(factors, key=lambda i: factors[i].priority(w)) == bob.job_id
    assert by_id and acct.priorities(jobs, PriorityWeights(), 3000.0) == {}
