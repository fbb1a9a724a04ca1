"""The Kubernetes API double's pure logic: selectors, patches, store rules, watch events, protobuf."""

from __future__ import annotations

import base64
import copy

import pytest

from integration.kubeapi import errors
from integration.kubeapi.attach import container_argv, exit_status, interactive_container, pick_protocol
from integration.kubeapi.errors import ApiError
from integration.kubeapi.kubelet import Kubelet, pod_status
from integration.kubeapi.patch import PatchError, json_merge_patch, json_patch, strategic_merge_patch
from integration.kubeapi.protowire import MAGIC, ProtoError, decode_object
from integration.kubeapi.resources import parse_resource_path
from integration.kubeapi.selectors import (
    KIND_FIELDS,
    SelectorError,
    matches,
    parse_field_selector,
    parse_label_selector,
    selector_from_object,
)
from integration.kubeapi.store import JSON_PATCH, MERGE_PATCH, STRATEGIC_PATCH, Store
from integration.kubeapi.tables import human_duration
from integration.kubeapi.watch import Change, decode_events, encode_event, event_for

# ---------------------------------------------------------------------- selectors


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        ("app=web", {"app": "web"}, True),
        ("app==web", {"app": "db"}, False),
        ("app!=web", {}, True),
        ("app!=web", {"app": "web"}, False),
        ("tier in (a, b)", {"tier": "b"}, True),
        ("tier in (a,b)", {}, False),
        ("tier notin (a,b)", {}, True),
        ("tier notin (a,b)", {"tier": "a"}, False),
        ("gpu", {"gpu": ""}, True),
        ("!gpu", {"gpu": "x"}, False),
        ("app=web,tier in (a,b),!legacy", {"app": "web", "tier": "a"}, True),
        ("example.com/role=x", {"example.com/role": "x"}, True),
        ("", {"anything": "x"}, True),
    ],
)
def test_label_selectors(selector: str, labels: dict, expected: bool) -> None:
    assert matches(parse_label_selector(selector), labels) is expected


@pytest.mark.parametrize("bad", ["app=(x", "tier in ()", "a b c", "app=we b", ",", "-bad=1"])
def test_bad_label_selectors_are_refused(bad: str) -> None:
    with pytest.raises(SelectorError):
        parse_label_selector(bad)


def test_label_selector_objects() -> None:
    sel = selector_from_object(
        {
            "matchLabels": {"app": "spurctld"},
            "matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["b"]}],
        }
    )
    assert matches(sel, {"app": "spurctld", "zone": "a"})
    assert not matches(sel, {"app": "spurctld", "zone": "b"})
    assert matches(selector_from_object({}), {"x": "y"})
    assert not matches(selector_from_object(None), {"x": "y"})  # no selector selects nothing


def test_field_selectors() -> None:
    allowed = {"metadata.name", "metadata.namespace"} | KIND_FIELDS[("", "pods")]
    reqs = parse_field_selector("spec.nodeName=n1,status.phase!=Failed", allowed)
    pod = {"metadata": {"name": "p"}, "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}}
    assert all(r.matches(pod) for r in reqs)
    assert not all(r.matches({**pod, "spec": {"nodeName": "n2"}}) for r in reqs)
    with pytest.raises(SelectorError, match="field label not supported: spec.bogus"):
        parse_field_selector("spec.bogus=1", allowed)


# ---------------------------------------------------------------------- patches


def test_json_merge_patch_merges_objects_deletes_nulls_replaces_lists() -> None:
    target = {"a": {"b": 1, "c": 2}, "l": [1, 2], "keep": True}
    out = json_merge_patch(target, {"a": {"b": None, "d": 3}, "l": [3]})
    assert out == {"a": {"c": 2, "d": 3}, "l": [3], "keep": True}
    assert target == {"a": {"b": 1, "c": 2}, "l": [1, 2], "keep": True}


def test_json_patch_operations() -> None:
    doc = {"metadata": {"labels": {"a": "1"}}, "spec": {"list": [1, 2, 3]}}
    out = json_patch(
        doc,
        [
            {"op": "add", "path": "/metadata/labels/b~1c", "value": "2"},
            {"op": "remove", "path": "/spec/list/0"},
            {"op": "replace", "path": "/spec/list/0", "value": 9},
            {"op": "add", "path": "/spec/list/-", "value": 4},
            {"op": "copy", "from": "/metadata/labels/a", "path": "/spec/copied"},
            {"op": "move", "from": "/spec/copied", "path": "/spec/moved"},
            {"op": "test", "path": "/spec/moved", "value": "1"},
        ],
    )
    assert out == {"metadata": {"labels": {"a": "1", "b/c": "2"}}, "spec": {"list": [9, 3, 4], "moved": "1"}}
    assert doc["spec"]["list"] == [1, 2, 3]
    with pytest.raises(PatchError, match="test operation failed"):
        json_patch(doc, [{"op": "test", "path": "/metadata/labels/a", "value": "2"}])
    with pytest.raises(PatchError):
        json_patch(doc, [{"op": "remove", "path": "/nope"}])


def _deployment() -> dict:
    return {
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "app",
                            "image": "spur:1",
                            "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                            "ports": [{"containerPort": 6817, "name": "grpc"}],
                        },
                        {"name": "sidecar", "image": "busybox"},
                    ]
                }
            }
        },
        "metadata": {"finalizers": ["a"]},
    }


