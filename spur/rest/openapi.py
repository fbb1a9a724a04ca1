"""The OpenAPI document Spur serves: slurmrestd 22.05's own v0.0.38 document (shipped as
``slurmrestd-openapi-v0.0.38.json``), filtered to the operations Spur registers (pure).

Besides dropping unregistered operations and the component schemas nothing references any more,
the filter makes two kinds of documented corrections so the document describes the bodies real
slurmrestd 22.05 sends (and Spur sends the same): properties slurmrestd fills with ``null`` for
"not set" are marked ``nullable``, and the few whose declared type disagrees with what slurmrestd
emits (``meta.Slurm.version`` numbers are integers; ``cpus_per_task`` etc. are integers) get the
emitted type. Two schema bugs of the captured document are fixed the same way: error responses
declare the bare ``errors`` array while slurmrestd answers an object (``meta`` + ``errors``), and
``slurmdb`` config's ``tres`` is a list of TRES objects, not a list of lists. Only
``application/json`` is offered (Spur does not parse YAML bodies).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable
from functools import lru_cache
from importlib import resources
from typing import Any

HTTP_METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
_PATH_ITEM_KEYS = ("summary", "description", "servers", "parameters")

_INT_NULL = {"type": "integer", "nullable": True}
# (schema, property path inside it, replacement keys)
CORRECTIONS: tuple[tuple[str, str, dict[str, Any]], ...] = (
    *(
        (meta, f"Slurm.version.{part}", {"type": "integer"})
        for meta in ("v0.0.38_meta", "dbv0.0.38_meta")
        for part in ("major", "micro", "minor")
    ),
    *(
        ("v0.0.38_job_response_properties", prop, _INT_NULL)
        for prop in (
            "array_task_id", "core_spec", "thread_spec", "cores_per_socket", "cpus_per_task",
            "cpu_frequency_minimum", "cpu_frequency_maximum", "cpu_frequency_governor", "nice",
            "tasks_per_core", "tasks_per_socket", "memory_per_node", "memory_per_cpu",
            "sockets_per_node", "threads_per_core",
        )
    ),
    ("v0.0.38_job_response_properties", "profile", {"nullable": True}),
    ("v0.0.38_node", "owner", {"nullable": True}),
    ("v0.0.38_node", "reason_set_by_user", {"nullable": True}),
    ("v0.0.38_partition", "default_time_limit", _INT_NULL),
    ("v0.0.38_partition", "over_time_limit", _INT_NULL),
    ("dbv0.0.38_job", "allocation_nodes", {"type": "integer"}),
    ("dbv0.0.38_job", "array.task_id", _INT_NULL),
    ("dbv0.0.38_job", "het.job_offset", _INT_NULL),
    ("dbv0.0.38_job", "kill_request_user", {"nullable": True}),
    ("dbv0.0.38_job_step", "step.het.component", _INT_NULL),
    # accounting entities: slurmrestd 22.05 sends null for every unset limit (slurmdb_associations.json)
    *(("dbv0.0.38_association_short_info", prop, {"nullable": True}) for prop in ("partition", "user")),
    *(
        ("dbv0.0.38_association", prop, {"nullable": True})
        for prop in (
            "default.qos", "max.jobs.per.count", "max.jobs.per.accruing", "max.jobs.per.submitted",
            "max.jobs.per.wall_clock", "max.jobs.active", "max.jobs.accruing", "max.jobs.total",
            "max.per.account.wall_clock", "min.priority_threshold", "parent_account", "partition",
            "priority", "usage", "user",
        )
    ),
    *(
        ("dbv0.0.38_qos", prop, {"nullable": True})
        for prop in (
            "limits.factor", "limits.max.accruing.per.account", "limits.max.accruing.per.user",
            "limits.max.jobs.active_jobs.per.account", "limits.max.jobs.active_jobs.per.user",
            "limits.max.wall_clock.per.job", "limits.max.wall_clock.per.qos", "limits.min.priority_threshold",
            "preempt.exempt_time", "usage_threshold",
        )
    ),
)  # fmt: skip


@lru_cache(maxsize=1)
def reference_document() -> dict[str, Any]:
    """slurmrestd 22.05's v0.0.38 document, as captured."""
    text = resources.files("spur.rest").joinpath("slurmrestd-openapi-v0.0.38.json").read_text()
    return json.loads(text)


def _refs(node: Any, out: set[str]) -> None:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/components/schemas/"):
            out.add(ref.rsplit("/", 1)[1])
        for value in node.values():
            _refs(value, out)
    elif isinstance(node, list):
        for value in node:
            _refs(value, out)


