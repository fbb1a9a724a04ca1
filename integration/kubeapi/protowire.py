"""Decode the Kubernetes protobuf envelope for the few kinds kubectl sends that way (pure, no I/O).

kubectl's typed clients (``create namespace``, ``create secret``, ``create configmap``, ``drain``'s
evictions, typed deletes) send ``application/vnd.kubernetes.protobuf`` bodies and do not fall back
to JSON on 415, so the double decodes them: the ``k8s\\x00`` magic, a ``runtime.Unknown`` holding
the TypeMeta and the raw message, and the message itself with the field numbers of
``k8s.io/api``'s generated.proto for the kinds below. Unknown fields are skipped; a kind outside
the table raises ``ProtoError``.
"""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from typing import Any

MAGIC = b"k8s\x00"


class ProtoError(ValueError):
    """A body that is not a Kubernetes protobuf message the double can read."""


# field number -> (json name, type, repeated). Types: "string", "bytes", "int", "bool", "time",
# "map:string", "map:bytes" (bytes values become base64 as in JSON), or a message name below.
Field = tuple[str, str, bool]
MESSAGES: dict[str, dict[int, Field]] = {
    "TypeMeta": {1: ("apiVersion", "string", False), 2: ("kind", "string", False)},
    "Unknown": {
        1: ("typeMeta", "TypeMeta", False),
        2: ("raw", "rawbytes", False),
        3: ("contentEncoding", "string", False),
        4: ("contentType", "string", False),
    },
    "ObjectMeta": {
        1: ("name", "string", False),
        2: ("generateName", "string", False),
        3: ("namespace", "string", False),
        5: ("uid", "string", False),
        6: ("resourceVersion", "string", False),
        7: ("generation", "int", False),
        8: ("creationTimestamp", "time", False),
        9: ("deletionTimestamp", "time", False),
        10: ("deletionGracePeriodSeconds", "int", False),
        11: ("labels", "map:string", False),
        12: ("annotations", "map:string", False),
        13: ("ownerReferences", "OwnerReference", True),
        14: ("finalizers", "string", True),
    },
    "OwnerReference": {
        1: ("kind", "string", False),
        3: ("name", "string", False),
        4: ("uid", "string", False),
        5: ("apiVersion", "string", False),
        6: ("controller", "bool", False),
        7: ("blockOwnerDeletion", "bool", False),
    },
    "Time": {1: ("seconds", "int", False), 2: ("nanos", "int", False)},
    "Secret": {
        1: ("metadata", "ObjectMeta", False),
        2: ("data", "map:bytes", False),
        3: ("type", "string", False),
        4: ("stringData", "map:string", False),
        5: ("immutable", "bool", False),
    },
    "ConfigMap": {
        1: ("metadata", "ObjectMeta", False),
        2: ("data", "map:string", False),
        3: ("binaryData", "map:bytes", False),
        4: ("immutable", "bool", False),
    },
    "Namespace": {1: ("metadata", "ObjectMeta", False), 2: ("spec", "NamespaceSpec", False)},
    "NamespaceSpec": {1: ("finalizers", "string", True)},
    "ServiceAccount": {
        1: ("metadata", "ObjectMeta", False),
        4: ("automountServiceAccountToken", "bool", False),
    },
    "Eviction": {1: ("metadata", "ObjectMeta", False), 2: ("deleteOptions", "DeleteOptions", False)},
    "DeleteOptions": {
        1: ("gracePeriodSeconds", "int", False),
        2: ("preconditions", "Preconditions", False),
        3: ("orphanDependents", "bool", False),
        4: ("propagationPolicy", "string", False),
        5: ("dryRun", "string", True),
    },
    "Preconditions": {1: ("uid", "string", False), 2: ("resourceVersion", "string", False)},
}


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise ProtoError("truncated varint")
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 70:
            raise ProtoError("varint too long")


def _fields(data: bytes) -> list[tuple[int, int, Any]]:
    """(field number, wire type, value) triples; length-delimited values are bytes."""
    out = []
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(data, pos)
        elif wire == 2:
            length, pos = _varint(data, pos)
            if pos + length > len(data):
                raise ProtoError("truncated length-delimited field")
            value, pos = data[pos : pos + length], pos + length
        elif wire == 1:
            value, pos = data[pos : pos + 8], pos + 8
        elif wire == 5:
            value, pos = data[pos : pos + 4], pos + 4
        else:
            raise ProtoError(f"unsupported wire type {wire}")
        out.append((number, wire, value))
    return out


def _signed(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


def decode_message(name: str, data: bytes) -> dict[str, Any]:
    """Decode ``data`` as message ``name`` into its JSON form."""
    schema = MESSAGES[name]
    out: dict[str, Any] = {}
    for number, _wire, value in _fields(data):
        spec = schema.get(number)
        if spec is None:
            continue
        key, typ, repeated = spec
        if typ.startswith("map:"):
            entry = {n: v for n, _, v in _fields(value)}
            k = entry.get(1, b"").decode()
            v = entry.get(2, b"")
            out.setdefault(key, {})[k] = base64.b64encode(v).decode() if typ == "map:bytes" else v.decode()
            continue
        if typ == "string":
            decoded: Any = value.decode()
        elif typ in ("bytes", "rawbytes"):
            decoded = bytes(value)
        elif typ == "int":
            decoded = _signed(value)
        elif typ == "bool":
            decoded = bool(value)
        elif typ == "time":
            t = decode_message("Time", value)
            decoded = datetime.fromtimestamp(t.get("seconds", 0), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        else:
            decoded = decode_message(typ, value)
        if repeated:
            out.setdefault(key, []).append(decoded)
        elif decoded not in ("", 0, False, b""):  # JSON's omitempty: zero values are absent
            out[key] = decoded
    return out


def decode_object(body: bytes) -> dict[str, Any]:
    """A protobuf request body (magic + ``runtime.Unknown``) as the JSON object it stands for."""
    if not body.startswith(MAGIC):
        raise ProtoError("not a Kubernetes protobuf body (missing the k8s\\0 prefix)")
    unknown = decode_message("Unknown", body[len(MAGIC) :])
    type_meta = unknown.get("typeMeta") or {}
    kind = type_meta.get("kind", "")
    if kind not in MESSAGES or kind in ("TypeMeta", "Unknown", "Time"):
        raise ProtoError(f"the double cannot decode protobuf for kind {kind or '(none)'}; send JSON")
    obj = decode_message(kind, unknown.get("raw", b""))
    return {"apiVersion": type_meta.get("apiVersion", ""), "kind": kind, **obj}
