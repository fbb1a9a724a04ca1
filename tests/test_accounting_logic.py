"""Pure accounting logic: TRES specs, the sacctmgr grammar and tables, limits, fair share, priority."""

from __future__ import annotations

import pytest

from spur.accounting.fairshare import ShareNode, add_usage, decayed, share_table
from spur.accounting.grammar import GrammarError, columns_for, parse, render, select
from spur.accounting.limits import Demand, LimitTable, LimitTracker
from spur.accounting.model import Limits
from spur.accounting.priority import PriorityWeights, job_factors
from spur.accounting.tres import CLEAR, TresError, format_mem, format_tres, merge_tres, parse_tres

# ----------------------------------------------------------------------------------- TRES


@pytest.mark.parametrize(
    ("spec", "parsed", "shown"),
    [
        (
            "cpu=16,mem=32768,gres/gpu=8",
            {"cpu": 16, "mem": 32768, "gres/gpu": 8},
            "cpu=16,gres/gpu=8,mem=32G",
        ),
        ("mem=32G", {"mem": 32768}, "mem=32G"),
        ("mem=1000", {"mem": 1000}, "mem=1000M"),
        ("mem=2T", {"mem": 2 * 1024 * 1024}, "mem=2T"),
        ("mem=1536K", {"mem": 2}, "mem=2M"),
        ("CPU=4, node=2", {"cpu": 4, "node": 2}, "cpu=4,node=2"),
        ("gpu=2", {"gres/gpu": 2}, "gres/gpu=2"),
        ("billing=100,fs/disk=1G", {"billing": 100, "fs/disk": 1024}, "billing=100,fs/disk=1G"),
        ("", {}, ""),
        ("cpu=-1", {"cpu": CLEAR}, ""),
    ],
)
def test_tres_specs_parse_and_show_as_slurm_prints_them(spec: str, parsed: dict, shown: str) -> None:
    assert parse_tres(spec) == parsed
    assert format_tres(parsed) == shown


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("cpu=abc", "Invalid count 'abc' for TRES 'cpu': expected a whole number"),
        ("mem=lots", "Invalid count 'lots' for TRES 'mem'"),
        ("cpu=1.5", "Invalid count '1.5'"),
        ("frob=2", "Invalid TRES name 'frob'"),
        ("cpu", "expected name=count"),
        ("cpu=1,cpu=2", "TRES 'cpu' is given twice"),
    ],
)
def test_bad_tres_specs_are_refused_with_one_clear_message(spec: str, message: str) -> None:
    with pytest.raises(TresError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_tres(spec)


def test_merging_sets_and_clears() -> None:
    assert merge_tres({"cpu": 4, "mem": 10}, {"cpu": CLEAR, "node": 2}) == {"mem": 10, "node": 2}
    assert format_mem(0) == "0" and format_mem(1024 * 1024 * 1024) == "1P"


# ----------------------------------------------------------------------------------- grammar


def test_grammar_reads_options_anywhere_and_names_before_set() -> None:
    req = parse(["-i", "modify", "account", "physics", "set", "GrpTRES=cpu=-1"])
    assert (req.op, req.entity, req.where, req.values, req.immediate) == (
        "modify",
        "account",
        {"name": "physics"},
        {"grptres": "cpu=-1"},
        True,
    )
    req = parse(["show", "user", "-s", "alice", "format=user,account%20,adminlevel", "-P"])
    assert (req.entity, req.names, req.with_assoc, req.parsable) == ("user", ["alice"], True, 2)
    assert [(c.key, c.width) for c in req.format] == [("user", 10), ("account", 20), ("admin", 9)]
    req = parse(["list", "assoc", "tree", "where", "account=physics", "format=account,user"])
    assert req.tree and req.where == {"account": "physics"} and req.entity == "association"
    req = parse(["add", "user", "alice", "Account=physics", "AdminLevel=Administrator"])
    assert req.names == ["alice"] and req.values == {"account": "physics", "adminlevel": "Administrator"}


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["show", "frobnicate"], "No valid entity in list command"),
        (["add", "tres"], "No valid entity in add command"),
        (["frob", "account"], "Invalid keyword: frob"),
        (["show", "account", "format=bogus"], "Unknown field 'bogus'"),
        (["show", "account", "format=account%x"], "Invalid width"),
        (["modify", "account", "physics"], "You didn't give me anything to set"),
        (["delete", "account"], "No conditions given"),
        (["-z", "show", "account"], "invalid option -- 'z'"),
        ([], "no command given"),
    ],
)
def test_grammar_errors(argv: list[str], message: str) -> None:
    with pytest.raises(GrammarError, match=message):
        parse(argv)


