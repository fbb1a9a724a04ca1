"""Values of the v0.0.40/41/42 answers that integration/test_rest_vs_slurm24.py found differing from
a real slurmrestd 24.11, pinned here without a server (pure mapping)."""

from __future__ import annotations

from typing import Any

from spur.rest import v004x
from spur.rest.shape import INF
from spur.rpc.proto import spur_pb2 as pb


def _job(state: str, **spec: Any) -> pb.JobInfo:
    job = pb.JobInfo(job_id=4, user="root", uid=0, gid=0, group="root", state=state, partition="debug",
                     time_limit_secs=-1, submit_time=100, eligible_time=100)  # fmt: skip
    job.spec.work_dir = "/tmp"
    for key, value in spec.items():
        setattr(job.spec, key, value)
    if state != "PENDING":
        job.start_time, job.nodelist = 103, "vm"
        job.allocation.add(node="vm", cpus=1, mem_mb=0, tasks=1)
    if state == "COMPLETED":
        job.end_time = 104
    return job


def test_a_job_that_has_not_ended_has_exit_code_0_and_no_billing_yet() -> None:
    held = v004x.job_info(_job("PENDING", hold=True), "c", "nodes")
    assert held["exit_code"] == {"status": ["SUCCESS"], "return_code": 0, "signal": {"id": None, "name": ""}}
    assert held["derived_exit_code"]["status"] == ["SUCCESS"]
    assert held["billable_tres"] is None and held["max_nodes"] == 1
    done = v004x.job_info(_job("COMPLETED"), "c", "nodes")
    assert done["exit_code"]["status"] == ["SUCCESS"] and done["max_nodes"] == 0 and done["billable_tres"] == 1.0


def test_job_defaults_as_slurmctld_24_11_reports_them() -> None:
    d = v004x.job_info(_job("COMPLETED"), "c", "nodes")
    assert d["standard_input"] == "/dev/null" and d["thread_spec"] == 32766 and d["allocating_node"] == "localhost"
    assert d["flags"] == ["USING_DEFAULT_ACCOUNT", "USING_DEFAULT_PARTITION", "USING_DEFAULT_QOS",
                          "USING_DEFAULT_WCKEY", "PARTITION_ASSIGNED"]  # fmt: skip
    assert v004x.job_info(_job("COMPLETED", account="a", partition="p", qos="q", wckey="w"), "c", "nodes")["flags"] == []


def test_v0040_job_resources_empty_before_allocation_released_after() -> None:
    assert v004x.job_info(_job("PENDING"), "c", "allocated_nodes")["job_resources"] == {}
    res = v004x.job_info(_job("COMPLETED"), "c", "allocated_nodes")["job_resources"]
    assert res["allocated_cpus"] == 0 and res["allocated_cores"] == 1
    assert res["allocated_nodes"][0]["cpus_used"] == 0 and "index" not in res["allocated_nodes"][0]
    running = v004x.job_info(_job("RUNNING"), "c", "allocated_nodes")["job_resources"]
    # 24.11's v0.0.40 parser sends 0 there, running or not
    assert running["allocated_cpus"] == 0 and running["allocated_nodes"][0]["cpus_used"] == 0
    assert running["allocated_cores"] == 1 and running["nodes"] == "vm"
    assert v004x.job_info(_job("RUNNING"), "c", "nodes")["job_resources"] is None  # v0.0.41/42: left out


def test_job_state_entries_carry_the_state() -> None:
    assert v004x.job_state_entry(_job("PENDING")) == {"job_id": 4, "state": ["PENDING"]}


def test_partition_default_time_unset_and_configured_tres() -> None:
    part = pb.PartitionInfo(name="debug", nodes=["vm"], is_default=True, max_time_secs=-1, default_time_secs=-1)
    d = v004x.partition(part, {"vm": 2}, "c", {"vm": 2000})
    assert d["defaults"]["time"] is None and d["maximums"]["time"] is INF
    assert d["tres"]["configured"] == "cpu=2,mem=2000M,node=1,billing=2"
    assert d["defaults"]["partition_memory_per_node"] == 0


def test_db_job_output_names_and_flags() -> None:
    d = v004x.db_job(_job("COMPLETED"), "c", 200)
    assert d["stdout"] == "/tmp/slurm-%j.out" and d["stdout_expanded"] == "/tmp/slurm-4.out"
    assert d["stderr_expanded"] == "" and d["flags"] == ["STARTED_ON_SCHEDULE", "START_RECEIVED"]
    assert d["time"]["planned"] == 3 and d["association"]["partition"] == ""


def _assoc(account: str, user: str | None = None, parent: str | None = None) -> dict[str, Any]:
    return {"account": account, "cluster": "c", "user": user, "parent_account": parent, "partition": None,
            "default": {"qos": None}, "max": {"jobs": {"per": {"count": 5}}}, "min": {}, "priority": None,
            "is_default": 1, "qos": ["normal"], "shares_raw": 1, "usage": None, "flags": []}  # fmt: skip


