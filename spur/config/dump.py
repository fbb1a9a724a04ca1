"""Writing a ``SpurConfig`` back as TOML; ``dump_defaults`` is the documented default spur.conf.

The output parses back (``parse_config_text``) to an equal config. Keys come out in schema order,
each preceded (with ``comments=True``) by its meaning from the schema's ``metadata["doc"]``.
Unset optional keys are written as commented-out examples.
"""

from __future__ import annotations

from typing import Any

from marshmallow import Schema

from spur.config.errors import format_value
from spur.config.model import NodeConfig, PartitionConfig, SpurConfig
from spur.config.schema import SECTIONS, TABLE_ARRAYS, SpurConfigSchema

_HEADER = """\
# spur.conf - Spur configuration (TOML).
# Every key is optional: the values below are the built-in defaults.
# Reference: docs/configuration.md
"""


def _toml(value: Any) -> str:
    return repr(value) if isinstance(value, float) else format_value(value)


def _fields(schema: type[Schema]) -> list[tuple[str, dict[str, Any]]]:
    return [(name, dict(field.metadata)) for name, field in schema._declared_fields.items()]


def _emit_table(out: list[str], schema: type[Schema], obj: Any, comments: bool, skip: frozenset[str]) -> None:
    for name, meta in _fields(schema):
        if name in skip:
            continue
        value = getattr(obj, name)
        if comments and meta.get("doc"):
            out.append(f"# {meta['doc']}")
        if value is None:
            if comments and "example" in meta:
                out.append(f"# {name} = {_toml(meta['example'])}")
            continue
        out.append(f"{name} = {_toml(value)}")


def dump_config(cfg: SpurConfig, *, comments: bool = False) -> str:
    """Render ``cfg`` as spur.conf TOML that loads back to an equal config."""
    out: list[str] = [_HEADER] if comments else []
    top = {
        name
        for name in SpurConfigSchema._declared_fields
        if name not in SECTIONS and name not in TABLE_ARRAYS
    }
    for name, meta in _fields(SpurConfigSchema):
        if name in top:
            if comments:
                out.append(f"# {meta['doc']}")
            out.append(f"{name} = {_toml(getattr(cfg, name))}")
    order = [
        "controller",
        "scheduler",
        "partitions",
        "nodes",
        *[s for s in SECTIONS if s not in ("controller", "scheduler")],
    ]
    for section in order:
        out.append("")
        if section in TABLE_ARRAYS:
            entries = getattr(cfg, section)
            schema = TABLE_ARRAYS[section]
            if not entries and comments:
                out.append(f"# [[{section}]]  (none configured; an example entry:)")
                out.extend(f"# {line}" if line else "#" for line in _example_entry(schema))
            for entry in entries:
                out.append(f"[[{section}]]")
                # a node port equal to controller.agent_port is implied; leave it out
                skip = (
                    frozenset({"port"})
                    if isinstance(entry, NodeConfig) and entry.port == cfg.controller.agent_port
                    else frozenset()
                )
                _emit_table(out, schema, entry, comments, skip)
            continue
        out.append(f"[{section}]")
        _emit_table(out, SECTIONS[section], getattr(cfg, section), comments, frozenset())
    return "\n".join(out) + "\n"


def _example_entry(schema: type[Schema]) -> list[str]:
    lines = []
    for name, meta in _fields(schema):
        if "example" in meta:
            lines.append(f"{name} = {_toml(meta['example'])}")
    return lines


def dump_defaults() -> str:
    """The default spur.conf with every key documented; parses back to ``SpurConfig()``."""
    return dump_config(SpurConfig(), comments=True)


def _default_cell(name: str, value: Any, required: bool) -> str:
    if required:
        return "(required)"
    if value is None:
        return "unset"
    return f"`{_toml(value)}`"


def reference_markdown() -> str:
    """Markdown tables of every key (default, meaning, and when a change takes effect: see
    ``spur.config.applies``), as embedded in docs/configuration.md."""
    from spur.config.applies import mark_of

    defaults = SpurConfig()
    blocks: list[str] = []

    def table(title: str, prefix: str, schema: type[Schema], obj: Any, overrides: dict[str, str]) -> None:
        rows = [
            f"### {title}",
            "",
            "| Key | Default | Takes effect | Meaning |",
            "| --- | --- | --- | --- |",
        ]
        for name, field in schema._declared_fields.items():
            if schema is SpurConfigSchema and (name in SECTIONS or name in TABLE_ARRAYS):
                continue
            cell = overrides.get(name) or _default_cell(name, getattr(obj, name, None), field.required)
            applies = mark_of(f"{prefix}{name}").text()
            rows.append(f"| `{name}` | {cell} | {applies} | {field.metadata.get('doc', '')} |")
        blocks.append("\n".join(rows))

    table("Top level", "", SpurConfigSchema, defaults, {})
    for section in ("controller", "scheduler"):
        table(f"[{section}]", f"{section}.", SECTIONS[section], getattr(defaults, section), {})
    table("[[partitions]]", "partitions.", TABLE_ARRAYS["partitions"], PartitionConfig(name=""), {})
    table(
        "[[nodes]]", "nodes.", TABLE_ARRAYS["nodes"], NodeConfig(name=""), {"port": "`controller.agent_port`"}
    )
    for section in SECTIONS:
        if section not in ("controller", "scheduler"):
            table(f"[{section}]", f"{section}.", SECTIONS[section], getattr(defaults, section), {})
    return "\n\n".join(blocks) + "\n"