def test_render_truncates_with_plus_and_prints_parsable_forms() -> None:
    req = parse(["show", "user", "format=user,admin,account%-12"])
    rows = [{"user": "alice", "admin": "Administrator", "account": "a-very-long-account"}]
    assert render(rows, columns_for(req)) == [
        "      User     Admin Account      ",
        "---------- --------- ------------ ",
        "     alice Administ+ a-very-long+ ",
    ]
    assert render(rows, columns_for(req), parsable=2) == [
        "User|Admin|Account",
        "alice|Administrator|a-very-long-account",
    ]
    assert render(rows, columns_for(req), parsable=1, noheader=True) == [
        "alice|Administrator|a-very-long-account|"
    ]


def test_tree_indents_accounts_in_a_left_justified_column() -> None:
    req = parse(["show", "assoc", "tree", "format=account,user"])
    rows = [
        {"account": "root", "user": "", "depth": "0"},
        {"account": "physics", "user": "alice", "depth": "2"},
    ]
    assert render(rows, columns_for(req), tree=True) == [
        "Account                    User ",
        "-------------------- ---------- ",
        "root                            ",
        "  physics                 alice ",
    ]


def test_select_matches_names_and_where_clauses_case_insensitively() -> None:
    rows = [
        {"account": "physics", "user": ""},
        {"account": "physics", "user": "alice"},
        {"account": "bio", "user": ""},
    ]
    assert select(rows, parse(["show", "assoc", "where", "account=PHYSICS,bio", "user="])) == [
        rows[0],
        rows[2],
    ]
    assert select(rows, parse(["show", "assoc", "where", "user=alice"])) == [rows[1]]
    with pytest.raises(GrammarError, match="Unknown condition: frob"):
        select(rows, parse(["show", "assoc", "where", "frob=1"]))


# ----------------------------------------------------------------------------------- limits


def _tracker(**limits: Limits) -> LimitTracker:
    parents = {
        "root": "",
        "physics": "root",
        "theory": "physics",
        "alice@theory": "theory",
        "bob@physics": "physics",
    }
    return LimitTracker(
        LimitTable(
            {k.replace("_at_", "@"): v for k, v in limits.items()}.get,
            lambda key: parents.get(key, ""),
            {"normal": Limits(), "capped": Limits(grp_tres={"gres/gpu": 2}, max_wall=3600)},
        )
    )


def test_group_limits_of_every_level_count_the_whole_subtree() -> None:
    tracker = _tracker(physics=Limits(grp_tres={"cpu": 8}))
    four = Demand(cpus=4, mem_mb=0, nodes=1, gpus=0)
    assert tracker.check("alice@theory", "normal", "alice", four) == ""
    tracker.charge("alice@theory", "normal", "alice", four)
    tracker.charge("bob@physics", "normal", "bob", four)
    assert tracker.check("alice@theory", "normal", "alice", Demand(1, 0, 1, 0)) == "AssocGrpCpuLimit"


@pytest.mark.parametrize(
    ("limits", "demand", "reason"),
    [
        (Limits(grp_tres={"mem": 1000}), Demand(1, 2000, 1, 0), "AssocGrpMemLimit"),
        (Limits(grp_tres={"node": 1}), Demand(1, 0, 2, 0), "AssocGrpNodeLimit"),
        (Limits(grp_tres={"gres/gpu": 1}), Demand(1, 0, 1, 2), "AssocGrpGRES"),
        (Limits(grp_tres={"billing": 1}), Demand(2, 0, 1, 0), "AssocGrpBilling"),
        (Limits(grp_jobs=0), Demand(1, 0, 1, 0), "AssocGrpJobsLimit"),
        (Limits(max_jobs=0), Demand(1, 0, 1, 0), "AssocMaxJobsLimit"),
        (Limits(max_wall=60), Demand(1, 0, 1, 0, wall_secs=120), "AssocMaxWallDurationPerJobLimit"),
        (Limits(max_wall=60), Demand(1, 0, 1, 0, wall_secs=-1), "AssocMaxWallDurationPerJobLimit"),
        (Limits(max_tres_per_job={"cpu": 2}), Demand(3, 0, 1, 0), "AssocMaxCpuPerJobLimit"),
        (Limits(max_wall=60), Demand(1, 0, 1, 0, wall_secs=60), ""),
    ],
)
def test_each_limit_has_slurms_pending_reason(limits: Limits, demand: Demand, reason: str) -> None:
    assert _tracker(theory=limits).check("alice@theory", "normal", "alice", demand) == reason