def test_strategic_merge_patch_merges_lists_by_key() -> None:
    orig = _deployment()
    patch = {
        "metadata": {"finalizers": ["b"]},
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "app",
                            "image": "spur:2",
                            "env": [{"name": "B", "value": "3"}, {"name": "C", "value": "4"}],
                            "ports": [{"containerPort": 6820, "name": "rest"}],
                        }
                    ]
                }
            }
        },
    }
    out = strategic_merge_patch(orig, patch)
    app, sidecar = out["spec"]["template"]["spec"]["containers"]
    assert app["image"] == "spur:2" and sidecar == {"name": "sidecar", "image": "busybox"}
    assert app["env"] == [
        {"name": "A", "value": "1"},
        {"name": "B", "value": "3"},
        {"name": "C", "value": "4"},
    ]
    assert [p["containerPort"] for p in app["ports"]] == [6817, 6820]
    assert out["metadata"]["finalizers"] == ["a", "b"]
    assert orig == _deployment()


def test_strategic_merge_patch_directives() -> None:
    orig = _deployment()
    out = strategic_merge_patch(
        orig,
        {
            "metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]},
            "spec": {
                "template": {
                    "spec": {
                        "$setElementOrder/containers": [{"name": "sidecar"}, {"name": "app"}],
                        "containers": [
                            {"name": "app", "env": [{"name": "A", "$patch": "delete"}]},
                        ],
                    }
                }
            },
        },
    )
    sidecar, app = out["spec"]["template"]["spec"]["containers"]
    assert sidecar["name"] == "sidecar" and [e["name"] for e in app["env"]] == ["B"]
    assert out["metadata"]["finalizers"] == []
    replaced = strategic_merge_patch(
        orig, {"spec": {"template": {"spec": {"$patch": "replace", "hostNetwork": True}}}}
    )
    assert replaced["spec"]["template"]["spec"] == {"hostNetwork": True}
    removed = strategic_merge_patch(
        orig, {"spec": {"template": {"spec": {"containers": [{"name": "sidecar", "$patch": "delete"}]}}}}
    )
    assert [c["name"] for c in removed["spec"]["template"]["spec"]["containers"]] == ["app"]
    retained = strategic_merge_patch(
        {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}},
        {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}},
    )
    assert retained == {"strategy": {"type": "Recreate"}}
    service = strategic_merge_patch(
        {"spec": {"ports": [{"port": 80}, {"port": 443}]}},
        {"spec": {"ports": [{"port": 443, "name": "tls"}]}},
    )
    assert service["spec"]["ports"] == [{"port": 80}, {"port": 443, "name": "tls"}]


# ---------------------------------------------------------------------- store rules


@pytest.fixture
def store() -> Store:
    return Store(clock=lambda: 1_800_000_000.0)


def rt(store: Store, group: str, plural: str):
    found = store.registry.by_key(group, plural)
    assert found is not None
    return found


