"""Pure mapping between the Accounting service's sacctmgr rows and slurmdb records (spur.rest.acct_records)."""

from __future__ import annotations

from spur.accounting.model import Account, Association, Limits, User
from spur.rest import acct_records as ar
from spur.rest.slurmdb import AssociationFilter, TresRecord, UserRecord, association_to_json
from spur.state.accounting import AccountingDomain
from spur.state.machine import ClusterState


def _domain() -> AccountingDomain:
    return ClusterState().domains["accounting"]  # type: ignore[return-value]


def test_printed_tres_become_slurmdb_tres_entries() -> None:
    assert ar.tres_list("cpu=16,gres/gpu=8,mem=32G") == (
        TresRecord("cpu", "", 1, 16),
        TresRecord("gres", "gpu", 1001, 8),
        TresRecord("mem", "", 2, 32768),
    )
    assert ar.tres_list("") == () and ar.tres_list("bogus=1") == ()


def test_association_rows_from_the_real_domain_map_to_slurmrestd_fields() -> None:
    """Rows as the domain prints them (the same the Show RPC carries) -> slurmdb association JSON."""
    dom = _domain()
    for assoc in (
        Association(
            "physics",
            shares=5,
            limits=Limits(grp_tres={"cpu": 16, "mem": 32768}, grp_jobs=3, max_jobs=4, max_wall=86400),
        ),
        Association("physics", "alice"),
    ):
        dom.assocs[assoc.key] = assoc
    dom.accounts["physics"] = Account("physics", "Physics", "science", "root")
    dom.users["alice"] = User("alice", "physics", "None")
    rows = dom.records("association")
    users = dom.records("user")
    records = {(r.account, r.user): r for r in ar.association_records(rows, users)}
    physics = association_to_json(records[("physics", None)])
    assert physics["parent_account"] == "root" and physics["shares_raw"] == 5
    assert physics["max"]["jobs"]["per"]["count"] == 4 and physics["max"]["jobs"]["per"]["wall_clock"] == 1440
    assert physics["max"]["jobs"]["active"] == 3 and physics["max"]["jobs"]["total"] is None
    assert [(t["type"], t["count"]) for t in physics["max"]["tres"]["total"]] == [("cpu", 16), ("mem", 32768)]
    alice = association_to_json(records[("physics", "alice")])
    assert alice["is_default"] == 1 and alice["flags"] == ["DEFAULT"] and alice["qos"] == ["normal"]
    assert alice["parent_account"] is None and alice["max"]["jobs"]["per"]["count"] is None


def test_accounts_users_qos_clusters_from_rows() -> None:
    dom = _domain()
    assocs = dom.records("association")
    accounts = ar.account_records(dom.records("account"), assocs)
    assert [a.name for a in accounts] == ["root"]
    assert ("root", "spur", "", "root") in accounts[0].associations
    (root,) = ar.user_records(dom.records("user"), assocs)
    assert (root.name, root.administrator_level, root.default_account) == ("root", "Administrator", "root")
    (normal,) = ar.qos_records(dom.records("qos"))
    assert (normal.name, normal.id, normal.priority, normal.preempt_mode) == ("normal", 1, 0, ("cluster",))
    tres = ar.tres_records(dom.records("tres"))
    assert tres[0] == TresRecord("cpu", "", 1, 0)
    (cluster,) = ar.cluster_records(dom.records("cluster"))
    assert cluster.name == "spur" and cluster.rpc_version == 9728


def test_association_filter() -> None:
    row = {"cluster": "c", "account": "a", "user": "u", "partition": ""}
    assert ar.matches(row, AssociationFilter())
    assert ar.matches(row, AssociationFilter(cluster="c", account="x,a", user="u"))
    assert not ar.matches(row, AssociationFilter(user="v"))
    assert not ar.matches(row, AssociationFilter(partition="p"))
    assert not ar.matches({**row, "user": ""}, AssociationFilter(user="u"))


def test_change_values_set_only_what_the_record_sets() -> None:
    new = UserRecord(name="alice", administrator_level="", default_account="physics")
    assert ar.user_add_values(new) == {"account": "physics", "defaultaccount": "physics"}
    assert ar.user_modify_values(UserRecord(name="alice", administrator_level="")) == {}
    assert ar.user_modify_values(UserRecord(name="alice", administrator_level="Operator")) == {"adminlevel": "Operator"}


def test_the_backend_implements_every_slurmdb_entity_route() -> None:
    """So the REST app registers (and the OpenAPI document lists) every entity operation."""
    from spur.rest.accounting_backend import AccountingBackend
    from spur.rest.slurmdb import ENTITY_ROUTES

    missing = [r.backend_method for r in ENTITY_ROUTES if not callable(getattr(AccountingBackend, r.backend_method, None))]
    assert missing == []