def test_max_limits_are_inherited_and_the_nearest_level_wins() -> None:
    tracker = _tracker(physics=Limits(max_jobs=1), theory=Limits(max_jobs=2))
    one = Demand(1, 0, 1, 0)
    tracker.charge("alice@theory", "normal", "alice", one)
    assert tracker.check("alice@theory", "normal", "alice", one) == ""  # theory's 2 applies
    tracker.charge("bob@physics", "normal", "bob", one)
    assert tracker.check("bob@physics", "normal", "bob", one) == "AssocMaxJobsLimit"  # physics's 1


def test_qos_limits() -> None:
    tracker = _tracker()
    assert tracker.check("alice@theory", "capped", "alice", Demand(1, 0, 1, 3, 60)) == "QOSGrpGRES"
    assert (
        tracker.check("alice@theory", "capped", "alice", Demand(1, 0, 1, 0, 7200))
        == "QOSMaxWallDurationPerJobLimit"
    )
    tracker.charge("alice@theory", "capped", "alice", Demand(1, 0, 1, 2, 60))
    assert tracker.check("bob@physics", "capped", "bob", Demand(1, 0, 1, 1, 60)) == "QOSGrpGRES"


# ----------------------------------------------------------------------------------- fair share


def test_usage_decays_with_the_half_life_whatever_the_order_of_records() -> None:
    week = 7 * 86400.0
    assert decayed(100.0, 0.0, week, week) == pytest.approx(50.0)
    assert decayed(100.0, 10.0, 5.0, week) == 100.0  # never backwards
    a = add_usage(*add_usage(0.0, 0.0, 100.0, 0.0, week), 100.0, week, week)
    b = add_usage(*add_usage(0.0, 0.0, 100.0, week, week), 100.0, 0.0, week)
    assert a[0] == pytest.approx(b[0]) == pytest.approx(150.0) and a[1] == b[1] == week


def test_fair_share_factor_is_half_at_exactly_the_share() -> None:
    nodes = [
        ShareNode("root", "", 1, 0.0),
        ShareNode("a", "root", 1, 0.0),
        ShareNode("b", "root", 1, 0.0),
        ShareNode("a/u", "a", 1, 50.0),
        ShareNode("b/v", "b", 1, 50.0),
    ]
    table = share_table(nodes)
    assert table["a"].norm_shares == 0.5 and table["a"].raw_usage == 50.0
    assert table["a/u"].fairshare == pytest.approx(0.5)
    idle = share_table([*nodes[:3], ShareNode("a/u", "a", 1, 100.0), ShareNode("b/v", "b", 1, 0.0)])
    assert idle["b/v"].fairshare == 1.0 and idle["a/u"].fairshare == pytest.approx(0.25)


# ----------------------------------------------------------------------------------- priority


def test_multifactor_priority_weights_each_factor() -> None:
    w = PriorityWeights(age=1000, fairshare=10000, job_size=100, partition=10, qos=2000, max_age_secs=1000)
    f = job_factors(
        eligible_time=0,
        now=500,
        max_age_secs=1000,
        fairshare=0.5,
        cpus=4,
        cluster_cpus=16,
        qos_priority=50,
        max_qos_priority=100,
        nice=10,
    )
    assert f.weighted(w) == {"age": 500, "fairshare": 5000, "job_size": 25, "partition": 10, "qos": 1000}
    assert f.priority(w) == 6525
    old = job_factors(
        eligible_time=0,
        now=10**6,
        max_age_secs=1000,
        fairshare=0,
        cpus=0,
        cluster_cpus=0,
        qos_priority=0,
        max_qos_priority=0,
    )
    assert old.age == 1.0 and old.priority(w) == 1010
    assert not PriorityWeights().active


def test_per_job_limits_merge_down_the_tree_nearest_first() -> None:
    tracker = _tracker(
        physics=Limits(max_tres_per_job={"cpu": 8, "node": 1}), theory=Limits(max_tres_per_job={"cpu": 2})
    )
    assert tracker.check("alice@theory", "normal", "alice", Demand(3, 0, 1, 0)) == "AssocMaxCpuPerJobLimit"
    assert tracker.check("alice@theory", "normal", "alice", Demand(2, 0, 2, 0)) == "AssocMaxNodePerJobLimit"
    assert tracker.check("bob@physics", "normal", "bob", Demand(8, 0, 1, 0)) == ""


def test_a_loop_in_the_tree_is_cut_not_followed_forever() -> None:
    table = LimitTable({"a": Limits(grp_jobs=0)}.get, {"a": "b", "b": "a"}.get, {})
    assert LimitTracker(table).check("a", "", "u", Demand(1, 0, 1, 0)) == "AssocGrpJobsLimit"
