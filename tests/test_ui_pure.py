"""The dashboard's pure pieces: SVG charts, samples, job filters, reason texts, sessions and CSRF."""

from __future__ import annotations

import re

import pytest

from spur.cli.web import can_open_browser, link_for
from spur.rpc.proto import spur_pb2 as pb
from spur.ui.charts import Series, format_value, line_chart, nice_ceiling
from spur.ui.queue import FilterError, QueueJob, page_of, parse_filter, select_rows
from spur.ui.reasons import explain_reason
from spur.ui.samples import JobTimes, NodeLoad, Sample, SampleRing, take_sample
from spur.ui.sessions import LinkLedger, SessionStore, csrf_ok, session_cookie


# ---------------------------------------------------------------- charts
def test_nice_ceiling_rounds_up_to_1_2_2_5_5() -> None:
    assert [nice_ceiling(v) for v in (0, 1, 3, 7, 12, 21, 240, 0.3)] == [1, 1, 5, 10, 20, 25, 250, 0.5]


def test_line_chart_maps_values_to_coordinates_and_labels_the_last_value() -> None:
    svg = line_chart("CPUs", [Series("allocated", ((0, 0.0), (50, 5.0), (100, 10.0)))], start=0, end=100,
                     width=144, height=142)  # fmt: skip
    # plot area: x 44..136 (92 wide), y 8..108 (100 high); y_max 10
    path = re.search(r'<path class="line s1" d="([^"]+)" data-series="allocated" data-last="10"', svg)
    assert path is not None
    assert path.group(1) == "M44.0,108.0 L90.0,58.0 L136.0,8.0"
    assert "allocated: 10" in svg and 'aria-label="CPUs"' in svg


def test_line_chart_escapes_text_and_shows_missing_data() -> None:
    svg = line_chart("<script>", [Series("a&b", ())], start=0, end=60)
    assert "<script>" not in svg and "&lt;script&gt;" in svg
    assert "a&amp;b: no data" in svg and "<path" not in svg


def test_line_chart_refuses_an_empty_window() -> None:
    with pytest.raises(ValueError, match="end > start"):
        line_chart("x", [], start=10, end=10)


def test_format_value() -> None:
    assert (format_value(3.0, "GB"), format_value(2.25), format_value(0)) == ("3 GB", "2.2", "0")


# ---------------------------------------------------------------- samples
def test_take_sample_counts_capacity_queue_and_the_minutes_starts_and_ends() -> None:
    nodes = [NodeLoad(4, 2, 1, 1, 4000, 1000), NodeLoad(8, 8, 0, 0, 8000, 8000)]
    jobs = [
        JobTimes("PENDING", 0, 0),
        JobTimes("RUNNING", 130, 0),  # started inside [120, 180)
        JobTimes("COMPLETED", 100, 179),  # ended inside
        JobTimes("COMPLETED", 10, 180),  # ended at the boundary: the next minute's
        JobTimes("RUNNING", 119, 0),
    ]
    s = take_sample(nodes, jobs, 180)
    assert s == Sample(180, 12, 10, 1, 1, 12000, 9000, pending=1, running=2, started=1, finished=1)


def test_sample_ring_keeps_the_newest_one_per_minute() -> None:
    ring = SampleRing(capacity=2)
    for minute in (60, 120, 120, 180):
        ring.add(Sample(minute, minute, 0, 0, 0, 0, 0, 0, 0, 0, 0))
    assert [(s.minute, s.cpus_total) for s in ring.since(0)] == [(120, 120), (180, 180)]
    assert [s.minute for s in ring.since(120)] == [180]
    with pytest.raises(ValueError, match="older"):
        ring.add(Sample(60, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))


# ---------------------------------------------------------------- job filters
def _job(job_id: int, **kw: object) -> QueueJob:
    spec = pb.JobSpec(name=str(kw.pop("name", f"j{job_id}")), account=str(kw.pop("account", "acct")))
    kw.setdefault("state", "PENDING")
    kw.setdefault("partition", "p1")
    kw.setdefault("user", "alice")
    return QueueJob.from_info(pb.JobInfo(job_id=job_id, spec=spec, **kw))  # type: ignore[arg-type]