def test_create_assigns_identity_and_refuses_duplicates(store: Store) -> None:
    cms = rt(store, "", "configmaps")
    cm = store.create(cms, "default", {"metadata": {"name": "c"}, "data": {"k": "v"}})
    assert cm["kind"] == "ConfigMap" and cm["apiVersion"] == "v1"
    assert cm["metadata"]["uid"] and cm["metadata"]["creationTimestamp"] == "2027-01-15T08:00:00Z"
    assert int(cm["metadata"]["resourceVersion"]) == store.resource_version
    with pytest.raises(ApiError) as exc:
        store.create(cms, "default", {"metadata": {"name": "c"}})
    assert (exc.value.code, exc.value.reason) == (409, "AlreadyExists")
    assert exc.value.status()["message"] == 'configmaps "c" already exists'
    with pytest.raises(ApiError) as exc:
        store.create(cms, "nope", {"metadata": {"name": "c"}})
    assert exc.value.code == 404 and exc.value.status()["message"] == 'namespaces "nope" not found'
    with pytest.raises(ApiError) as exc:
        store.create(cms, "default", {"metadata": {"name": "Bad_Name"}})
    assert exc.value.code == 422


def test_stale_resource_version_conflicts_and_noop_keeps_it(store: Store) -> None:
    cms = rt(store, "", "configmaps")
    cm = store.create(cms, "default", {"metadata": {"name": "c"}, "data": {"k": "v"}})
    stale = copy.deepcopy(cm)
    cm["data"]["k"] = "w"
    updated = store.update(cms, "default", "c", cm)
    assert int(updated["metadata"]["resourceVersion"]) > int(stale["metadata"]["resourceVersion"])
    stale["data"]["k"] = "x"
    with pytest.raises(ApiError) as exc:
        store.update(cms, "default", "c", stale)
    assert (exc.value.code, exc.value.reason) == (409, "Conflict")
    rv = store.resource_version
    assert store.update(cms, "default", "c", updated) == updated
    assert store.resource_version == rv
    with pytest.raises(ApiError) as exc:
        store.patch(
            cms,
            "default",
            "c",
            MERGE_PATCH,
            {"metadata": {"resourceVersion": stale["metadata"]["resourceVersion"]}},
        )
    assert exc.value.reason == "Conflict"


def test_status_subresource_separates_spec_and_status(store: Store) -> None:
    pods = rt(store, "", "pods")
    pod = store.create(
        pods,
        "default",
        {
            "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "i"}]},
            "status": {"phase": "Running"},
        },
    )
    assert pod["status"]["phase"] == "Pending"  # status is not the creator's to set
    pod["status"] = {"phase": "Running"}
    pod["spec"]["nodeName"] = "n1"
    pod = store.update(pods, "default", "p", pod)
    assert pod["status"]["phase"] == "Pending" and pod["spec"]["nodeName"] == "n1"
    after = store.patch(
        pods,
        "default",
        "p",
        MERGE_PATCH,
        {"status": {"phase": "Running"}, "spec": {"nodeName": "n2"}},
        subresource="status",
    )
    assert after["status"]["phase"] == "Running" and after["spec"]["nodeName"] == "n1"
    assert after["metadata"]["generation"] == 2  # the spec change bumped it, the status change did not


def test_finalizers_hold_deletion_until_the_last_is_removed(store: Store) -> None:
    cms = rt(store, "", "configmaps")
    store.create(cms, "default", {"metadata": {"name": "c", "finalizers": ["spur.amd.com/cancel"]}})
    obj, gone = store.delete(cms, "default", "c")
    assert not gone and obj["metadata"]["deletionTimestamp"]
    assert store.get(cms, "default", "c")["metadata"]["deletionTimestamp"]
    store.patch(cms, "default", "c", JSON_PATCH, [{"op": "remove", "path": "/metadata/finalizers"}])
    with pytest.raises(ApiError) as exc:
        store.get(cms, "default", "c")
    assert exc.value.code == 404
    kinds = [
        ("DELETED" if c.new is None else "ADDED" if c.old is None else "MODIFIED")
        for c in store.changes_since(0)
        if c.key == cms.key
    ]
    assert kinds == ["ADDED", "MODIFIED", "DELETED"]


