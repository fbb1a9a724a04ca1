"""Server-side field validation (``?fieldValidation=Strict``, what kubectl asks for by default).

Built-in kinds are checked against the official schemas for Kubernetes 1.32 that the
``kubernetes-validate`` package ships (a development dependency; without it built-in kinds are
not checked). Custom resources are checked against their CRD's ``openAPIV3Schema`` with
``jsonschema``, and fields the schema does not declare are refused, as the real server does in
strict mode instead of pruning them. Failures are ``ApiError``: 400 BadRequest for an unknown
field, 422 Invalid for a value of the wrong type or shape. Without strict validation a custom
resource is still checked against its schema, and undeclared fields are pruned.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from integration.kubeapi.errors import ApiError
from integration.kubeapi.resources import ResourceType

KUBERNETES_VERSION = "1.32"


def _path(parts: Any) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def unknown_fields(obj: Any, schema: dict[str, Any], prefix: str = "") -> Iterator[str]:
    """Paths in ``obj`` that ``schema`` (a structural CRD schema) does not declare."""
    if not isinstance(schema, dict) or schema.get("x-kubernetes-preserve-unknown-fields"):
        return
    if isinstance(obj, dict):
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        for key, value in obj.items():
            path = f"{prefix}.{key}" if prefix else key
            if props is not None and key in props:
                if path != "metadata":
                    yield from unknown_fields(value, props[key], path)
            elif isinstance(extra, dict):
                yield from unknown_fields(value, extra, path)
            elif props is not None and extra is not True:
                yield path
    elif isinstance(obj, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(obj):
            yield from unknown_fields(item, schema["items"], f"{prefix}[{i}]")


def prune(obj: Any, schema: dict[str, Any], top: bool = True) -> Any:
    """``obj`` without the fields ``schema`` does not declare (what the server stores for a custom
    resource when the client did not ask for strict validation)."""
    if not isinstance(schema, dict) or schema.get("x-kubernetes-preserve-unknown-fields"):
        return obj
    if isinstance(obj, dict):
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        out = {}
        for key, value in obj.items():
            if top and key in ("apiVersion", "kind", "metadata"):
                out[key] = value
            elif props is not None and key in props:
                out[key] = prune(value, props[key], False)
            elif isinstance(extra, dict):
                out[key] = prune(value, extra, False)
            elif props is None or extra is True:
                out[key] = value
        return out
    if isinstance(obj, list) and isinstance(schema.get("items"), dict):
        return [prune(item, schema["items"], False) for item in obj]
    return obj


def _unknown(rt: ResourceType, name: str, fields: list[str]) -> ApiError:
    listed = ", ".join(f'unknown field "{f}"' for f in fields)
    return ApiError(
        400,
        "BadRequest",
        f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: strict decoding error: {listed}',
        kind=rt.kind,
        name=name,
    )


def admit(rt: ResourceType, obj: dict[str, Any], strict: bool) -> dict[str, Any]:
    """The object to store for a main-resource write of ``obj``, or an ``ApiError``.

    A custom resource with a schema is always checked against it (types, required fields);
    fields the schema does not declare are refused when ``strict`` and pruned otherwise, as the
    real server does. Built-in kinds are checked only when ``strict``. ``status`` is not checked:
    the server keeps its own status on main-resource writes, whatever the client sent.
    """
    name = (obj.get("metadata") or {}).get("name", "")
    if rt.schema is not None:
        body = {k: v for k, v in obj.items() if k != "status"}
        unknown = [f for f in unknown_fields(body, rt.schema) if f not in ("apiVersion", "kind")]
        if unknown and strict:
            raise _unknown(rt, name, unknown)
        if unknown:
            obj = prune(obj, rt.schema)
            body = {k: v for k, v in obj.items() if k != "status"}
        import jsonschema

        error = jsonschema.exceptions.best_match(jsonschema.Draft7Validator(rt.schema).iter_errors(body))
        if error is not None:
            field = _path(error.absolute_path) or "<root>"
            raise ApiError(
                422,
                "Invalid",
                f'{rt.kind}.{rt.group} "{name}" is invalid: {field}: {error.message}',
                kind=rt.kind,
                group=rt.group,
                name=name,
                causes=[{"reason": "FieldValueInvalid", "message": error.message, "field": field}],
            )
        return obj
    if strict and rt.strategic:
        _validate_builtin(rt, {k: v for k, v in obj.items() if k != "status"}, name)
    return obj


def _type_name(value: Any) -> str:
    """The JSON type of ``value`` as the server names it in a type error."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    return {str: "string", list: "array", dict: "object"}.get(type(value), type(value).__name__)


def _schema_error(rt: ResourceType, name: str, error: Any) -> ApiError:
    """A jsonschema error as kube-apiserver words it: ``<field>: Invalid value: "<given type>": <field>
    in body must be of type <type>: "<given type>"`` for a wrong type (``null`` included: a field that is
    not ``nullable`` may not be null), ``<field>: <message>`` otherwise."""
    field = _path(error.absolute_path) or "<root>"
    if error.validator == "type":
        value = _type_name(error.instance)
        message = (
            f'Invalid value: "{value}": {field} in body must be of type {error.validator_value}: "{value}"'
        )
    else:
        message = error.message
    return ApiError(
        422,
        "Invalid",
        f'{rt.kind}.{rt.group} "{name}" is invalid: {field}: {message}',
        kind=rt.kind,
        group=rt.group,
        name=name,
        causes=[{"reason": "FieldValueInvalid", "message": message, "field": field}],
    )


def admit_status(rt: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
    """The object to store for a status-subresource write of a custom resource, or an ``ApiError``.

    The real server validates the whole object, ``status`` included, against the CRD's schema on
    status writes (a status field of the wrong type, or null where the schema does not say
    ``nullable``, is 422 Invalid) and prunes status fields the schema does not declare."""
    if rt.schema is None:
        return obj
    name = (obj.get("metadata") or {}).get("name", "")
    if list(unknown_fields({"status": obj.get("status")}, rt.schema)):
        obj = prune(obj, rt.schema)
    import jsonschema

    error = jsonschema.exceptions.best_match(jsonschema.Draft7Validator(rt.schema).iter_errors(obj))
    if error is not None:
        raise _schema_error(rt, name, error)
    return obj


def _validate_builtin(rt: ResourceType, obj: dict[str, Any], name: str) -> None:
    try:
        import kubernetes_validate
    except ImportError:
        return
    try:
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
    except kubernetes_validate.ValidationError as exc:
        field = _path(exc.absolute_path)
        if exc.validator == "additionalProperties":
            instance = exc.instance if isinstance(exc.instance, dict) else {}
            declared = (exc.schema or {}).get("properties") or {}
            extra = [k for k in instance if k not in declared]
            raise _unknown(rt, name, [f"{field}.{k}" if field else k for k in extra]) from None
        raise ApiError(
            422,
            "Invalid",
            f'{rt.kind} "{name}" is invalid: {field or "<root>"}: {exc.message}',
            kind=rt.kind,
            group=rt.group,
            name=name,
            causes=[{"reason": "FieldValueInvalid", "message": exc.message, "field": field}],
        ) from None
    except kubernetes_validate.SchemaNotFoundError:
        return
