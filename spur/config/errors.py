"""The one exception type for configuration problems.

A ``ConfigError`` always names where the config came from (a file path, ``<string>``, or an
override), the dotted key (``partitions[1].max_time``) and the offending value, so an operator can
fix the file without reading code. When several problems are found they are all listed, the first
one on the first line.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


MISSING: Any = _Missing()
"""Value of a ``ConfigProblem`` whose key was absent (e.g. a required key)."""


def format_value(value: Any) -> str:
    """Render a config value as it would appear in TOML (strings quoted), for messages."""
    if isinstance(value, enum.Enum):
        value = value.value
    if isinstance(value, PurePath):
        value = str(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(format_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {format_value(v)}" for k, v in value.items()) + "}"
    return str(value)


@dataclass(frozen=True)
class ConfigProblem:
    """One thing wrong with a config: ``key`` is a dotted path ("" for the whole file)."""

    source: str
    key: str
    value: Any
    reason: str
    defaulted: bool = False
    """True when ``value`` is the default (the key is not in the file)."""

    def __str__(self) -> str:
        where = f"{self.source}: {self.key}" if self.key else self.source
        if self.value is MISSING:
            return f"{where}: {self.reason}"
        note = " (default)" if self.defaulted else ""
        return f"{where} = {format_value(self.value)}{note}: {self.reason}"


class ConfigError(Exception):
    """A config file (or override) is unreadable or invalid.

    ``problems`` lists everything found; ``source``, ``key``, ``value`` and ``reason`` describe the
    first one. ``str(err)`` is the full human-readable message.
    """

    def __init__(self, problems: ConfigProblem | list[ConfigProblem]) -> None:
        self.problems: tuple[ConfigProblem, ...] = (
            (problems,) if isinstance(problems, ConfigProblem) else tuple(problems)
        )
        if not self.problems:
            raise ValueError("ConfigError needs at least one problem")
        first = self.problems[0]
        self.source, self.key, self.value, self.reason = first.source, first.key, first.value, first.reason
        super().__init__(self._render())

    @classmethod
    def single(cls, source: str, key: str, value: Any, reason: str) -> ConfigError:
        return cls(ConfigProblem(source, key, value, reason))

    def _render(self) -> str:
        text = str(self.problems[0])
        if len(self.problems) > 1:
            more = len(self.problems) - 1
            text += f"\nand {more} more problem{'s' if more > 1 else ''}:"
            text += "".join(f"\n  {p}" for p in self.problems[1:])
        return text