def test_namespace_deletion_removes_content_then_itself(store: Store) -> None:
    nss, cms = rt(store, "", "namespaces"), rt(store, "", "configmaps")
    store.create(nss, None, {"metadata": {"name": "team"}})
    store.create(cms, "team", {"metadata": {"name": "a"}})
    store.create(cms, "team", {"metadata": {"name": "b", "finalizers": ["x/y"]}})
    ns, gone = store.delete(nss, None, "team")
    assert not gone and ns["status"]["phase"] == "Terminating"
    assert [c["metadata"]["name"] for c in store.list(cms, "team")[0]] == ["b"]
    with pytest.raises(ApiError) as exc:
        store.create(cms, "team", {"metadata": {"name": "c"}})
    assert exc.value.code == 403 and "being terminated" in exc.value.message
    store.patch(cms, "team", "b", MERGE_PATCH, {"metadata": {"finalizers": None}})
    with pytest.raises(ApiError):
        store.get(nss, None, "team")


def test_crd_makes_a_kind_discoverable_and_deleting_it_removes_objects(store: Store) -> None:
    import yaml

    from integration.kubeapi.kubectl import EXAMPLES

    crd = yaml.safe_load((EXAMPLES / "spurjob-crd.yaml").read_text())
    crds = rt(store, "apiextensions.k8s.io", "customresourcedefinitions")
    created = store.create(crds, None, crd)
    assert {c["type"]: c["status"] for c in created["status"]["conditions"]}["Established"] == "True"
    gv = store.registry.resource_list("spur.amd.com", "v1alpha1")
    assert gv is not None
    names = {r["name"]: r for r in gv["resources"]}
    assert names["spurjobs"]["kind"] == "SpurJob" and names["spurjobs"]["shortNames"] == ["sj"]
    assert "spurjobs/status" in names
    assert any(g["name"] == "spur.amd.com" for g in store.registry.api_group_list()["groups"])
    jobs = rt(store, "spur.amd.com", "spurjobs")
    store.create(jobs, "default", {"metadata": {"name": "j"}, "spec": {"script": "#!/bin/sh\n"}})
    with pytest.raises(ApiError) as exc:
        store.patch(jobs, "default", "j", STRATEGIC_PATCH, {"spec": {"script": "x"}})
    assert exc.value.code == 415  # custom resources take merge-patch, not strategic
    store.delete(crds, None, crd["metadata"]["name"])
    assert store.registry.by_key("spur.amd.com", "spurjobs") is None
    assert store.registry.resource_list("spur.amd.com", "v1alpha1") is None


def _statefulset(store: Store, name: str, replicas: int) -> None:
    store.create(
        rt(store, "apps", "statefulsets"),
        "default",
        {
            "metadata": {"name": name},
            "spec": {
                "replicas": replicas,
                "serviceName": name,
                "selector": {"matchLabels": {"app": name}},
                "template": {
                    "metadata": {"labels": {"app": name}},
                    "spec": {"containers": [{"name": "c", "image": "i"}]},
                },
            },
        },
    )
    kubelet = Kubelet(store, clock=store.clock)
    for i in range(replicas):
        kubelet.set_pod_phase("default", f"{name}-{i}", "Running")


@pytest.mark.parametrize(
    ("budget", "evictable"),
    [
        ({"minAvailable": 2}, 1),
        ({"maxUnavailable": "50%"}, 2),
        ({"minAvailable": "100%"}, 0),
        ({"maxUnavailable": 3}, 3),
    ],
)
def test_eviction_honours_pod_disruption_budgets(store: Store, budget: dict, evictable: int) -> None:
    _statefulset(store, "ctl", 3)
    store.create(
        rt(store, "policy", "poddisruptionbudgets"),
        "default",
        {"metadata": {"name": "b"}, "spec": {"selector": {"matchLabels": {"app": "ctl"}}, **budget}},
    )
    evicted = 0
    for i in range(3):
        try:
            assert store.evict("default", f"ctl-{i}", {"kind": "Eviction"})["status"] == "Success"
            evicted += 1
        except ApiError as exc:
            assert exc.code == 429 and exc.reason == "TooManyRequests"
            assert "disruption budget b needs" in exc.details["causes"][0]["message"]
    assert evicted == evictable
    # evicted pods come back Pending (the StatefulSet recreates them) and are not healthy
    phases = sorted(p["status"]["phase"] for p in store.list(rt(store, "", "pods"), "default")[0])
    assert phases == sorted(["Pending"] * evictable + ["Running"] * (3 - evictable))


