"""Shape a version-neutral answer into what a version's document declares (pure).

The mapping layer builds each answer once, with natural Python values: ints, floats, strings,
lists, nested dicts, ``None`` for "not set" and :data:`INF` for "unlimited". A *shaper*, compiled
once per (document, schema), walks the declared schema and renders that value the way the version
writes it:

- a property the schema does not declare is left out (the version has no such field), unless
  ``keep_undeclared`` (v0.0.38, whose document lacks fields 22.05 sends);
- Slurm's number objects (``{"set", "infinite", "number"}``, the ``*_no_val_struct`` schemas):
  ``None`` -> unset, :data:`INF` -> infinite, a number -> set;
- a plain integer declared where the value is :data:`INF` -> Slurm's INFINITE (4294967295);
- ``None`` elsewhere: kept only where the version's real server sends null (``allow_null``, see
  :data:`spur.rest.openapi.SENT_AS_NULL`); a required property gets its type's empty value
  (``""``, ``0``, ``[]``); otherwise the property is left out;
- a scalar where an array is declared becomes a one-item array (``job_state``, flag arrays), and
  a flag array keeps only the flags the version's enum knows;
- numbers where a string is declared become their decimal text, integers where a number is
  declared become floats, booleans/numbers where an integer is declared become ints.

So the version modules differ only where the documents differ, and no rule about types is written
per field.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Collection, Iterable
from typing import Any


class _Infinite:
    __slots__ = ()

    def __repr__(self) -> str:
        return "INF"


INF: Any = _Infinite()
INFINITE_U32 = 4294967295

Shaper = Callable[[Any], Any]
_MISSING = object()
_NUMBER_OBJECT_KEYS = frozenset({"set", "infinite", "number"})
_EMPTY: dict[Any, Any] = {"string": "", "integer": 0, "number": 0.0, "boolean": False, "array": [], "object": {}}


def _identity(value: Any) -> Any:
    return value


class SchemaShapers:
    """Compiled shapers for the schemas of one document (see the module docstring)."""

    def __init__(
        self, doc: dict[str, Any], allow_null: Iterable[tuple[str, str]] = (), *, keep_undeclared: bool = False
    ) -> None:
        """``keep_undeclared``: keep properties the schema does not declare (v0.0.38: 22.05's
        document omits fields slurmrestd 22.05 sends, and Spur sends them as it does)."""
        self.keep_undeclared = keep_undeclared
        self.schemas: dict[str, Any] = doc.get("components", {}).get("schemas", {})
        self.allow_null = set(allow_null)
        self._compiled: dict[str, Shaper] = {}

    def named(self, name: str) -> Shaper:
        """The shaper of ``#/components/schemas/<name>``."""
        found = self._compiled.get(name)
        if found is None:
            cell: list[Shaper] = []
            self._compiled[name] = lambda value: cell[0](value)  # recursion through $ref
            shaper = self._compile(self.schemas[name], name, "")
            cell.append(shaper)
            self._compiled[name] = found = shaper
        return found

    def for_schema(self, schema: dict[str, Any], owner: str = "", path: str = "") -> Shaper:
        """The shaper of ``schema``; ``owner`` and ``path``: where an inline schema sits (the named
        schema holding it and the dotted property path), for the version's null exceptions."""
        return self._compile(schema, owner, path)

    def for_keys(self, schema: dict[str, Any], keys: Collection[str], owner: str = "", path: str = "") -> Shaper:
        """The shaper of the object ``schema`` (or a ``$ref`` to one) for values holding only
        ``keys``: it gives what :meth:`for_schema`'s shaper gives for such a value, without looking
        up the schema's other properties (a value's other keys are left out, as undeclared ones)."""
        target, ref_name = self._resolve(schema)
        if ref_name is not None:
            owner, path = ref_name, ""
        props = {k: v for k, v in (target.get("properties") or {}).items() if k in keys}
        return self._object(props, owner, path, target.get("required") or ())

    # ------------------------------------------------------------------ compilation

    def _resolve(self, schema: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/components/schemas/"):
            name = ref.rsplit("/", 1)[1]
            return self.schemas.get(name, {}), name
        return schema, None

    def _compile(self, schema: dict[str, Any], owner: str, path: str) -> Shaper:
        target, ref_name = self._resolve(schema)
        if ref_name is not None and ref_name in self._compiled:
            return self._compiled[ref_name]
        if ref_name is not None:
            return self.named(ref_name)
        kind = target.get("type")
        props = target.get("properties")
        if kind == "object" and isinstance(props, dict) and _NUMBER_OBJECT_KEYS <= set(props):
            return _number_object(props["number"].get("type") == "number")
        if isinstance(props, dict) and props:
            return self._object(props, owner, path, target.get("required") or ())
        if kind == "array":
            items, _ = self._resolve(target.get("items", {}))
            if isinstance(items.get("enum"), list):  # a flag the version does not know is left out
                return _flags(frozenset(items["enum"]))
            item = self._compile(target.get("items", {}), owner, path)
            return _array(item)
        if kind == "string":
            return _string
        if kind == "integer":
            return _integer
        if kind == "number":
            return _number
        if kind == "boolean":
            return _boolean
        return _identity

    def _object(self, props: dict[str, Any], owner: str, path: str, required: Iterable[str] = ()) -> Shaper:
        table: dict[str, tuple[Shaper, bool]] = {}
        empty = {k: _EMPTY.get(self._resolve(props[k])[0].get("type")) for k in required if k in props}
        for key, sub in props.items():
            sub_path = f"{path}.{key}" if path else key
            target, ref_name = self._resolve(sub)
            is_number_object = _NUMBER_OBJECT_KEYS <= set(target.get("properties") or {})
            nullable = bool(target.get("nullable")) or (owner, sub_path) in self.allow_null
            if ref_name is None and isinstance(target.get("properties"), dict) and not is_number_object:
                shaper = self._object(target["properties"], owner, sub_path, target.get("required") or ())
            else:
                shaper = self._compile(sub, owner, sub_path)
            table[key] = (shaper, nullable and not is_number_object)
        none_ok = {k for k, (_, ok) in table.items() if ok}
        number_objects = {
            k for k, sub in props.items() if _NUMBER_OBJECT_KEYS <= set(self._resolve(sub)[0].get("properties") or {})
        }
        return _generate_object(table, none_ok, number_objects, empty, self.keep_undeclared)



def _generate_object(
    table: dict[str, tuple[Shaper, bool]],
    none_ok: set[str],
    number_objects: set[str],
    empty: dict[str, Any],
    keep_undeclared: bool,
) -> Shaper:
    """The object shaper as straight-line Python, one block per declared property in the
    document's order (the hot path of a 10,000-job list: no loop over the table, no call for a
    value that already has the declared type). ``keep_undeclared`` objects keep the value's order."""
    env: dict[str, Any] = {"_M": _MISSING, "_copy": copy.copy, "_DICT": dict}
    lines = ["def shape_object(value):", "    if value.__class__ is not _DICT:", "        return value"]
    if keep_undeclared:
        lines += ["    out = {}", "    for key, item in value.items():", "        f = _SLOW.get(key)",
                  "        if f is None or item.__class__ is _PASS.get(key):", "            out[key] = item",
                  "        else:", "            item = f(item)", "            if item is not _M:",
                  "                out[key] = item", "    return out"]  # fmt: skip
        env["_PASS"] = {k: _PASS_TYPES[sh] for k, (sh, _) in table.items() if sh in _PASS_TYPES}
        env["_SLOW"] = {k: _slow_entry(k, sh, none_ok, number_objects, empty) for k, (sh, _) in table.items()}
        exec("\n".join(lines), env)  # noqa: S102 - generated from the schema, no outside text
        return env["shape_object"]
    lines += ["    get = value.get", "    out = {}"]
    for i, (key, (shaper, _)) in enumerate(table.items()):
        env[f"_s{i}"] = shaper
        lines += [f"    v = get({key!r}, _M)", "    if v is not _M:"]
        kind = _PASS_TYPES.get(shaper)
        small = getattr(shaper, "small", None)
        if small is not None:  # a number object: the common cases inline, no call
            env[f"_n{i}"] = small
            env[f"_u{i}"] = shaper.unset  # type: ignore[attr-defined]
            lines += ["        if v is None:", f"            out[{key!r}] = _u{i}",
                      f"        elif v.__class__ is int and v in _n{i}:", f"            out[{key!r}] = _n{i}[v]",
                      "        else:", f"            out[{key!r}] = _s{i}(v)"]  # fmt: skip
            continue
        if kind is not None:
            env[f"_t{i}"] = kind
            lines += [f"        if v.__class__ is _t{i}:", f"            out[{key!r}] = v", "        elif v is not None:",
                      f"            out[{key!r}] = _s{i}(v)"]  # fmt: skip
        else:
            lines += ["        if v is not None:" if key not in number_objects else "        if True:",
                      f"            out[{key!r}] = _s{i}(v)"]  # fmt: skip
        if key in none_ok:
            lines += ["        else:", f"            out[{key!r}] = None"]
        elif empty.get(key) is not None and key not in number_objects:
            env[f"_e{i}"] = empty[key]
            lines += ["        else:", f"            out[{key!r}] = _copy(_e{i})"]
    lines.append("    return out")
    exec("\n".join(lines), env)  # noqa: S102 - generated from the schema, no outside text
    return env["shape_object"]


def _slow_entry(key: str, shaper: Shaper, none_ok: set[str], number_objects: set[str], empty: dict) -> Shaper:
    def slow(item: Any) -> Any:
        if item is None and key not in number_objects:
            if key in none_ok:
                return None
            return copy.copy(empty[key]) if empty.get(key) is not None else _MISSING
        return shaper(item)

    return slow


def _number_object(is_float: bool) -> Shaper:
    zero = 0.0 if is_float else 0
    unset = {"set": False, "infinite": False, "number": zero}
    infinite = {"set": False, "infinite": True, "number": zero}
    # Shared answers for small numbers: a body is serialised once and never mutated.
    small = {n: {"set": True, "infinite": False, "number": float(n) if is_float else n} for n in range(1025)}
    small_get = small.get

    def shape(value: Any) -> Any:
        if value.__class__ is int:
            found = small_get(value)
            if found is not None:
                return found
        if value is None:
            return unset
        if value is INF:
            return infinite
        if isinstance(value, dict):
            return value
        return {"set": True, "infinite": False, "number": float(value) if is_float else int(value)}

    shape.small = small  # type: ignore[attr-defined]
    shape.unset = unset  # type: ignore[attr-defined]
    return shape


def _array(item: Shaper) -> Shaper:
    def shape(value: Any) -> Any:
        if isinstance(value, list | tuple):
            if item is _identity or item is _string:
                return list(value) if item is _identity else [str(v) for v in value]
            return [item(v) for v in value]
        if isinstance(value, dict):  # an object where the document declares an array: its bug
            return value
        return [item(value)]

    return shape


def _flags(known: frozenset[str]) -> Shaper:
    def shape(value: Any) -> Any:
        values = value if isinstance(value, list | tuple) else [value]
        return [v for v in values if v in known]

    return shape


def _string(value: Any) -> Any:
    if isinstance(value, str):
        return value
    if value is INF:
        return "UNLIMITED"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _integer(value: Any) -> Any:
    if type(value) is int:
        return value
    if value is INF:
        return INFINITE_U32
    if isinstance(value, bool | float):
        return int(value)
    if isinstance(value, str) and value.lstrip("-").isdigit():
        return int(value)
    return value


def _number(value: Any) -> Any:
    if type(value) is float:
        return value
    if value is INF:
        return float(INFINITE_U32)
    if isinstance(value, int | bool):
        return float(value)
    return value


def _boolean(value: Any) -> Any:
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value != 0
    return value


_PASS_TYPES: dict[Shaper, type] = {_string: str, _integer: int, _number: float, _boolean: bool}