def _json_only(op: dict[str, Any]) -> None:
    body = op.get("requestBody")
    if isinstance(body, dict) and "content" in body:
        body["content"] = {k: v for k, v in body["content"].items() if k == "application/json"}
    for response in op.get("responses", {}).values():
        if isinstance(response, dict) and "content" in response:
            response["content"] = {k: v for k, v in response["content"].items() if k == "application/json"}


_ERRORS_REF = {
    "#/components/schemas/v0.0.38_errors": "v0.0.38_errors_response",
    "#/components/schemas/dbv0.0.38_errors": "dbv0.0.38_errors_response",
}


def _error_responses(op: dict[str, Any]) -> None:
    """Point error responses declared as the bare errors array at the object slurmrestd sends."""
    for response in op.get("responses", {}).values():
        for media in (response.get("content") or {}).values() if isinstance(response, dict) else ():
            name = _ERRORS_REF.get(media.get("schema", {}).get("$ref", ""))
            if name is not None:
                media["schema"] = {"$ref": f"#/components/schemas/{name}"}


def _error_response_schema(prefix: str) -> dict[str, Any]:
    return {
        "type": "object",
        "description": "Error answer: meta and the errors (slurmrestd's actual error body)",
        "properties": {
            "meta": {"$ref": f"#/components/schemas/{prefix}_meta"},
            "errors": {"$ref": f"#/components/schemas/{prefix}_errors"},
        },
    }


def _correct(schemas: dict[str, Any]) -> None:
    for name, path, change in CORRECTIONS:
        node = schemas.get(name)
        for part in path.split("."):
            if node is None:
                break
            node = node.get("properties", {}).get(part)
        if node is not None:
            node.update(change)
    config = schemas.get("dbv0.0.38_config_info", {}).get("properties", {})
    tres_list = schemas.get("dbv0.0.38_tres_list")
    if "tres" in config and tres_list is not None:
        config["tres"] = {"type": "array", "description": "Array of TRES", "items": copy.deepcopy(tres_list["items"])}


def build_document(registered: Iterable[tuple[str, str]]) -> dict[str, Any]:
    """The served document: reference paths/methods in ``registered`` ((OpenAPI path, method)
    pairs, e.g. ``("/slurm/v0.0.38/job/{job_id}", "get")``), the schemas they reference, corrected."""
    ref = reference_document()
    wanted: dict[str, set[str]] = {}
    for path, method in registered:
        wanted.setdefault(path, set()).add(method.lower())
    doc = {k: copy.deepcopy(v) for k, v in ref.items() if k not in ("paths", "components")}
    doc["info"]["description"] = (
        "Spur's slurmrestd-compatible API: slurmrestd 22.05's v0.0.38 document, limited to the "
        "operations Spur implements."
    )
    paths: dict[str, Any] = {}
    for path, item in ref["paths"].items():
        methods = wanted.get(path)
        if not methods:
            continue
        new_item = {k: copy.deepcopy(v) for k, v in item.items() if k in _PATH_ITEM_KEYS}
        for method in HTTP_METHODS:
            if method in methods and method in item:
                op = copy.deepcopy(item[method])
                _json_only(op)
                _error_responses(op)
                new_item[method] = op
        if any(m in new_item for m in HTTP_METHODS):
            paths[path] = new_item
    doc["paths"] = paths
    all_schemas = dict(ref["components"]["schemas"])
    all_schemas["v0.0.38_errors_response"] = _error_response_schema("v0.0.38")
    all_schemas["dbv0.0.38_errors_response"] = _error_response_schema("dbv0.0.38")
    keep: set[str] = set()
    pending: set[str] = set()
    _refs(paths, pending)
    while pending:
        name = pending.pop()
        if name in keep or name not in all_schemas:
            continue
        keep.add(name)
        found: set[str] = set()
        _refs(all_schemas[name], found)
        pending |= found - keep
    schemas = {name: copy.deepcopy(all_schemas[name]) for name in all_schemas if name in keep}
    _correct(schemas)
    components = {k: copy.deepcopy(v) for k, v in ref["components"].items() if k != "schemas"}
    components["schemas"] = schemas
    components.setdefault("securitySchemes", {})["bearer"] = {
        "type": "http",
        "scheme": "bearer",
        "bearerFormat": "JWT",
        "description": "Authorization: Bearer <jwt> (the same token as X-SLURM-USER-TOKEN)",
    }
    doc["components"] = components
    doc["security"] = [{"user": [], "token": []}, {"bearer": []}]
    return doc


def to_yaml(doc: dict[str, Any]) -> str:
    import yaml

    return yaml.safe_dump(doc, sort_keys=False)