def test_eviction_without_budget_deletes_and_pending_pods_always_go(store: Store) -> None:
    pods = rt(store, "", "pods")
    store.create(pods, "default", {"metadata": {"name": "free", "labels": {"app": "x"}}, "spec": {}})
    store.create(
        rt(store, "policy", "poddisruptionbudgets"),
        "default",
        {"metadata": {"name": "b"}, "spec": {"selector": {"matchLabels": {"app": "x"}}, "minAvailable": 1}},
    )
    store.evict("default", "free", None)  # Pending: the budget does not protect it
    with pytest.raises(ApiError):
        store.get(pods, "default", "free")


def test_watch_history_and_410_when_compacted(store: Store) -> None:
    cms = rt(store, "", "configmaps")
    start = store.resource_version
    store.create(cms, "default", {"metadata": {"name": "a"}})
    assert [c.rv for c in store.changes_since(start)] == [start + 1]
    store.compact()
    with pytest.raises(ApiError) as exc:
        store.changes_since(start)
    assert (exc.value.code, exc.value.reason) == (410, "Expired")
    assert store.changes_since(store.resource_version) == []
    small = Store(history=3)
    for i in range(5):
        small.create(rt(small, "", "configmaps"), "default", {"metadata": {"name": f"c{i}"}})
    with pytest.raises(ApiError):
        small.changes_since(1)


def test_watch_events_follow_selectors() -> None:
    labels = parse_label_selector("app=web")
    web = {"metadata": {"name": "p", "labels": {"app": "web"}}}
    db = {"metadata": {"name": "p", "labels": {"app": "db"}}}
    key = ("", "pods")
    assert event_for(Change(1, key, "d", None, web), labels) == ("ADDED", web)
    assert event_for(Change(2, key, "d", web, web), labels) == ("MODIFIED", web)
    assert event_for(Change(3, key, "d", web, db), labels) == ("DELETED", db)
    assert event_for(Change(4, key, "d", db, web), labels) == ("ADDED", web)
    assert event_for(Change(5, key, "d", db, None), labels) is None
    assert event_for(Change(6, key, "d", web, None), labels) == ("DELETED", web)
    line = encode_event("ADDED", web)
    assert line.endswith(b"\n") and list(decode_events(line + line)) == [("ADDED", web)] * 2


def test_owned_objects_are_garbage_collected(store: Store) -> None:
    sts = rt(store, "apps", "statefulsets")
    store.create(
        sts,
        "default",
        {
            "metadata": {"name": "ctl"},
            "spec": {
                "replicas": 2,
                "serviceName": "ctl",
                "selector": {"matchLabels": {"a": "b"}},
                "template": {
                    "metadata": {"labels": {"a": "b"}},
                    "spec": {"containers": [{"name": "c", "image": "i"}]},
                },
            },
        },
    )
    pods = rt(store, "", "pods")
    assert [p["metadata"]["name"] for p in store.list(pods, "default")[0]] == ["ctl-0", "ctl-1"]
    store.delete(pods, "default", "ctl-1")
    assert [p["metadata"]["name"] for p in store.list(pods, "default")[0]] == ["ctl-0", "ctl-1"]  # recreated
    store.delete(sts, "default", "ctl")
    assert store.list(pods, "default")[0] == []


def test_kubelet_statuses() -> None:
    pod = {
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "main", "image": "i"}]},
        "status": {"phase": "Pending"},
    }
    oom = pod_status(pod, "Failed", now=0, exit_code=137, reason="OOMKilled")
    assert oom["containerStatuses"][0]["state"]["terminated"] == {
        "exitCode": 137,
        "reason": "OOMKilled",
        "startedAt": "1970-01-01T00:00:00Z",
        "finishedAt": "1970-01-01T00:00:00Z",
    }
    pull = pod_status(pod, "Pending", now=0, reason="ErrImagePull", message="pull access denied")
    assert pull["containerStatuses"][0]["state"]["waiting"] == {
        "reason": "ErrImagePull",
        "message": "pull access denied",
    }
    with pytest.raises(ValueError):
        pod_status(pod, "Exploded", now=0)


# ---------------------------------------------------------------------- paths, protobuf, tables


