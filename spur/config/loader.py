"""Reading spur.conf: TOML text -> validated ``SpurConfig``, with errors naming file, key and value.

Pure except for ``load_config``, which reads the file (and ``$SPUR_CONF``).
"""

from __future__ import annotations

import copy
import os
import re
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import replace
from pathlib import Path, PurePath
from typing import Any

from marshmallow import ValidationError

from spur.config.errors import MISSING, ConfigError, ConfigProblem
from spur.config.model import SpurConfig
from spur.config.schema import REQUIRED_MSG, SECTIONS, TABLE_ARRAYS, SpurConfigSchema

ENV_VAR = "SPUR_CONF"
"""Environment variable naming the config file used when ``load_config`` gets no path."""

_KEY_PART = re.compile(r"([A-Za-z0-9_-]+)((?:\[\d+\])*)")
_TOML_POS = re.compile(r"\s*\(at line (\d+), column (\d+)\)\s*$")

_Part = str | int


def format_key(parts: tuple[_Part, ...] | list[_Part]) -> str:
    """``("partitions", 1, "max_time")`` -> ``"partitions[1].max_time"``."""
    out = ""
    for p in parts:
        if isinstance(p, int):
            out += f"[{p}]"
        else:
            out += f".{p}" if out else p
    return out


def parse_key(key: str) -> list[_Part]:
    """``"partitions[1].max_time"`` -> ``["partitions", 1, "max_time"]``; ``ValueError`` if malformed."""
    parts: list[_Part] = []
    for segment in key.split("."):
        m = _KEY_PART.fullmatch(segment)
        if not m:
            raise ValueError(f"malformed key {key!r}")
        parts.append(m.group(1))
        parts.extend(int(i) for i in re.findall(r"\[(\d+)\]", m.group(2)))
    return parts


