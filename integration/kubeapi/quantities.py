"""Resource quantities stored in canonical form, as the real API server stores them.

kube-apiserver parses every quantity field and serialises it back canonically: a binary-suffixed
value (``Ki``..``Ei``) with the largest suffix that keeps the number whole (``32768Mi`` -> ``32Gi``;
under 1024 it becomes decimal), a decimal value with the largest of ``n u m "" k M G T P E`` that keeps
it whole (``1000m`` -> ``1``, ``2000`` -> ``2k``, ``0.5`` -> ``500m``; an exponent form such as
``1e3`` the real server keeps as an exponent, the double writes ``1k``). A client that compares what
it wrote with what it reads back sees the difference; the double shows it too.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_QUANTITY = re.compile(r"([+-]?[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)([a-zA-Z]*)")


def canonical(text: Any) -> Any:
    """The canonical form of quantity ``text``; anything that is not a quantity is returned as is
    (the caller's validation reports it)."""
    match = _QUANTITY.fullmatch(str(text).strip())
    if not match or (match.group(2) not in _BINARY and match.group(2) not in _DECIMAL):
        return text
    number, suffix = Decimal(match.group(1)), match.group(2)
    if suffix in _BINARY:
        value = number * (Decimal(2) ** _BINARY[suffix])
        if abs(value) >= 1024 and value == value.to_integral_value():
            for name, bits in sorted(_BINARY.items(), key=lambda kv: -kv[1]):
                if value % (Decimal(2) ** bits) == 0:
                    return f"{int(value / (Decimal(2) ** bits))}{name}"
    else:
        value = number * (Decimal(10) ** _DECIMAL[suffix])
    if value == 0:
        return "0"
    for name, exp in sorted(_DECIMAL.items(), key=lambda kv: -kv[1]):
        mantissa = value / (Decimal(10) ** exp)
        if mantissa == mantissa.to_integral_value():
            return f"{int(mantissa)}{name}"
    return f"{int((value * Decimal(10) ** 9).to_integral_value())}n"  # below a nano: rounded


def _resource_list(values: Any) -> None:
    if isinstance(values, dict):
        for key, value in values.items():
            values[key] = canonical(value)


def canonicalize(key: tuple[str, str], obj: dict[str, Any]) -> None:
    """Rewrite, in place, the quantity fields of the kinds the operator writes: a ResourceQuota's
    ``spec.hard``, a LimitRange's limits, and a pod's container requests and limits."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    if key == ("", "resourcequotas"):
        _resource_list(spec.get("hard"))
    elif key == ("", "limitranges"):
        for item in spec.get("limits") or []:
            for field in ("default", "defaultRequest", "max", "min", "maxLimitRequestRatio"):
                _resource_list(item.get(field) if isinstance(item, dict) else None)
    elif key == ("", "pods"):
        for container in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
            resources = container.get("resources") if isinstance(container, dict) else None
            if isinstance(resources, dict):
                _resource_list(resources.get("requests"))
                _resource_list(resources.get("limits"))