def test_filters_fold_pending_array_tasks_and_sort_like_squeue() -> None:
    jobs = [
        _job(1, state="RUNNING", priority=5),
        _job(2, priority=9),
        _job(3, state="COMPLETED"),
        *[_job(10 + t, array_job_id=10, array_task_id=t, reason="Priority", priority=1) for t in range(3)],
        _job(20, user="bob", name="train-big", priority=3),
    ]
    rows = select_rows(jobs, parse_filter({}))
    assert [r.id_text for r in rows] == ["1", "2", "20", "10_[0-2]"]  # running first, then priority
    assert [r.id_text for r in select_rows(jobs, parse_filter({"state": "CD"}))] == ["3"]
    assert [r.id_text for r in select_rows(jobs, parse_filter({"user": "bob"}))] == ["20"]
    assert [r.id_text for r in select_rows(jobs, parse_filter({"name": "big"}))] == ["20"]
    by_id = select_rows(jobs, parse_filter({"sort": "id", "order": "desc", "state": "all"}))
    assert [r.job.job_id for r in by_id] == [20, 10, 3, 2, 1]


@pytest.mark.parametrize(
    ("args", "field"),
    [({"state": "XX"}, "state"), ({"sort": "bogus"}, "sort"), ({"order": "up"}, "order"), ({"page": "0"}, "page")],
)
def test_bad_filters_name_the_field(args: dict[str, str], field: str) -> None:
    with pytest.raises(FilterError, match=f"^{field}:"):
        parse_filter(args)


def test_page_of_clamps_to_the_last_page() -> None:
    rows = select_rows([_job(i) for i in range(1, 6)], parse_filter({"sort": "id"}))
    shown, pages = page_of(rows, 9, size=2)
    assert pages == 3 and [r.job.job_id for r in shown] == [5]


def test_filter_query_keeps_only_non_defaults() -> None:
    f = parse_filter({"user": "bob", "state": "active"})
    assert f.query() == "user=bob" and f.query(page=2) == "user=bob&page=2"


# ---------------------------------------------------------------- reasons
def test_reasons_in_plain_words() -> None:
    assert "higher priority" in explain_reason("Priority")
    assert "resources" in explain_reason("Resources")
    assert explain_reason("QOSMaxCpuPerUserLimit") == "Held back by its QOS limit on each user's CPUs (QOSMaxCpuPerUserLimit)."
    assert explain_reason("AssocGrpJobsLimit").startswith("Held back by its association limit on the whole group's")
    assert explain_reason("SomethingNew") == "SomethingNew" and explain_reason("") == ""


# ---------------------------------------------------------------- sessions and CSRF
def test_session_lives_as_long_as_its_token_and_its_cookie_says_so() -> None:
    store = SessionStore()
    s = store.create("alice", {"authorization": "Bearer t"}, expires_at=1100.0, now=1000.0)
    assert store.get(s.id, 1099.0) is s
    cookie = session_cookie(s, 1000.0, secure=True)
    assert cookie == f"spur_session={s.id}; Path=/ui/; Max-Age=100; HttpOnly; SameSite=Strict; Secure"
    assert store.get(s.id, 1100.0) is None and len(store) == 0
    with pytest.raises(ValueError, match="expired"):
        store.create("alice", {}, expires_at=5.0, now=5.0)


def test_session_store_drops_the_soonest_to_expire_when_full() -> None:
    store = SessionStore(capacity=2)
    a = store.create("a", {}, 2000.0, 0.0)
    b = store.create("b", {}, 1500.0, 0.0)
    c = store.create("c", {}, 3000.0, 0.0)
    assert store.get(b.id, 1.0) is None and store.get(a.id, 1.0) is a and store.get(c.id, 1.0) is c


