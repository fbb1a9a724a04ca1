"""Slurm's REST error vocabulary (pure): error numbers, ``meta``, ``errors[]`` bodies, RpcError mapping.

Every REST response carries ``meta`` (plugin and Slurm version, as slurmrestd 22.05 sends them) and
``errors`` (a list of ``{error_number, error, description, source}``). :class:`RestError` is what a
view raises to answer with one error entry and an HTTP status; :func:`from_rpc_error` turns the
gRPC status a ControllerService method raised into the matching Slurm error number and HTTP status.
"""

from __future__ import annotations

import logging
from typing import Any

from spur.rpc.status import RpcError, StatusCode

log = logging.getLogger("spur.rest.errors")

# strings, as 22.05's document declares them (slurmrestd 22.05 itself sent ints)
SLURM_VERSION = {"major": "22", "micro": "8", "minor": "5"}
SLURM_RELEASE = "22.05.8"

# Slurm's error numbers (slurm_errno.h, 22.05) and their texts, for the errors REST can report.
SLURM_ERROR = -1
ESLURM_INVALID_PARTITION_NAME = 2000
ESLURM_ACCESS_DENIED = 2002
ESLURM_INVALID_NODE_COUNT = 2006
ESLURM_JOB_SCRIPT_MISSING = 2009
ESLURM_USER_ID_MISSING = 2010
ESLURM_PATHNAME_TOO_LONG = 2012
ESLURM_INVALID_JOB_ID = 2017
ESLURM_INVALID_NODE_NAME = 2018
ESLURM_TRANSITION_STATE_NO_UPDATE = 2020
ESLURM_ALREADY_DONE = 2021
ESLURM_JOB_PENDING = 2024
ESLURM_NOT_SUPPORTED = 2036
ESLURM_DEPENDENCY = 2038
ESLURM_INVALID_ACCOUNT = 2045
ESLURM_INVALID_TIME_LIMIT = 2051
ESLURM_INVALID_QOS = 2066
ESLURM_INVALID_PARTITION_UNKNOWN = 2000
SLURM_PROTOCOL_AUTHENTICATION_ERROR = 1007
ESLURM_REST_INVALID_QUERY = 9000
ESLURM_REST_FAIL_PARSING = 9001
ESLURM_REST_INVALID_JOBS_DESC = 9002
ESLURM_REST_EMPTY_RESULT = 9003
ESLURM_DATA_CONV_FAILED = 9202
ESLURM_CONTROLLER_UNAVAILABLE = 1011  # SLURM_COMMUNICATIONS_CONNECTION_ERROR-like: no leader known

ERROR_TEXT: dict[int, str] = {
    SLURM_ERROR: "Unspecified error",
    ESLURM_INVALID_PARTITION_NAME: "Invalid partition name specified",
    ESLURM_ACCESS_DENIED: "Access/permission denied",
    ESLURM_INVALID_NODE_COUNT: "Node count specification invalid",
    ESLURM_JOB_SCRIPT_MISSING: "Job script not specified",
    ESLURM_USER_ID_MISSING: "Invalid user id",
    ESLURM_PATHNAME_TOO_LONG: "Pathname of a file, directory or other parameter too long",
    ESLURM_INVALID_JOB_ID: "Invalid job id specified",
    ESLURM_INVALID_NODE_NAME: "Invalid node name specified",
    ESLURM_TRANSITION_STATE_NO_UPDATE: "Job can not be altered now, try again later",
    ESLURM_ALREADY_DONE: "Job/step already completing or completed",
    ESLURM_JOB_PENDING: "Job is pending execution",
    ESLURM_NOT_SUPPORTED: "Requested operation not supported on this system",
    ESLURM_DEPENDENCY: "Job dependency problem",
    ESLURM_INVALID_ACCOUNT: "Invalid account or account/partition combination specified",
    ESLURM_INVALID_TIME_LIMIT: "Requested time limit is invalid (missing or exceeds some limit)",
    ESLURM_INVALID_QOS: "Invalid qos specification",
    SLURM_PROTOCOL_AUTHENTICATION_ERROR: "Protocol authentication error",
    ESLURM_REST_INVALID_QUERY: "Query empty or not RFC7320 compliant",
    ESLURM_REST_FAIL_PARSING: "Failure during parsing",
    ESLURM_REST_INVALID_JOBS_DESC: "Jobs description entry not found, empty or not dictionary or list",
    ESLURM_REST_EMPTY_RESULT: "Nothing found with query",
    ESLURM_DATA_CONV_FAILED: "Conversion of data type failed",
    ESLURM_CONTROLLER_UNAVAILABLE: "Unable to contact slurm controller (connect failure)",
}


class RestError(Exception):
    """One Slurm error answered with an HTTP status. ``description`` must never hold a secret."""

    def __init__(
        self,
        status: int,
        error_number: int,
        description: str = "",
        source: str = "",
        error: str | None = None,
    ) -> None:
        self.status = status
        self.error_number = error_number
        self.error = error if error is not None else ERROR_TEXT.get(error_number, ERROR_TEXT[SLURM_ERROR])
        self.description = description
        self.source = source
        super().__init__(f"{self.error}: {description}" if description else self.error)

    def entry(self) -> dict[str, Any]:
        return error_entry(self.error_number, self.description, self.source, self.error)


