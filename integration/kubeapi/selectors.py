"""Label and field selectors: parsing and matching, as the API server implements them (pure, no I/O).

Label selector syntax (the ``labelSelector`` query parameter): comma-separated requirements
``k=v``, ``k==v``, ``k!=v``, ``k in (a,b)``, ``k notin (a,b)``, ``k`` (exists), ``!k`` (does not
exist). Field selectors (``fieldSelector``): ``f=v``, ``f==v``, ``f!=v`` over a fixed set of fields
per kind. A malformed selector raises ``SelectorError``; the server turns it into 400 BadRequest.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

_KEY = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


class SelectorError(ValueError):
    """A selector that cannot be parsed, or names a field the kind does not support."""


@dataclass(frozen=True)
class Requirement:
    """One requirement. ``op`` is one of ``=``, ``!=``, ``in``, ``notin``, ``exists``, ``!exists``."""

    key: str
    op: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        if self.op == "=":
            return present and value == self.values[0]
        if self.op == "!=":
            return not present or value != self.values[0]
        if self.op == "in":
            return present and value in self.values
        if self.op == "notin":
            return not present or value not in self.values
        if self.op == "exists":
            return present
        if self.op == "!exists":
            return not present
        raise AssertionError(self.op)


Selector = tuple[Requirement, ...]


def _split_terms(text: str) -> list[str]:
    terms: list[str] = []
    depth = 0
    current: list[str] = []
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth < 0:
                raise SelectorError(f"unbalanced parentheses in selector {text!r}")
        if ch == "," and depth == 0:
            terms.append("".join(current))
            current = []
        else:
            current.append(ch)
    if depth != 0:
        raise SelectorError(f"unbalanced parentheses in selector {text!r}")
    terms.append("".join(current))
    return [t.strip() for t in terms]


def _check_key(key: str, text: str) -> str:
    if not key or not _KEY.match(key) or len(key.rsplit("/", 1)[-1]) > 63:
        raise SelectorError(f"invalid label key {key!r} in selector {text!r}")
    return key


def _check_value(value: str, text: str) -> str:
    if len(value) > 63 or not _VALUE.match(value):
        raise SelectorError(f"invalid label value {value!r} in selector {text!r}")
    return value


_SET = re.compile(r"^(?P<key>\S+)\s+(?P<op>in|notin)\s*\((?P<values>[^()]*)\)$")
_EQ = re.compile(r"^(?P<key>[^=!\s]+)\s*(?P<op>==|=|!=)\s*(?P<value>\S*)$")


def parse_label_selector(text: str | None) -> Selector:
    """Parse a ``labelSelector`` string; ``None`` or empty selects everything."""
    if not text or not text.strip():
        return ()
    reqs: list[Requirement] = []
    for term in _split_terms(text):
        if not term:
            raise SelectorError(f"empty requirement in selector {text!r}")
        if m := _SET.match(term):
            values = tuple(_check_value(v.strip(), text) for v in m.group("values").split(","))
            if values == ("",):
                raise SelectorError(f"{m.group('op')} needs at least one value in selector {text!r}")
            reqs.append(Requirement(_check_key(m.group("key"), text), m.group("op"), values))
        elif m := _EQ.match(term):
            op = "!=" if m.group("op") == "!=" else "="
            reqs.append(
                Requirement(_check_key(m.group("key"), text), op, (_check_value(m.group("value"), text),))
            )
        elif term.startswith("!"):
            reqs.append(Requirement(_check_key(term[1:].strip(), text), "!exists"))
        else:
            reqs.append(Requirement(_check_key(term, text), "exists"))
    return tuple(reqs)


def selector_from_object(selector: Mapping[str, Any] | None) -> Selector:
    """A ``metav1.LabelSelector`` object (``matchLabels``/``matchExpressions``) as requirements.

    ``None`` selects nothing in the API's own uses (a PDB with no selector covers no pods), so it
    becomes a requirement no label set satisfies; ``{}`` selects everything.
    """
    if selector is None:
        return (Requirement("", "exists"),)
    reqs: list[Requirement] = []
    for key, value in sorted((selector.get("matchLabels") or {}).items()):
        reqs.append(Requirement(key, "=", (str(value),)))
    ops = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!exists"}
    for expr in selector.get("matchExpressions") or []:
        op = ops.get(expr.get("operator", ""))
        if op is None:
            raise SelectorError(f"unknown selector operator {expr.get('operator')!r}")
        reqs.append(Requirement(expr["key"], op, tuple(str(v) for v in expr.get("values") or ())))
    return tuple(reqs)


def matches(selector: Selector, labels: Mapping[str, str] | None) -> bool:
    """Whether ``labels`` satisfy every requirement."""
    labels = labels or {}
    return all(r.matches(labels) for r in selector)


# ---------------------------------------------------------------------- field selectors

#: Fields every kind supports.
COMMON_FIELDS = frozenset({"metadata.name", "metadata.namespace"})
#: Extra fields per (group, plural), as the real server allows them.
KIND_FIELDS: dict[tuple[str, str], frozenset[str]] = {
    ("", "pods"): frozenset(
        {
            "spec.nodeName",
            "status.phase",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "status.podIP",
            "status.nominatedNodeName",
        }
    ),
    ("", "nodes"): frozenset({"spec.unschedulable"}),
    ("", "namespaces"): frozenset({"status.phase"}),
    ("", "secrets"): frozenset({"type"}),
    ("", "events"): frozenset(
        {"involvedObject.name", "involvedObject.kind", "involvedObject.namespace", "reason", "type"}
    ),
}


@dataclass(frozen=True)
class FieldRequirement:
    field: str
    op: str  # "=" or "!="
    value: str

    def matches(self, obj: Mapping[str, Any]) -> bool:
        actual = field_value(obj, self.field)
        return actual == self.value if self.op == "=" else actual != self.value


def parse_field_selector(text: str | None, allowed: Iterable[str]) -> tuple[FieldRequirement, ...]:
    """Parse a ``fieldSelector``; fields outside ``allowed`` raise ``SelectorError`` (as the server's 400)."""
    if not text or not text.strip():
        return ()
    allowed = set(allowed)
    reqs = []
    for term in _split_terms(text):
        m = re.match(r"^([^=!]+?)\s*(==|=|!=)\s*(.*)$", term)
        if not m:
            raise SelectorError(f"invalid field selector {text!r}: {term!r} is not f=v or f!=v")
        field, op, value = m.group(1).strip(), m.group(2), m.group(3).strip()
        if field not in allowed:
            raise SelectorError(f"field label not supported: {field}")
        reqs.append(FieldRequirement(field, "!=" if op == "!=" else "=", value))
    return tuple(reqs)


#: Boolean fields whose absence reads as ``false`` (Go's zero value, as the server sees them).
BOOLEAN_FIELDS = frozenset({"spec.unschedulable"})


def field_value(obj: Mapping[str, Any], field: str) -> str:
    """The string value of a dotted field (missing -> ``""``, or ``false`` for boolean fields;
    booleans as ``true``/``false``)."""
    cur: Any = obj
    for part in field.split("."):
        if not isinstance(cur, Mapping):
            return ""
        cur = cur.get(part)
    if cur is None:
        return "false" if field in BOOLEAN_FIELDS else ""
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return str(cur)


def fields_match(reqs: tuple[FieldRequirement, ...], obj: Mapping[str, Any]) -> bool:
    return all(r.matches(obj) for r in reqs)