def test_resource_paths() -> None:
    p = parse_resource_path("/api/v1/namespaces/spur/pods/x/eviction")
    assert p and (p.group, p.plural, p.namespace, p.name, p.subresource) == (
        "",
        "pods",
        "spur",
        "x",
        "eviction",
    )
    p = parse_resource_path("/api/v1/namespaces/spur/status")
    assert p and (p.plural, p.name, p.subresource) == ("namespaces", "spur", "status")
    p = parse_resource_path("/apis/spur.amd.com/v1alpha1/spurjobs")
    assert p and (p.group, p.namespace, p.name) == ("spur.amd.com", None, None)
    assert parse_resource_path("/apis/apps") is None


def _pb(number: int, payload: bytes) -> bytes:
    length, n = b"", len(payload)
    while n >= 0x80:
        length, n = length + bytes([(n & 0x7F) | 0x80]), n >> 7
    return bytes([(number << 3) | 2]) + length + bytes([n]) + payload


def test_protobuf_secret_decodes() -> None:
    meta = _pb(1, b"spur-config") + _pb(3, b"spur")
    entry = _pb(1, b"spur.conf") + _pb(2, b"cluster_name = 'x'\n")
    secret = _pb(1, meta) + _pb(2, entry) + _pb(3, b"Opaque")
    unknown = _pb(1, _pb(1, b"v1") + _pb(2, b"Secret")) + _pb(2, secret)
    obj = decode_object(MAGIC + unknown)
    assert obj == {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "spur-config", "namespace": "spur"},
        "data": {"spur.conf": base64.b64encode(b"cluster_name = 'x'\n").decode()},
        "type": "Opaque",
    }
    with pytest.raises(ProtoError):
        decode_object(b"{}")
    with pytest.raises(ProtoError, match="kind StatefulSet"):
        decode_object(MAGIC + _pb(1, _pb(1, b"apps/v1") + _pb(2, b"StatefulSet")))
    with pytest.raises(ProtoError, match="kind PodSpec"):  # a part of an object is not a body's kind
        decode_object(MAGIC + _pb(1, _pb(1, b"v1") + _pb(2, b"PodSpec")))


def _varint_field(number: int, value: int) -> bytes:
    return bytes([number << 3, value])


def test_protobuf_deployment_decodes_as_kubectl_create_sends_it() -> None:
    labels = _pb(11, _pb(1, b"app") + _pb(2, b"web"))
    requests = _pb(2, _pb(1, b"cpu") + _pb(2, _pb(1, b"500m")))
    container = (
        _pb(1, b"nginx") + _pb(2, b"nginx") + _pb(8, requests) + _pb(4, b"-g") + _pb(4, b"daemon off;")
    )
    template = _pb(1, _pb(8, b"") + labels) + _pb(2, _pb(2, container) + _pb(3, b"Always"))
    rolling = _pb(1, _varint_field(2, 0)) + _pb(2, _varint_field(1, 1) + _pb(3, b"25%"))
    spec = (
        _varint_field(1, 0)  # replicas: 0 on purpose (a pointer in Go) stays in the JSON
        + _pb(2, _pb(1, _pb(1, b"app") + _pb(2, b"web")))
        + _pb(3, template)
        + _pb(4, _pb(1, b"RollingUpdate") + _pb(2, rolling))
    )
    deployment = _pb(1, _pb(1, b"web") + labels) + _pb(2, spec) + _pb(3, b"")
    unknown = _pb(1, _pb(1, b"apps/v1") + _pb(2, b"Deployment")) + _pb(2, deployment)
    assert decode_object(MAGIC + unknown) == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {  # the zero creationTimestamp (an empty Timestamp) is absent, as JSON's null
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "containers": [
                        {
                            "name": "nginx",
                            "image": "nginx",
                            "args": ["-g", "daemon off;"],
                            "resources": {"requests": {"cpu": "500m"}},
                        }
                    ],
                    "restartPolicy": "Always",
                },
            },
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": "25%"}},
        },
        "status": {},
    }


