"""The OpenAPI documents Spur serves: each slurmrestd version's own document, unmodified (pure).

``slurmrestd-openapi-v0.0.38.json`` is slurmrestd 22.05's document; ``-v0.0.40/41/42.json`` are
slurmrestd 24.11's (``--generate-openapi-spec -d data_parser/v0.0.4x``). They are served byte for
byte as shipped, and every response Spur sends validates against its version's document (see
:mod:`spur.rest.conformance`), with one documented exception list: :data:`SENT_AS_NULL`, the
properties real slurmrestd itself sends as ``null`` although its document declares no ``nullable``.
Spur sends null there too, where it has no value, because a client generated from the document
parses null as "unset" for any optional property.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Any

from spur.version import REST_VERSIONS as VERSIONS

NEWEST = VERSIONS[-1]

# (schema, dotted property) where real slurmrestd sends null though the document declares no
# nullable: slurmrestd 22.05's answers in shared/reference/slurmrestd-22.05 (tests check each one
# against those answers). Only scalars and arrays: a client generated from the document parses null
# there as "unset", but fails on a null object (22.05's association ``usage``, which Spur leaves
# out). slurmrestd 24.11 sends null for a pending job's job_resources in v0.0.41/42 (an object,
# so Spur leaves it out; integration/test_rest_vs_slurm24.py).
SENT_AS_NULL: dict[str, tuple[tuple[str, str], ...]] = {
    "v0.0.38": (
        *(
            ("v0.0.38_job_response_properties", prop)
            for prop in (
                "array_task_id", "core_spec", "thread_spec", "cores_per_socket", "cpus_per_task",
                "cpu_frequency_minimum", "cpu_frequency_maximum", "cpu_frequency_governor", "nice",
                "tasks_per_core", "tasks_per_socket", "memory_per_node", "memory_per_cpu", "profile",
                "sockets_per_node", "threads_per_core",
            )
        ),
        *(
            ("dbv0.0.38_association", prop)
            for prop in (
                "default.qos", "max.jobs.per.wall_clock", "max.per.account.wall_clock",
                "min.priority_threshold", "parent_account", "partition", "priority", "user",
            )
        ),
    ),
    "v0.0.40": (),
    "v0.0.41": (),
    "v0.0.42": (),
}  # fmt: skip


def _file(version: str) -> str:
    if version not in VERSIONS:
        raise KeyError(f"no OpenAPI document for {version}")
    return f"slurmrestd-openapi-{version}.json"


@lru_cache(maxsize=len(VERSIONS))
def document_bytes(version: str) -> bytes:
    """The shipped document of ``version``, exactly as shipped."""
    return resources.files("spur.rest").joinpath(_file(version)).read_bytes()


@lru_cache(maxsize=len(VERSIONS))
def document(version: str) -> dict[str, Any]:
    """The parsed document of ``version`` (shared: never mutate it)."""
    return json.loads(document_bytes(version))


def reference_document() -> dict[str, Any]:
    """slurmrestd 22.05's v0.0.38 document."""
    return document("v0.0.38")


def operations(version: str) -> list[tuple[str, str]]:
    """Every (path, method) the document of ``version`` declares."""
    methods = ("get", "post", "delete", "put", "patch")
    return [(p, m) for p, item in document(version)["paths"].items() for m in methods if m in item]


@lru_cache(maxsize=len(VERSIONS))
def yaml_text(version: str) -> str:
    import yaml

    return yaml.safe_dump(document(version), sort_keys=False)
