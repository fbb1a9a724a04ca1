"""Kubernetes API errors as the real server reports them: ``metav1.Status`` objects (pure, no I/O)."""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """An API failure with the HTTP status code, the machine-readable reason and a message.

    ``status()`` is the ``Status`` body the real kube-apiserver sends for the same failure, which
    is what kubectl and client libraries parse (``Error from server (NotFound): ...``).
    """

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        *,
        kind: str | None = None,
        group: str | None = None,
        name: str | None = None,
        causes: list[dict[str, str]] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details: dict[str, Any] = {}
        if name is not None:
            self.details["name"] = name
        if group is not None:
            self.details["group"] = group
        if kind is not None:
            self.details["kind"] = kind
        if causes:
            self.details["causes"] = causes

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details:
            body["details"] = dict(self.details)
        return body


def _qualified(plural: str, group: str) -> str:
    return f"{plural}.{group}" if group else plural


def not_found(plural: str, group: str, name: str) -> ApiError:
    return ApiError(
        404,
        "NotFound",
        f'{_qualified(plural, group)} "{name}" not found',
        kind=plural,
        group=group,
        name=name,
    )


def already_exists(plural: str, group: str, name: str) -> ApiError:
    return ApiError(
        409,
        "AlreadyExists",
        f'{_qualified(plural, group)} "{name}" already exists',
        kind=plural,
        group=group,
        name=name,
    )


def conflict(plural: str, group: str, name: str) -> ApiError:
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {_qualified(plural, group)} "{name}": the object has been '
        "modified; please apply your changes to the latest version and try again",
        kind=plural,
        group=group,
        name=name,
    )


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def invalid(kind: str, group: str, name: str, field: str, message: str) -> ApiError:
    return ApiError(
        422,
        "Invalid",
        f'{kind} "{name}" is invalid: {field}: {message}',
        kind=kind,
        group=group,
        name=name,
        causes=[{"reason": "FieldValueInvalid", "message": message, "field": field}],
    )


def method_not_allowed(
    message: str = "the server does not allow this method on the requested resource",
) -> ApiError:
    return ApiError(405, "MethodNotAllowed", message)


def expired(message: str) -> ApiError:
    return ApiError(410, "Expired", message)


def success_status(name: str, group: str, kind: str, uid: str | None = None) -> dict[str, Any]:
    """The ``Status`` a successful delete or eviction answers with."""
    details: dict[str, Any] = {"name": name, "group": group, "kind": kind}
    if uid:
        details["uid"] = uid
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details}