def test_attach_runs_the_interactive_container() -> None:
    pod = {
        "spec": {
            "containers": [{"name": "a", "image": "x"}, {"name": "probe", "stdin": True, "args": ["sh"]}]
        }
    }
    assert interactive_container(pod) is None  # the first container takes no stdin
    probe = interactive_container(pod, "probe")
    assert probe is not None and container_argv(probe) == ["sh"]
    assert interactive_container(pod, "nope") is None
    assert container_argv({"command": ["/bin/echo"], "args": ["hi"]}) == ["/bin/echo", "hi"]
    assert container_argv({"image": "busybox"}) == ["sh"]  # the image's default command
    assert pick_protocol("v4.channel.k8s.io, v5.channel.k8s.io") == "v5.channel.k8s.io"
    assert pick_protocol("channel.k8s.io") is None and pick_protocol(None) is None
    assert exit_status(0) == {"metadata": {}, "status": "Success"}
    assert exit_status(2)["details"]["causes"] == [{"reason": "ExitCode", "message": "2"}]


def test_human_durations() -> None:
    assert [human_duration(s) for s in (5, 119, 150, 3600, 8 * 3600, 3 * 86400, 400 * 86400)] == [
        "5s",
        "119s",
        "2m30s",
        "60m",
        "8h",
        "3d",
        "400d",
    ]


def test_error_status_shape() -> None:
    st = errors.not_found("spurjobs", "spur.amd.com", "x").status()
    assert st == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'spurjobs.spur.amd.com "x" not found',
        "reason": "NotFound",
        "code": 404,
        "details": {"name": "x", "group": "spur.amd.com", "kind": "spurjobs"},
    }


def test_custom_resources_follow_their_schema(store: Store) -> None:
    import yaml

    from integration.kubeapi.kubectl import EXAMPLES

    crds = rt(store, "apiextensions.k8s.io", "customresourcedefinitions")
    store.create(crds, None, yaml.safe_load((EXAMPLES / "spurjob-crd.yaml").read_text()))
    jobs = rt(store, "spur.amd.com", "spurjobs")
    with pytest.raises(ApiError) as exc:
        store.create(
            jobs, "default", {"metadata": {"name": "a"}, "spec": {"script": "x", "extra": 1}}, strict=True
        )
    assert exc.value.code == 400 and 'unknown field "spec.extra"' in exc.value.message
    pruned = store.create(jobs, "default", {"metadata": {"name": "a"}, "spec": {"script": "x", "extra": 1}})
    assert pruned["spec"] == {"script": "x"}
    with pytest.raises(ApiError) as exc:
        store.create(jobs, "default", {"metadata": {"name": "b"}, "spec": {"script": 5}})
    assert exc.value.code == 422 and exc.value.details["causes"][0]["field"] == "spec.script"
    # status writes go through the status subresource, checked against the schema's status
    store.patch(jobs, "default", "a", MERGE_PATCH, {"status": {"state": "RUNNING"}}, subresource="status")
    assert store.get(jobs, "default", "a")["status"] == {"state": "RUNNING"}
    zero = {"status": {"message": "", "exitCode": 0}}  # zero values are values, not null
    store.patch(jobs, "default", "a", MERGE_PATCH, zero, subresource="status")
    current = store.get(jobs, "default", "a")
    assert current["status"] == {"state": "RUNNING", "message": "", "exitCode": 0}
    for bad, field, words in (
        (
            {"message": None},
            "status.message",
            'Invalid value: "null": status.message in body must be of type string',
        ),
        (
            {"exitCode": "3"},
            "status.exitCode",
            'Invalid value: "string": status.exitCode in body must be of type integer',
        ),
    ):
        with pytest.raises(ApiError) as exc:
            store.update(
                jobs,
                "default",
                "a",
                {**current, "status": {**current["status"], **bad}},
                subresource="status",
            )
        assert exc.value.code == 422 and exc.value.details["causes"][0]["field"] == field
        assert f'SpurJob.spur.amd.com "a" is invalid: {field}: {words}' in exc.value.message
    assert store.get(jobs, "default", "a") == current  # nothing changed
    # a merge patch's null removes the field (RFC 7386): not a null value
    store.patch(jobs, "default", "a", MERGE_PATCH, {"status": {"message": None}}, subresource="status")
    assert "message" not in store.get(jobs, "default", "a")["status"]


def test_builtin_kinds_are_checked_only_when_strict(store: Store) -> None:
    pytest.importorskip("kubernetes_validate")
    cms = rt(store, "", "configmaps")
    with pytest.raises(ApiError) as exc:
        store.create(cms, "default", {"metadata": {"name": "c"}, "dta": {}}, strict=True)
    assert exc.value.code == 400 and 'unknown field "dta"' in exc.value.message
    assert store.create(cms, "default", {"metadata": {"name": "c"}, "dta": {}})["dta"] == {}


