"""A Python client on Trio (httpx, the operator's choice) against the Kubernetes API double:
list, watch via ``aiter_lines`` (resume, selectors, bookmarks, 410), optimistic concurrency."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
import trio

from integration.kubeapi import KubeAPI

TOKEN = "spur-operator-token"


@pytest.fixture
async def api(nursery) -> KubeAPI:
    double = KubeAPI(token=TOKEN, bookmark_interval=0.1, history=50)
    await nursery.start(double.serve)
    return double


@pytest.fixture
async def client(api: KubeAPI):
    async with httpx.AsyncClient(
        base_url=api.url or "", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10
    ) as c:
        yield c


def _pod(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"containers": [{"name": "main", "image": "spur:test"}]},
    }


PODS = "/api/v1/namespaces/default/pods"


async def _events(
    client: httpx.AsyncClient, params: dict[str, str], want: int, timeout: float = 10
) -> list[tuple[str, dict]]:
    """The first ``want`` events of a watch (then the stream is closed)."""
    out: list[tuple[str, dict]] = []
    with trio.fail_after(timeout):
        async with client.stream("GET", PODS, params={"watch": "true", **params}) as resp:
            assert resp.status_code == 200 and resp.headers["content-type"] == "application/json"
            async for line in resp.aiter_lines():
                if line:
                    event = json.loads(line)
                    out.append((event["type"], event["object"]))
                    if len(out) == want:
                        break
    return out


async def test_list_then_watch_from_the_lists_version(api: KubeAPI, client: httpx.AsyncClient) -> None:
    assert (await client.post(PODS, json=_pod("p1"))).status_code == 201
    listing = (await client.get(PODS)).json()
    assert listing["kind"] == "PodList" and [p["metadata"]["name"] for p in listing["items"]] == ["p1"]
    rv = listing["metadata"]["resourceVersion"]

    async def writer() -> None:
        await client.post(PODS, json=_pod("p2"))
        api.kubelet.set_pod_phase("default", "p2", "Running")
        await client.delete(f"{PODS}/p2")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(writer)
        events = await _events(client, {"resourceVersion": rv}, 3)
    assert [(t, o["metadata"]["name"]) for t, o in events] == [
        ("ADDED", "p2"),
        ("MODIFIED", "p2"),
        ("DELETED", "p2"),
    ]
    assert events[1][1]["status"]["phase"] == "Running"
    versions = [int(o["metadata"]["resourceVersion"]) for _, o in events[:2]]
    assert versions == sorted(versions) and versions[0] > int(rv)

    # Resuming from the MODIFIED event's version replays only what came after it.
    replay = await _events(client, {"resourceVersion": str(versions[1])}, 1)
    assert replay[0][0] == "DELETED"
    # No version: the current objects first, as ADDED.
    initial = await _events(client, {}, 1)
    assert initial == [("ADDED", (await client.get(f"{PODS}/p1")).json())]


async def test_watch_with_selectors_sees_objects_enter_and_leave(
    api: KubeAPI, client: httpx.AsyncClient
) -> None:
    await client.post(PODS, json=_pod("web", {"app": "web"}))
    rv = (await client.get(PODS)).json()["metadata"]["resourceVersion"]
    relabel = {"metadata": {"labels": {"app": "db"}}}
    merge = {"Content-Type": "application/merge-patch+json"}
    await client.patch(f"{PODS}/web", content=json.dumps(relabel), headers=merge)
    await client.patch(
        f"{PODS}/web", content=json.dumps({"metadata": {"labels": {"app": "web"}}}), headers=merge
    )
    events = await _events(client, {"resourceVersion": rv, "labelSelector": "app=web"}, 2)
    assert [t for t, _ in events] == ["DELETED", "ADDED"]
    api.store.patch(
        api.store.registry.by_key("", "pods"),
        "default",
        "web",
        "application/merge-patch+json",
        {"spec": {"nodeName": "n1"}},
    )
    by_node = await _events(client, {"fieldSelector": "spec.nodeName=n1"}, 1)
    assert by_node[0][1]["metadata"]["name"] == "web"
    bad = await client.get(PODS, params={"watch": "1", "labelSelector": "app in (x"})
    assert bad.status_code == 400 and bad.json()["reason"] == "BadRequest"


async def test_bookmarks_and_410_gone(api: KubeAPI, client: httpx.AsyncClient) -> None:
    rv = (await client.get(PODS)).json()["metadata"]["resourceVersion"]
    events = await _events(client, {"resourceVersion": rv, "allowWatchBookmarks": "true"}, 2)
    assert [t for t, _ in events] == ["BOOKMARK", "BOOKMARK"]
    assert events[0][1] == {"kind": "Pod", "apiVersion": "v1", "metadata": {"resourceVersion": rv}}
    for i in range(60):  # more changes than the double remembers (history=50)
        await client.post(PODS, json=_pod(f"bulk-{i}"))
    gone = await _events(client, {"resourceVersion": rv}, 1)
    assert gone[0][0] == "ERROR"
    assert (gone[0][1]["code"], gone[0][1]["reason"]) == (410, "Expired")
    # the client's recovery: list again, watch from the new version
    fresh = (await client.get(PODS)).json()
    assert len(fresh["items"]) == 60


async def test_watch_timeout_ends_the_stream(client: httpx.AsyncClient) -> None:
    rv = (await client.get(PODS)).json()["metadata"]["resourceVersion"]
    with trio.fail_after(10):
        async with client.stream(
            "GET", PODS, params={"watch": "true", "resourceVersion": rv, "timeoutSeconds": "1"}
        ) as resp:
            lines = [line async for line in resp.aiter_lines() if line]
    assert lines == []


async def test_conflicts_and_credentials(api: KubeAPI, client: httpx.AsyncClient) -> None:
    created = (await client.post(PODS, json=_pod("p"))).json()
    again = await client.post(PODS, json=_pod("p"))
    assert again.status_code == 409 and again.json()["reason"] == "AlreadyExists"
    first = dict(created, metadata={**created["metadata"], "labels": {"v": "1"}})
    assert (await client.put(f"{PODS}/p", json=first)).status_code == 200
    stale = dict(created, metadata={**created["metadata"], "labels": {"v": "2"}})
    conflict = await client.put(f"{PODS}/p", json=stale)
    assert conflict.status_code == 409 and conflict.json()["reason"] == "Conflict"
    assert "the object has been modified" in conflict.json()["message"]
    wrong = await client.get(PODS, headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401 and wrong.json()["reason"] == "Unauthorized"
    missing = await client.get(f"{PODS}/nope")
    assert missing.status_code == 404 and missing.json()["details"] == {
        "name": "nope",
        "group": "",
        "kind": "pods",
    }
    unknown = await client.get("/apis/spur.amd.com/v1alpha1/spurjobs")
    assert unknown.status_code == 404  # no CRD yet
    version = (await client.get("/version")).json()
    assert (version["major"], version["minor"]) == ("1", "32")