def meta(db: bool = False) -> dict[str, Any]:
    """The ``meta`` object of v0.0.38 (``db``: the slurmdb plugin's)."""
    plugin = (
        {"type": "openapi/dbv0.0.38", "name": "Slurm OpenAPI DB v0.0.38"}
        if db
        else {"type": "openapi/v0.0.38", "name": "Slurm OpenAPI v0.0.38"}
    )
    return {"plugin": plugin, "Slurm": {"version": dict(SLURM_VERSION), "release": SLURM_RELEASE}}


def error_entry(error_number: int, description: str = "", source: str = "", error: str | None = None) -> dict:
    return {
        "description": description,
        "error_number": error_number,
        "error": error if error is not None else ERROR_TEXT.get(error_number, ERROR_TEXT[SLURM_ERROR]),
        "source": source,
    }


def body(db: bool = False, errors: list[dict] | None = None, **fields: Any) -> dict[str, Any]:
    """A response body: ``meta``, ``errors`` then the given fields (in that order, as Slurm does)."""
    out: dict[str, Any] = {"meta": meta(db), "errors": list(errors or [])}
    out.update(fields)
    return out


# Message prefixes of the controller's refusals (state machine texts are Slurm's) -> error number.
_MESSAGE_NUMBERS: tuple[tuple[str, int], ...] = (
    ("invalid job id", ESLURM_INVALID_JOB_ID),
    ("invalid partition", ESLURM_INVALID_PARTITION_NAME),
    ("partition", ESLURM_INVALID_PARTITION_NAME),
    ("no partition specified", ESLURM_INVALID_PARTITION_NAME),
    ("invalid node name", ESLURM_INVALID_NODE_NAME),
    ("node ", ESLURM_INVALID_NODE_NAME),
    ("access/permission denied", ESLURM_ACCESS_DENIED),
    ("job/step already completing", ESLURM_ALREADY_DONE),
    ("job is no longer pending", ESLURM_TRANSITION_STATE_NO_UPDATE),
    ("job is not running", ESLURM_JOB_PENDING),
    ("job dependency", ESLURM_DEPENDENCY),
    ("dependency", ESLURM_DEPENDENCY),
    ("requested time limit", ESLURM_INVALID_TIME_LIMIT),
    ("time limit", ESLURM_INVALID_TIME_LIMIT),
    ("invalid account", ESLURM_INVALID_ACCOUNT),
    ("invalid qos", ESLURM_INVALID_QOS),
    ("node count", ESLURM_INVALID_NODE_COUNT),
)

_HTTP_STATUS: dict[StatusCode, int] = {
    StatusCode.INVALID_ARGUMENT: 400,
    StatusCode.OUT_OF_RANGE: 400,
    StatusCode.NOT_FOUND: 404,
    StatusCode.ALREADY_EXISTS: 409,
    StatusCode.FAILED_PRECONDITION: 409,
    StatusCode.ABORTED: 409,
    StatusCode.PERMISSION_DENIED: 403,
    StatusCode.UNAUTHENTICATED: 401,
    StatusCode.RESOURCE_EXHAUSTED: 429,
    StatusCode.UNIMPLEMENTED: 501,
    StatusCode.UNAVAILABLE: 503,
    StatusCode.DEADLINE_EXCEEDED: 504,
}


# The only text of a REST 401: it must not depend on whether the named user exists (spur.rest.auth).
AUTHENTICATION_FAILED = (
    "Authentication failure: send X-SLURM-USER-NAME with X-SLURM-USER-TOKEN, or Authorization: "
    "Bearer, carrying a valid token of that user (see 'scontrol token')"
)


def authentication_failed(source: str, reason: str) -> RestError:
    """The 401 of every REST authentication failure; ``reason`` (no secrets in it) is only logged."""
    log.info("REST authentication refused (%s): %s", source, reason)
    return RestError(401, SLURM_PROTOCOL_AUTHENTICATION_ERROR, AUTHENTICATION_FAILED, source)


def from_rpc_error(exc: RpcError, source: str) -> RestError:
    """The RestError for a ControllerService refusal: HTTP status by gRPC code, Slurm error number by
    code and (for argument/precondition errors) by the message, which is Slurm's own text where Slurm
    has one. The description is the service's message (it never holds secrets), except for
    UNAUTHENTICATED: every REST 401 says the same (:func:`authentication_failed`)."""
    status = _HTTP_STATUS.get(exc.code, 500)
    message = exc.message or ""
    lowered = message.lower()
    if exc.code is StatusCode.UNAUTHENTICATED:
        return authentication_failed(source, message)  # one text for every 401
    if exc.code is StatusCode.PERMISSION_DENIED:
        number = ESLURM_ACCESS_DENIED
    elif exc.code is StatusCode.UNAVAILABLE:
        number = ESLURM_CONTROLLER_UNAVAILABLE
    else:
        number = next((n for prefix, n in _MESSAGE_NUMBERS if lowered.startswith(prefix)), SLURM_ERROR)
        if number == SLURM_ERROR:
            number = next((n for prefix, n in _MESSAGE_NUMBERS if prefix.strip() in lowered), SLURM_ERROR)
    return RestError(status, number, message, source)
