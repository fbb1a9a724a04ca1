"""Validate a response body against an OpenAPI 3.0 document, unmodified (pure; jsonschema is a dev
dependency, imported only here).

:func:`response_schema` finds the schema an operation declares for a status (the status's own entry,
else ``default``); :class:`DocumentValidator` validates a body against it with OpenAPI 3.0's
meaning: ``nullable`` allows null, ``$ref`` resolves inside the document. ``allow_null`` names
``(schema, property)`` pairs where null is accepted although the document declares no ``nullable``:
the places real slurmrestd itself sends null (see docs/rest.md); nothing else is relaxed.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable
from typing import Any

_PARAM = re.compile(r"\{[^}/]+\}")


def _openapi_to_jsonschema(node: Any) -> Any:
    """OpenAPI 3.0 schema objects -> JSON Schema (draft 7): ``nullable`` -> a null type."""
    if isinstance(node, list):
        return [_openapi_to_jsonschema(v) for v in node]
    if not isinstance(node, dict):
        return node
    out = {k: _openapi_to_jsonschema(v) for k, v in node.items() if k not in ("nullable", "example")}
    if node.get("nullable") is True:
        if "type" in out:
            kind = out["type"]
            out["type"] = [*kind, "null"] if isinstance(kind, list) else [kind, "null"]
            if "enum" in out:
                out["enum"] = [*out["enum"], None]
        else:
            out = {"anyOf": [out, {"type": "null"}]}
    return out


def find_operation(doc: dict[str, Any], method: str, path: str) -> tuple[str, dict[str, Any]]:
    """The document's (path template, operation) matching a concrete request ``path`` (a trailing
    ``/`` on either side is ignored, as slurmrestd ignores it); KeyError when none matches."""
    wanted = path.split("?", 1)[0].rstrip("/")
    # literal paths first: job/submit is not job/{job_id}
    for template, item in sorted(doc["paths"].items(), key=lambda kv: kv[0].count("{")):
        pattern = "^" + _PARAM.sub("[^/]+", re.escape(template.rstrip("/")).replace(r"\{", "{").replace(r"\}", "}")) + "$"
        if re.match(pattern, wanted) and method.lower() in item:
            return template, item[method.lower()]
    raise KeyError(f"{method.upper()} {path}: no such operation in the document")


def response_schema(op: dict[str, Any], status: int) -> dict[str, Any] | None:
    """The declared JSON schema of the answer with ``status``; None when the document declares
    that answer without a body schema (anything validates)."""
    responses = op["responses"]
    entry = responses.get(str(status)) or responses.get("default")
    if entry is None:
        raise KeyError(f"status {status} is not declared")
    return (entry.get("content") or {}).get("application/json", {}).get("schema")


class DocumentValidator:
    """Validates bodies against one OpenAPI document (see the module docstring)."""

    def __init__(self, doc: dict[str, Any], allow_null: Iterable[tuple[str, str]] = ()) -> None:
        from jsonschema import Draft7Validator

        components = copy.deepcopy(doc.get("components", {}))
        schemas = components.get("schemas", {})
        for name, prop in allow_null:
            node = schemas.get(name)
            for part in prop.split("."):
                node = (node or {}).get("properties", {}).get(part)
            if node is None:
                raise KeyError(f"{name}.{prop}: no such property in the document")
            node["nullable"] = True
        self.doc = doc
        self._components = _openapi_to_jsonschema(components)
        self._validator_cls = Draft7Validator
        self._cache: dict[str, Any] = {}

    def _validator(self, schema: dict[str, Any]) -> Any:
        key = repr(schema)
        found = self._cache.get(key)
        if found is None:
            root = dict(_openapi_to_jsonschema(schema))
            root["components"] = self._components
            found = self._cache[key] = self._validator_cls(root)
        return found

    def errors(self, method: str, path: str, status: int, body: Any) -> list[str]:
        """Every way ``body`` (the answer to ``method path`` with ``status``) breaks its schema."""
        _, op = find_operation(self.doc, method, path)
        schema = response_schema(op, status)
        if schema is None:
            return []
        validator = self._validator(schema)
        out = []
        for err in validator.iter_errors(body):
            where = "$" + "".join(f"[{p!r}]" if isinstance(p, int) else f".{p}" for p in err.absolute_path)
            out.append(f"{where}: {err.message[:200]}")
        return out

    def schema_errors(self, schema_name: str, value: Any) -> list[str]:
        validator = self._validator({"$ref": f"#/components/schemas/{schema_name}"})
        return [f"{list(e.absolute_path)}: {e.message[:200]}" for e in validator.iter_errors(value)]
