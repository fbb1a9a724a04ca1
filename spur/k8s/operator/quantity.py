"""Kubernetes resource quantities compared by value (pure).

The API server stores a quantity in its canonical form, not as written: ``32768Mi`` comes back as
``32Gi``, ``1000m`` as ``1``, ``2000`` as ``2k``. Whoever compares what it wrote with what it reads
back must compare values, or it sees a difference that is not there (and rewrites the object on
every pass).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

__all__ = ["quantity", "same_quantities"]

_SUFFIX = {
    "": Decimal(1),
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "k": Decimal(10) ** 3,
    "M": Decimal(10) ** 6,
    "G": Decimal(10) ** 9,
    "T": Decimal(10) ** 12,
    "P": Decimal(10) ** 15,
    "E": Decimal(10) ** 18,
    "Ki": Decimal(2) ** 10,
    "Mi": Decimal(2) ** 20,
    "Gi": Decimal(2) ** 30,
    "Ti": Decimal(2) ** 40,
    "Pi": Decimal(2) ** 50,
    "Ei": Decimal(2) ** 60,
}
_QUANTITY = re.compile(r"([+-]?[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)([a-zA-Z]*)")


def quantity(value: Any) -> Decimal:
    """The exact value of a quantity (``"32Gi"``, ``"1500m"``, ``"8"``, ``8``). Raises ValueError."""
    match = _QUANTITY.fullmatch(str(value).strip())
    if not match or match.group(2) not in _SUFFIX:
        raise ValueError(f"not a Kubernetes quantity: {value!r}")
    try:
        return Decimal(match.group(1)) * _SUFFIX[match.group(2)]
    except InvalidOperation:
        raise ValueError(f"not a Kubernetes quantity: {value!r}") from None


def same_quantities(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> bool:
    """Whether two resource lists (name -> quantity) name the same resources with equal values; a
    value that is not a quantity is compared as written."""
    a, b = a or {}, b or {}
    if set(a) != set(b):
        return False
    for key, value in a.items():
        try:
            if quantity(value) != quantity(b[key]):
                return False
        except ValueError:
            if value != b[key]:
                return False
    return True
