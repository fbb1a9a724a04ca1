"""Strict marshmallow fields for spur.conf values.

TOML already carries types, so these fields do not coerce: ``"6818"`` is not an integer and ``1``
is not a boolean. Error messages are phrased for operators ("expected an integer"); the loader
adds the file, key and value.
"""

from __future__ import annotations

import enum
import ipaddress
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from marshmallow import ValidationError, fields, validate

from spur.config.addr import AddressError, parse_addr


def at_least(n: int | float) -> validate.Range:
    return validate.Range(min=n, error="must be at least {min}")


def port_range(allow_zero: bool = False) -> validate.Range:
    return validate.Range(min=0 if allow_zero else 1, max=65535, error="must be a port number {min}-{max}")


class Int(fields.Field):
    """An integer (booleans rejected)."""

    def _deserialize(
        self, value: Any, attr: str | None, data: Mapping[str, Any] | None, **kwargs: Any
    ) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValidationError("expected an integer")
        return value


class Float(fields.Field):
    """A finite number; integers are accepted and converted (``2`` means ``2.0``). TOML's ``nan`` and
    ``inf`` are refused: no setting means them, and a NaN passes every range check."""

    def _deserialize(
        self, value: Any, attr: str | None, data: Mapping[str, Any] | None, **kwargs: Any
    ) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValidationError("expected a number")
        if not math.isfinite(value):
            raise ValidationError("expected a finite number")
        return float(value)


class Bool(fields.Field):
    """``true`` or ``false`` only."""

    def _deserialize(
        self, value: Any, attr: str | None, data: Mapping[str, Any] | None, **kwargs: Any
    ) -> bool:
        if not isinstance(value, bool):
            raise ValidationError("expected true or false")
        return value


class Str(fields.Field):
    """A string; non-empty unless ``allow_empty``."""

    def __init__(self, *, allow_empty: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.allow_empty = allow_empty

    def _deserialize(
        self, value: Any, attr: str | None, data: Mapping[str, Any] | None, **kwargs: Any
    ) -> str:
        if not isinstance(value, str):
            raise ValidationError("expected a string")
        if not value and not self.allow_empty:
            raise ValidationError("must not be empty")
        return value


class PathField(Str):
    """A filesystem path (string in TOML, ``pathlib.Path`` in the config)."""

    def _deserialize(  # type: ignore[override]
        self, value: Any, attr: str | None, data: Mapping[str, Any] | None, **kwargs: Any
    ) -> Path:
        return Path(super()._deserialize(value, attr, data, **kwargs))


class StrList(fields.List):
    """A list of strings, returned as a tuple. ``accept_single`` also takes one bare string."""

    def __init__(
        self, inner: fields.Field | None = None, *, accept_single: bool = False, **kwargs: Any
    ) -> None:
        super().__init__(inner or Str(), **kwargs)
        self.accept_single = accept_single

    def _deserialize(  # type: ignore[override]
        self, value: Any, attr: str | None, data: Mapping[str, Any] | None, **kwargs: Any
    ) -> tuple[Any, ...]:
        if self.accept_single and isinstance(value, str):
            value = [value]
        if not isinstance(value, list):
            raise ValidationError(
                "expected a list of strings" + (" or a string" if self.accept_single else "")
            )
        return tuple(super()._deserialize(value, attr, data, **kwargs))


class Addr(Str):
    """A ``host:port`` address (see ``parse_addr``); kept as written."""

    def __init__(self, *, default_port: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.default_port = default_port

    def _deserialize(
        self, value: Any, attr: str | None, data: Mapping[str, Any] | None, **kwargs: Any
    ) -> str:
        text = super()._deserialize(value, attr, data, **kwargs)
        try:
            parse_addr(text, self.default_port)
        except AddressError as e:
            raise ValidationError(f"bad address: {e}") from None
        return text


class Cidr(Str):
    """An IPv4/IPv6 network in CIDR notation with no host bits set (``10.42.0.0/16``)."""

    def _deserialize(
        self, value: Any, attr: str | None, data: Mapping[str, Any] | None, **kwargs: Any
    ) -> str:
        text = super()._deserialize(value, attr, data, **kwargs)
        if "/" not in text:
            raise ValidationError("bad CIDR: expected network/prefix, e.g. 10.42.0.0/16")
        try:
            ipaddress.ip_network(text, strict=True)
        except ValueError as e:
            raise ValidationError(f"bad CIDR: {e}") from None
        return text


class Choice(fields.Field):
    """One of an enum's values, matched case-insensitively, returned as the enum member."""

    def __init__(self, enum_type: type[enum.Enum], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.enum_type = enum_type

    def _deserialize(
        self, value: Any, attr: str | None, data: Mapping[str, Any] | None, **kwargs: Any
    ) -> enum.Enum:
        allowed = [str(m.value) for m in self.enum_type]
        if isinstance(value, str):
            for member in self.enum_type:
                if str(member.value).lower() == value.lower():
                    return member
        raise ValidationError(f"must be one of {', '.join(allowed)}")


class TimeSpec(Str):
    """A Slurm time limit (``UNLIMITED``, ``30``, ``1-00:00:00`` ...), checked with spur.core.timespec."""

    def _deserialize(
        self, value: Any, attr: str | None, data: Mapping[str, Any] | None, **kwargs: Any
    ) -> str:
        text = super()._deserialize(value, attr, data, **kwargs)
        try:
            from spur.core.timespec import parse_time_limit
        except ImportError:  # module not installed in this build: accept, consumers parse later
            return text
        try:
            parse_time_limit(text)
        except ValueError as e:
            raise ValidationError(f"bad time limit: {e}") from None
        return text


class Hostlist(Str):
    """A hostlist expression (``node[01-16],gpu1``), or ``ALL`` when ``allow_all``."""

    def __init__(self, *, allow_all: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.allow_all = allow_all

    def _deserialize(
        self, value: Any, attr: str | None, data: Mapping[str, Any] | None, **kwargs: Any
    ) -> str:
        text = super()._deserialize(value, attr, data, **kwargs)
        if self.allow_all and text.upper() == "ALL":
            return "ALL"
        try:
            from spur.core.hostlist import expand
        except ImportError:  # module not installed in this build: accept, consumers expand later
            return text
        try:
            expand(text)
        except ValueError as e:
            raise ValidationError(f"bad hostlist: {e}") from None
        return text
