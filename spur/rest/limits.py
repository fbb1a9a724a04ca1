"""Request limits and JSON body decoding for the REST API (pure).

:func:`decode_body` turns raw request bytes into a JSON value or raises :class:`RestError`:
413 for a body over ``max_body_bytes``; 400 for bytes that are not UTF-8 JSON, nesting deeper than
``max_depth``, a string (or object key) longer than ``max_string``, or a top level that is not an
object. It runs before any service call, so a refused request never changes state.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from spur.rest.errors import ESLURM_REST_FAIL_PARSING, ESLURM_REST_INVALID_QUERY, RestError

DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024
DEFAULT_MAX_DEPTH = 32
DEFAULT_MAX_STRING = 1024 * 1024


@dataclass(frozen=True)
class Limits:
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    max_depth: int = DEFAULT_MAX_DEPTH
    max_string: int = DEFAULT_MAX_STRING


def too_large(limit: int, source: str) -> RestError:
    return RestError(
        413, ESLURM_REST_FAIL_PARSING, f"request body is larger than the limit of {limit} bytes", source
    )


def decode_body(raw: bytes, limits: Limits, source: str) -> dict[str, Any]:
    """Decode a JSON object body within ``limits`` (see the module docstring)."""
    if len(raw) > limits.max_body_bytes:
        raise too_large(limits.max_body_bytes, source)
    if not raw.strip():
        raise RestError(400, ESLURM_REST_INVALID_QUERY, "request body is empty", source)
    try:
        value = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise RestError(400, ESLURM_REST_FAIL_PARSING, "request body is not UTF-8", source) from None
    except RecursionError:
        raise RestError(
            400, ESLURM_REST_FAIL_PARSING, f"JSON nesting deeper than {limits.max_depth}", source
        ) from None
    except ValueError as exc:
        raise RestError(400, ESLURM_REST_FAIL_PARSING, f"invalid JSON: {exc}", source) from None
    check_value(value, limits, source)
    if not isinstance(value, dict):
        raise RestError(400, ESLURM_REST_FAIL_PARSING, "request body must be a JSON object", source)
    return value


def check_value(value: Any, limits: Limits, source: str) -> None:
    """Raise a 400 RestError if ``value`` nests deeper than allowed or holds an over-long string."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth > limits.max_depth:
                raise RestError(
                    400, ESLURM_REST_FAIL_PARSING, f"JSON nesting deeper than {limits.max_depth}", source
                )
            children = item.items() if isinstance(item, dict) else ((None, v) for v in item)
            for key, child in children:
                if key is not None and len(key) > limits.max_string:
                    raise _long_string(limits, source)
                stack.append((child, depth + 1))
        elif isinstance(item, str) and len(item) > limits.max_string:
            raise _long_string(limits, source)


def _long_string(limits: Limits, source: str) -> RestError:
    return RestError(
        400, ESLURM_REST_FAIL_PARSING, f"a string is longer than the limit of {limits.max_string}", source
    )
