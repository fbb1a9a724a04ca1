"""Decode the Kubernetes protobuf envelope for the few kinds kubectl sends that way (pure, no I/O).

kubectl's typed clients (``create namespace``, ``create secret``, ``create configmap``,
``create deployment``, ``drain``'s evictions, typed deletes) send ``application/vnd.kubernetes.protobuf`` bodies and do not fall back
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
# "map:string", "map:bytes" (bytes values become base64 as in JSON), "map:quantity" (resource.Quantity
# values, strings in JSON), "intorstr" (intstr.IntOrString), or a message name below. A type ending
# in "?" is a pointer field in Go: its zero value was set on purpose and is kept (``replicas: 0``).
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
    # apps/v1 (kubectl create deployment)
    "Deployment": {
        1: ("metadata", "ObjectMeta", False),
        2: ("spec", "DeploymentSpec", False),
        3: ("status", "DeploymentStatus", False),
    },
    "DeploymentSpec": {
        1: ("replicas", "int?", False),
        2: ("selector", "LabelSelector", False),
        3: ("template", "PodTemplateSpec", False),
        4: ("strategy", "DeploymentStrategy", False),
        5: ("minReadySeconds", "int", False),
        6: ("revisionHistoryLimit", "int?", False),
        7: ("paused", "bool", False),
        9: ("progressDeadlineSeconds", "int?", False),
    },
    "DeploymentStrategy": {
        1: ("type", "string", False),
        2: ("rollingUpdate", "RollingUpdateDeployment", False),
    },
    "RollingUpdateDeployment": {1: ("maxUnavailable", "intorstr", False), 2: ("maxSurge", "intorstr", False)},
    "DeploymentStatus": {},
    "LabelSelector": {
        1: ("matchLabels", "map:string", False),
        2: ("matchExpressions", "LabelSelectorRequirement", True),
    },
    "LabelSelectorRequirement": {
        1: ("key", "string", False),
        2: ("operator", "string", False),
        3: ("values", "string", True),
    },
    "IntOrString": {1: ("type", "int", False), 2: ("intVal", "int", False), 3: ("strVal", "string", False)},
    # core/v1 pods and pod templates (the fields kubectl's generators fill in)
    "Pod": {
        1: ("metadata", "ObjectMeta", False),
        2: ("spec", "PodSpec", False),
        3: ("status", "PodStatus", False),
    },
    "PodStatus": {},
    "PodTemplateSpec": {1: ("metadata", "ObjectMeta", False), 2: ("spec", "PodSpec", False)},
    "PodSpec": {
        2: ("containers", "Container", True),
        3: ("restartPolicy", "string", False),
        4: ("terminationGracePeriodSeconds", "int?", False),
        5: ("activeDeadlineSeconds", "int?", False),
        6: ("dnsPolicy", "string", False),
        7: ("nodeSelector", "map:string", False),
        8: ("serviceAccountName", "string", False),
        10: ("nodeName", "string", False),
        11: ("hostNetwork", "bool", False),
        16: ("hostname", "string", False),
        19: ("schedulerName", "string", False),
        20: ("initContainers", "Container", True),
        24: ("priorityClassName", "string", False),
    },
    "Container": {
        1: ("name", "string", False),
        2: ("image", "string", False),
        3: ("command", "string", True),
        4: ("args", "string", True),
        5: ("workingDir", "string", False),
        6: ("ports", "ContainerPort", True),
        7: ("env", "EnvVar", True),
        8: ("resources", "ResourceRequirements", False),
        13: ("terminationMessagePath", "string", False),
        14: ("imagePullPolicy", "string", False),
        16: ("stdin", "bool", False),
        17: ("stdinOnce", "bool", False),
        18: ("tty", "bool", False),
        20: ("terminationMessagePolicy", "string", False),
    },
    "ContainerPort": {
        1: ("name", "string", False),
        2: ("hostPort", "int", False),
        3: ("containerPort", "int", False),
        4: ("protocol", "string", False),
        5: ("hostIP", "string", False),
    },
    "EnvVar": {1: ("name", "string", False), 2: ("value", "string", False)},
    "ResourceRequirements": {1: ("limits", "map:quantity", False), 2: ("requests", "map:quantity", False)},
    "Quantity": {1: ("string", "string", False)},
}

#: Message names that are parts of objects, never a body's kind.
_NOT_KINDS = {
    name
    for name in MESSAGES
    if name
    not in (
        "Secret",
        "ConfigMap",
        "Namespace",
        "ServiceAccount",
        "Eviction",
        "DeleteOptions",
        "Deployment",
        "Pod",
    )
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
            if typ == "map:bytes":
                out.setdefault(key, {})[k] = base64.b64encode(v).decode()
            elif typ == "map:quantity":
                out.setdefault(key, {})[k] = decode_message("Quantity", v).get("string", "")
            else:
                out.setdefault(key, {})[k] = v.decode()
            continue
        keep_zero = typ.endswith("?")
        typ = typ.rstrip("?")
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
            if not t:  # an empty Timestamp is Go's zero time, null (absent) in JSON
                continue
            decoded = datetime.fromtimestamp(t.get("seconds", 0), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        elif typ == "intorstr":
            ios = decode_message("IntOrString", value)
            decoded = ios.get("strVal", "") if ios.get("type") == 1 else ios.get("intVal", 0)
            keep_zero = True
        else:
            decoded = decode_message(typ, value)
        if repeated:
            out.setdefault(key, []).append(decoded)
        elif keep_zero or decoded not in ("", 0, False, b""):  # JSON's omitempty: zero values are absent
            out[key] = decoded
    return out


def decode_object(body: bytes) -> dict[str, Any]:
    """A protobuf request body (magic + ``runtime.Unknown``) as the JSON object it stands for."""
    if not body.startswith(MAGIC):
        raise ProtoError("not a Kubernetes protobuf body (missing the k8s\\0 prefix)")
    unknown = decode_message("Unknown", body[len(MAGIC) :])
    type_meta = unknown.get("typeMeta") or {}
    kind = type_meta.get("kind", "")
    if kind not in MESSAGES or kind in _NOT_KINDS:
        raise ProtoError(f"the double cannot decode protobuf for kind {kind or '(none)'}; send JSON")
    obj = decode_message(kind, unknown.get("raw", b""))
    return {"apiVersion": type_meta.get("apiVersion", ""), "kind": kind, **obj}