def test_kubelet_moves_nodes_through_ready_and_cordon(store: Store) -> None:
    kubelet = Kubelet(store, clock=store.clock)
    node = kubelet.add_node("gpu-1", {"cpu": "64", "memory": "512Gi", "amd.com/gpu": "8"})
    assert node["status"]["allocatable"]["amd.com/gpu"] == "8"
    assert {c["type"]: c["status"] for c in node["status"]["conditions"]} == {"Ready": "True"}
    down = kubelet.set_node_ready("gpu-1", False)
    assert {c["type"]: c["status"] for c in down["status"]["conditions"]} == {"Ready": "False"}
    assert down["status"]["allocatable"]["amd.com/gpu"] == "8"
    assert kubelet.cordon("gpu-1")["spec"]["unschedulable"] is True
    assert "unschedulable" not in kubelet.cordon("gpu-1", False)["spec"]
    nodes = rt(store, "", "nodes")
    assert (
        store.list(nodes, None, field_selector="spec.unschedulable=false")[0][0]["metadata"]["name"]
        == "gpu-1"
    )


def test_pod_deletion_grace_periods() -> None:
    now = [1_800_000_000.0]
    graceful = Store(clock=lambda: now[0], graceful_pods=True)
    pods = rt(graceful, "", "pods")
    kubelet = Kubelet(graceful, clock=graceful.clock)
    spec = {
        "nodeName": "n1",
        "terminationGracePeriodSeconds": 45,
        "containers": [{"name": "c", "image": "i"}],
    }
    graceful.create(pods, "default", {"metadata": {"name": "p"}, "spec": spec})
    kubelet.set_pod_phase("default", "p", "Running")
    marked, gone = graceful.delete(pods, "default", "p")
    assert not gone and marked["metadata"]["deletionGracePeriodSeconds"] == 45
    assert marked["metadata"]["deletionTimestamp"] == "2027-01-15T08:00:45Z"
    shorter, _ = graceful.delete(pods, "default", "p", {"gracePeriodSeconds": 5})
    assert shorter["metadata"]["deletionGracePeriodSeconds"] == 5
    kubelet.confirm_deletion("default", "p")
    with pytest.raises(ApiError):
        graceful.get(pods, "default", "p")
    # an unbound pod has no kubelet to wait for
    graceful.create(pods, "default", {"metadata": {"name": "q"}, "spec": {"containers": []}})
    assert graceful.delete(pods, "default", "q")[1] is True

    quick = Store()
    pods = rt(quick, "", "pods")
    quick.create(pods, "default", {"metadata": {"name": "p"}, "spec": spec})
    start = quick.resource_version
    assert quick.delete(pods, "default", "p", {"gracePeriodSeconds": 7})[1] is True
    (deleted,) = [c for c in quick.changes_since(start) if c.new is None]
    assert deleted.old is not None and deleted.old["metadata"]["deletionGracePeriodSeconds"] == 7


def test_quantities_are_stored_canonical_as_the_real_server_stores_them(store: Store) -> None:
    quotas = rt(store, "", "resourcequotas")
    hard = {"requests.memory": "32768Mi", "requests.cpu": "16", "limits.cpu": "2000m", "pods": "0"}
    created = store.create(quotas, "default", {"metadata": {"name": "q"}, "spec": {"hard": hard}})
    assert created["spec"]["hard"] == {
        "requests.memory": "32Gi",
        "requests.cpu": "16",
        "limits.cpu": "2",
        "pods": "0",
    }
    created["spec"]["hard"]["requests.memory"] = "1536Mi"
    assert store.update(quotas, "default", "q", created)["spec"]["hard"]["requests.memory"] == "1536Mi"
    pods = rt(store, "", "pods")
    container = {
        "name": "c",
        "image": "i",
        "resources": {"requests": {"memory": "524288Mi", "amd.com/gpu": "8"}},
    }
    pod = store.create(pods, "default", {"metadata": {"name": "p"}, "spec": {"containers": [container]}})
    assert pod["spec"]["containers"][0]["resources"]["requests"] == {"memory": "512Gi", "amd.com/gpu": "8"}
