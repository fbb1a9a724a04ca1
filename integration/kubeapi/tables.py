"""Server-side printing: objects as ``meta.k8s.io/v1`` Tables, what ``kubectl get`` asks for (pure, no I/O)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from integration.kubeapi.resources import ResourceType


def human_duration(seconds: float) -> str:
    """kubectl's short ages: 42s, 5m3s, 3h, 2d5h, 300d, 3y."""
    s = int(seconds)
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    m = s // 60
    if m < 10:
        return f"{m}m{s % 60}s" if s % 60 else f"{m}m"
    if m < 180:
        return f"{m}m"
    h = m // 60
    if h < 8:
        return f"{h}h{m % 60}m" if m % 60 else f"{h}h"
    if h < 48:
        return f"{h}h"
    if h < 24 * 8:
        return f"{h // 24}d{h % 24}h" if h % 24 else f"{h // 24}d"
    if h < 24 * 365 * 2:
        return f"{h // 24}d"
    return f"{h // (24 * 365)}y"


def _age(obj: dict[str, Any], now: float) -> str:
    ts = (obj.get("metadata") or {}).get("creationTimestamp")
    if not ts:
        return "<unknown>"
    created = datetime.strptime(ts, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()
    return human_duration(now - created)


def jsonpath_value(obj: Any, path: str) -> Any:
    """Evaluate a simple ``.a.b.c`` JSONPath (what CRD printer columns use); missing -> None."""
    cur = obj
    for part in path.strip().lstrip("$").strip(".").split("."):
        if not part:
            continue
        if isinstance(cur, dict):
            cur = cur.get(part)
        else:
            return None
    return cur


def _cell(value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    if isinstance(value, dict):
        return str(value)
    return value


def _col(
    name: str, typ: str = "string", fmt: str = "", priority: int = 0, description: str = ""
) -> dict[str, Any]:
    return {
        "name": name,
        "type": typ,
        "format": fmt,
        "description": description or name,
        "priority": priority,
    }


def _pod_row(pod: dict[str, Any], now: float) -> list[Any]:
    status = pod.get("status") or {}
    containers = (pod.get("spec") or {}).get("containers") or []
    statuses = status.get("containerStatuses") or []
    ready = sum(1 for c in statuses if c.get("ready"))
    restarts = sum(int(c.get("restartCount", 0)) for c in statuses)
    shown = status.get("reason") or status.get("phase") or "Unknown"
    for c in statuses:
        state = c.get("state") or {}
        if "waiting" in state and state["waiting"].get("reason"):
            shown = state["waiting"]["reason"]
        elif "terminated" in state and state["terminated"].get("reason") and shown not in ("Running",):
            shown = state["terminated"]["reason"]
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        shown = "Terminating"
    return [
        pod["metadata"]["name"],
        f"{ready}/{len(containers)}",
        shown,
        restarts,
        _age(pod, now),
        status.get("podIP") or "<none>",
        (pod.get("spec") or {}).get("nodeName") or "<none>",
    ]


def _node_row(node: dict[str, Any], now: float) -> list[Any]:
    conds = {c.get("type"): c.get("status") for c in (node.get("status") or {}).get("conditions") or []}
    state = {"True": "Ready", "False": "NotReady"}.get(conds.get("Ready", ""), "Unknown")
    if (node.get("spec") or {}).get("unschedulable"):
        state += ",SchedulingDisabled"
    labels = (node.get("metadata") or {}).get("labels") or {}
    roles = sorted(k.split("/", 1)[1] for k in labels if k.startswith("node-role.kubernetes.io/"))
    version = ((node.get("status") or {}).get("nodeInfo") or {}).get("kubeletVersion", "")
    return [node["metadata"]["name"], state, ",".join(roles) or "<none>", _age(node, now), version]


def columns_and_rows(
    rt: ResourceType, objs: list[dict[str, Any]], now: float
) -> tuple[list[dict], list[list[Any]]]:
    name = _col("Name", fmt="name", description="Name must be unique within a namespace.")
    age = _col("Age", description="CreationTimestamp")
    if rt.key == ("", "pods"):
        cols = [
            name,
            _col("Ready"),
            _col("Status"),
            _col("Restarts", "integer"),
            age,
            _col("IP", priority=1),
            _col("Node", priority=1),
        ]
        return cols, [_pod_row(o, now) for o in objs]
    if rt.key == ("", "nodes"):
        cols = [name, _col("Status"), _col("Roles"), age, _col("Version")]
        return cols, [_node_row(o, now) for o in objs]
    if rt.key == ("", "namespaces"):
        return [name, _col("Status"), age], [
            [o["metadata"]["name"], (o.get("status") or {}).get("phase", ""), _age(o, now)] for o in objs
        ]
    if rt.key == ("", "secrets"):
        return [name, _col("Type"), _col("Data", "integer"), age], [
            [o["metadata"]["name"], o.get("type", ""), len(o.get("data") or {}), _age(o, now)] for o in objs
        ]
    if rt.printer_columns:
        cols = [name]
        for pc in rt.printer_columns:
            cols.append(
                _col(
                    pc["name"],
                    "string" if pc.get("type") == "date" else pc.get("type", "string"),
                    pc.get("format", ""),
                    int(pc.get("priority", 0)),
                    pc.get("description", ""),
                )
            )
        rows = []
        for o in objs:
            row: list[Any] = [o["metadata"]["name"]]
            for pc in rt.printer_columns:
                value = jsonpath_value(o, pc.get("jsonPath", ""))
                if pc.get("type") == "date" and isinstance(value, str):
                    try:
                        value = _age({"metadata": {"creationTimestamp": value}}, now)
                    except ValueError:
                        pass
                row.append(_cell(value))
            rows.append(row)
        return cols, rows
    return [name, age], [[o["metadata"]["name"], _age(o, now)] for o in objs]


def to_table(
    rt: ResourceType, objs: list[dict[str, Any]], rv: int, now: float, include_object: str = "Metadata"
) -> dict[str, Any]:
    """A Table of ``objs``; each row carries the object's metadata (or the whole object)."""
    cols, rows = columns_and_rows(rt, objs, now)
    out_rows = []
    for obj, cells in zip(objs, rows, strict=True):
        row: dict[str, Any] = {"cells": cells}
        if include_object == "Object":
            row["object"] = obj
        elif include_object != "None":
            row["object"] = {
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": obj.get("metadata", {}),
            }
        out_rows.append(row)
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": str(rv)},
        "columnDefinitions": cols,
        "rows": out_rows,
    }