def parse_override(text: str) -> tuple[str, Any]:
    """Parse a command-line ``key=value`` override; the value is read as TOML, else taken as a string.

    ``"scheduler.interval_secs=5"`` -> ``("scheduler.interval_secs", 5)``;
    ``"controller.state_dir=/tmp/x"`` -> ``("controller.state_dir", "/tmp/x")``.
    Raises ``ValueError`` when there is no ``=`` or the key is malformed.
    """
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ValueError(f"expected key=value, got {text!r}")
    parse_key(key)
    try:
        parsed: Any = tomllib.loads(f"v = {value.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        parsed = value
    return key, parsed


def _plain(value: Any) -> Any:
    """Override values as TOML would give them (paths as strings, tuples as lists)."""
    if isinstance(value, PurePath):
        return str(value)
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _apply_overrides(raw: dict[str, Any], overrides: Mapping[str, Any], source: str) -> list[list[_Part]]:
    applied: list[list[_Part]] = []
    for key, value in overrides.items():
        try:
            parts = parse_key(key)
        except ValueError as e:
            raise ConfigError.single(f"{source} [override]", key, value, str(e)) from None
        node: Any = raw
        for i, part in enumerate(parts[:-1]):
            here = format_key(parts[: i + 1])
            if isinstance(part, int):
                if not isinstance(node, list) or part >= len(node):
                    raise ConfigError.single(f"{source} [override]", key, value, f"{here} does not exist")
                node = node[part]
            else:
                if not isinstance(node, dict):
                    raise ConfigError.single(f"{source} [override]", key, value, f"{here} is not a table")
                nxt = parts[i + 1]
                node = node.setdefault(part, [] if isinstance(nxt, int) else {})
        last = parts[-1]
        if isinstance(last, int):
            if not isinstance(node, list) or last >= len(node):
                raise ConfigError.single(f"{source} [override]", key, value, f"{key} does not exist")
        elif not isinstance(node, dict):
            raise ConfigError.single(
                f"{source} [override]", key, value, f"{format_key(parts[:-1])} is not a table"
            )
        node[last] = _plain(value)
        applied.append(parts)
    return applied


def _flatten(messages: Any, parts: tuple[_Part, ...] = ()) -> Iterator[tuple[tuple[_Part, ...], str]]:
    if isinstance(messages, dict):
        for k, v in messages.items():
            yield from _flatten(v, parts if k == "_schema" else (*parts, k))
    elif isinstance(messages, list):
        for m in messages:
            yield from _flatten(m, parts)
    else:
        yield parts, str(messages)


def _lookup(raw: Any, parts: tuple[_Part, ...]) -> Any:
    node = raw
    for p in parts:
        try:
            node = node[p]
        except (KeyError, IndexError, TypeError):
            return MISSING
    return node


def _default_of(parts: tuple[_Part, ...]) -> Any:
    """Default of a ``section.key`` the file left out (cross-key errors may blame such a key)."""
    if len(parts) == 2 and parts[0] in SECTIONS and isinstance(parts[1], str):
        return getattr(getattr(SpurConfig(), parts[0]), parts[1], MISSING)
    if len(parts) == 1 and isinstance(parts[0], str) and parts[0] not in TABLE_ARRAYS:
        return getattr(SpurConfig(), parts[0], MISSING)
    return MISSING


def _validate(raw: dict[str, Any], source: str, overridden: list[list[_Part]]) -> SpurConfig:
    try:
        cfg: SpurConfig = SpurConfigSchema().load(raw)
    except ValidationError as err:
        problems = []
        for parts, msg in _flatten(err.messages):
            from_override = any(list(parts[: len(o)]) == o for o in overridden)
            label = f"{source} [override]" if from_override else source
            value, defaulted = _lookup(raw, parts), False
            if value is MISSING and msg != REQUIRED_MSG:
                value = _default_of(parts)
                defaulted = value is not MISSING
            problems.append(ConfigProblem(label, format_key(parts), value, msg, defaulted))
        raise ConfigError(problems) from None
    return replace(cfg, source=source)


def _parse_toml(text: str, source: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        msg = str(e)
        m = _TOML_POS.search(msg)
        if not m:
            raise ConfigError.single(source, "", MISSING, f"TOML syntax error: {msg}") from None
        line, col = int(m.group(1)), int(m.group(2))
        lines = text.splitlines()
        snippet = lines[line - 1].strip() if 0 < line <= len(lines) else ""
        reason = f"TOML syntax error: {msg[: m.start()]}" + (f" (in: {snippet})" if snippet else "")
        raise ConfigError.single(source, f"line {line}, column {col}", MISSING, reason) from None


def parse_config_text(
    text: str, *, source: str = "<string>", overrides: Mapping[str, Any] | None = None
) -> SpurConfig:
    """Parse and validate spur.conf TOML text. ``source`` names it in errors.

    ``overrides`` maps dotted keys (``"controller.state_dir"``, ``"partitions[0].state"``) to values
    applied on top of the text before validation. Raises ``ConfigError`` listing every problem.
    """
    raw = _parse_toml(text, source)
    overridden = _apply_overrides(raw, overrides or {}, source)
    return _validate(raw, source, overridden)


def config_from_mapping(
    data: Mapping[str, Any], *, source: str = "<mapping>", overrides: Mapping[str, Any] | None = None
) -> SpurConfig:
    """Validate an already-parsed TOML-like mapping (e.g. from a Kubernetes ConfigMap)."""
    raw = copy.deepcopy(dict(data))
    overridden = _apply_overrides(raw, overrides or {}, source)
    return _validate(raw, source, overridden)


def load_config(path: str | Path | None = None, *, overrides: Mapping[str, Any] | None = None) -> SpurConfig:
    """Load spur.conf from ``path``; with no path, from ``$SPUR_CONF`` if set, else pure defaults.

    ``overrides`` (dotted keys, applied after the file) are for command-line flags. Raises
    ``ConfigError`` for an unreadable file, TOML syntax errors (with line and column), unknown
    keys, wrong types and invalid values.
    """
    if path is None:
        env = os.environ.get(ENV_VAR, "")
        if not env:
            return config_from_mapping({}, source="<defaults>", overrides=overrides)
        path = env
    source = str(path)
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise ConfigError.single(source, "", MISSING, f"cannot read config file: {e.strerror or e}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError.single(source, "", MISSING, f"config file is not UTF-8: {e}") from None
    return parse_config_text(text, source=source, overrides=overrides)