def test_associations_unset_limits_are_infinite_and_have_a_lineage() -> None:
    items = [_assoc("root"), _assoc("physics", parent="root"), _assoc("physics", "alice"), _assoc("root", "root")]
    out = v004x.entities("associations", items, {}, "v0.0.42")
    assert [a["lineage"] for a in out] == ["/", "/physics/", "/physics/0-alice/", "/0-root/"]
    first = out[0]
    assert first["max"]["jobs"]["per"]["count"] == 5 and first["max"]["jobs"]["per"]["submitted"] is INF
    assert first["priority"] is INF and first["min"]["priority_threshold"] is INF
    assert first["parent_account"] == "" and first["partition"] == "" and first["default"] == {"qos": ""}
    assert first["id"] == 0 and "usage" not in first and first["is_default"] is True
    # slurmdbd marks every account's own association but root's as a default one
    plain = [dict(a, is_default=0) for a in items]
    assert [a["is_default"] for a in v004x.entities("associations", plain, {})] == [False, True, False, False]
    v40 = v004x.entities("associations", items[:1], {}, "v0.0.40")[0]
    assert v40["id"] == {"account": "root", "cluster": "c", "partition": "", "user": "", "id": 0}


def test_accounts_and_users_list_associations_only_when_asked() -> None:
    account = {"name": "root", "associations": [{"account": "root", "cluster": "c", "partition": None, "user": None}]}
    assert v004x.entities("accounts", [account], {})[0]["associations"] == []
    listed = v004x.entities("accounts", [account], {"WithAssociations": "true"})[0]["associations"]
    assert listed == [{"account": "root", "cluster": "c", "partition": "", "user": "", "id": 0}]
    user = {"name": "root", "flags": [], "associations": account["associations"]}
    out = v004x.entities("users", [user], {"with_assocs": ""})[0]
    assert out["flags"] == ["NONE"] and out["old_name"] == "" and out["wckeys"] == [] and len(out["associations"]) == 1
    assert v004x.entities("users", [user], {"with_assocs": "false"})[0]["associations"] == []


def test_qos_unset_limits_are_infinite_and_preempt_mode_off_is_disabled() -> None:
    qos = {"id": "1", "name": "normal", "limits": {"factor": None, "max": {"jobs": {}}, "min": {}},
           "preempt": {"list": [], "mode": ["cluster"], "exempt_time": None}, "usage_threshold": None}  # fmt: skip
    out = v004x.entities("qos", [qos], {})[0]
    assert out["id"] == 1 and out["preempt"]["mode"] == ["DISABLED"] and out["preempt"]["exempt_time"] is INF
    assert out["limits"]["max"]["active_jobs"] == {"accruing": INF, "count": INF}
    assert out["limits"]["grace_time"] == 0 and out["limits"]["max"]["tres"]["total"] == []


def test_db_job_lists_the_batch_step_of_a_started_batch_job() -> None:
    steps = v004x.db_job(_job("COMPLETED"), "c", 200)["steps"]
    assert [s["step"] for s in steps] == [{"id": "4.batch", "name": "batch"}]
    batch = steps[0]
    assert batch["state"] == ["COMPLETED"] and batch["nodes"] == {"count": 1, "range": "vm", "list": ["vm"]}
    assert batch["time"]["elapsed"] == 1 and batch["exit_code"]["status"] == ["SUCCESS"]
    cancelled = _job("CANCELLED")
    cancelled.signal = 15
    assert v004x.db_job(cancelled, "c", 200)["steps"][0]["state"] == ["CANCELLED"]
    assert v004x.db_job(_job("PENDING"), "c", 200)["steps"] == []
    assert v004x.db_job(_job("COMPLETED", interactive=True), "c", 200)["steps"] == []


def test_a_cluster_lists_its_nodes_and_their_tres() -> None:
    cluster = {"name": "c", "nodes": "", "tres": [], "associations": {"root": {"account": "root", "cluster": "c"}}}
    nodes = [pb.NodeInfo(name=f"n{i}", cpus=4, memory_mb=1000) for i in (1, 2)]
    out = v004x.entities("clusters", [cluster], {}, "v0.0.42", nodes)[0]
    assert out["nodes"] == "n[1-2]" and out["rpc_version"] == 10752
    counts = {(t["type"], t["name"]): t["count"] for t in out["tres"]}
    assert counts == {("cpu", ""): 8, ("mem", ""): 2000, ("energy", ""): 0, ("node", ""): 2, ("billing", ""): 8,
                      ("fs", "disk"): 0, ("vmem", ""): 0, ("pages", ""): 0}  # fmt: skip
    nodes[0].gpus.add(index=0)
    gpu = v004x.entities("clusters", [cluster], {}, "v0.0.42", nodes)[0]["tres"][-1]
    assert (gpu["type"], gpu["name"], gpu["count"]) == ("gres", "gpu", 1)
    assert out["associations"]["root"] == {"account": "root", "cluster": "c", "partition": "", "user": "", "id": 1}


def test_a_running_job_in_slurmdb_has_exit_code_0_and_its_batch_step_no_end_yet() -> None:
    d = v004x.db_job(_job("RUNNING"), "c", 200)
    assert d["exit_code"]["status"] == ["SUCCESS"] and d["exit_code"]["return_code"] == 0
    batch = d["steps"][0]
    assert batch["exit_code"]["status"] == ["SUCCESS"] and batch["time"]["end"] == 0
    assert batch["state"] == ["RUNNING"] and batch["time"]["elapsed"] == 97


def test_node_tres_used_names_memory_only_when_some_is_in_use() -> None:
    n = pb.NodeInfo(name="vm", cpus=2, memory_mb=100, alloc_cpus=1, state="mixed")
    assert v004x.node(n, "c")["tres_used"] == "cpu=1"
    n.alloc_mem_mb = 50
    assert v004x.node(n, "c")["tres_used"] == "cpu=1,mem=50M"
    assert v004x.node(pb.NodeInfo(name="vm", cpus=2), "c")["tres_used"] == ""