def test_csrf_token_must_match_the_session() -> None:
    store = SessionStore()
    s, other = store.create("a", {}, 10.0, 0.0), store.create("b", {}, 10.0, 0.0)
    assert csrf_ok(s, s.csrf)
    assert not csrf_ok(s, other.csrf) and not csrf_ok(s, None) and not csrf_ok(s, "")
    assert s.csrf != s.id and len(s.csrf) >= 40


def test_a_sign_in_link_works_once_until_its_token_expires() -> None:
    ledger = LinkLedger()
    assert ledger.use("jti1", expires_at=100.0, now=0.0)
    assert not ledger.use("jti1", expires_at=100.0, now=50.0)
    assert ledger.use("jti2", expires_at=100.0, now=50.0)


# ---------------------------------------------------------------- spur web
def test_spur_web_link_and_browser_choice() -> None:
    assert link_for("http://h:6820/", "a.b+c") == "http://h:6820/ui/login/link?token=a.b%2Bc"
    assert link_for("http://h:6820", None) == "http://h:6820/ui/"
    assert not can_open_browser({}) and can_open_browser({"DISPLAY": ":0"}) and can_open_browser({"BROWSER": "lynx"})


def test_queue_job_reads_the_same_from_the_state_and_from_jobinfo() -> None:
    from dataclasses import replace

    from spur.core.job import Job, JobSpec, JobState, NodeAllocation
    from spur.rpc.convert import job_to_proto

    spec = JobSpec(name="train", script="#!/bin/sh\ntrue\n", work_dir="/tmp", account="physics")
    running = Job(job_id=7, spec=spec, user="alice", uid=1000, gid=1000, group="alice", state=JobState.RUNNING,
                  reason="None", partition="debug", priority=5, submit_time=100.0, start_time=110.0,
                  allocation=[NodeAllocation("n1", 2, 100, [0], 2), NodeAllocation("n2", 2, 100, [], 2)],
                  array_job_id=7, array_task_id=0, array_max_running=3)  # fmt: skip
    pending = replace(running, job_id=8, state=JobState.PENDING, reason="Priority", start_time=0.0, allocation=[],
                      array_job_id=0, array_task_id=None)  # fmt: skip
    for job in (running, pending):
        mine, wire = QueueJob.from_job(job), QueueJob.from_info(job_to_proto(job, include_script=False))
        assert mine[:-1] == wire[:-1]
        assert mine.nodelist == wire.nodelist
    assert QueueJob.from_job(running).nodelist == "n[1-2]" and QueueJob.from_job(pending).nodelist == ""


def test_cluster_page_views_of_k0s_and_the_mesh() -> None:
    from spur.rpc.proto import k8s_pb2 as kpb
    from spur.rpc.proto import mesh_pb2
    from spur.ui.views.cluster import k8s_view, mesh_view

    status = kpb.K8sClusterStatus(
        phase="degraded",
        control_planes=["a"],
        nodes=[
            kpb.K8sNodeInfo(name="a", role="controller", component_state="active", enabled=True),
            kpb.K8sNodeInfo(name="b", role="worker", enabled=True, start_failure="exit 1", drift="unit missing"),
        ],
    )
    view = k8s_view(status)
    assert view["phase"] == "degraded" and view["control_planes"] == ["a"]
    assert [(n["name"], n["state"], n["problem"]) for n in view["nodes"]] == [
        ("a", "active", ""),
        ("b", "unknown", "unit missing"),  # drift first: it says what is wrong now
    ]
    members = mesh_pb2.MemberSet(
        cidr="10.90.0.0/24",
        listen_port=51820,
        members=[
            mesh_pb2.Member(node="z", address="10.90.0.3", public_key="Zk" * 22),
            mesh_pb2.Member(node="m", address="10.90.0.2", public_key="Mk" * 22, pod_cidr="10.244.1.0/24"),
        ],
    )
    mesh = mesh_view(members)
    assert [m["node"] for m in mesh["members"]] == ["m", "z"]
    assert mesh["members"][0]["key"] == "MkMkMkMk" and mesh["members"][0]["pod_cidr"] == "10.244.1.0/24"
