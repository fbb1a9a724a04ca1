"""The three PATCH flavours of the Kubernetes API (pure functions over JSON values, no I/O).

* ``json_merge_patch`` - RFC 7386 (``application/merge-patch+json``): objects merge, ``null``
  deletes, lists replace.
* ``json_patch`` - RFC 6902 (``application/json-patch+json``): add/remove/replace/move/copy/test.
* ``strategic_merge_patch`` - ``application/strategic-merge-patch+json`` for built-in kinds: like a
  merge patch, but lists with a merge key (containers, env, ports, volumes, ...) merge item by
  item, ``finalizers`` merge as a set, and the directives ``$patch: delete|replace|merge``,
  ``$retainKeys``, ``$setElementOrder/<list>`` and ``$deleteFromPrimitiveList/<list>`` are honoured
  (what ``kubectl apply``/``patch`` send).

None of them mutates its inputs. A malformed patch raises ``PatchError``.
"""

from __future__ import annotations

import copy
from typing import Any


class PatchError(ValueError):
    """A patch that cannot be applied (the server's 422 / 400)."""


# ---------------------------------------------------------------------- RFC 7386


def json_merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = json_merge_patch(result.get(key), value)
    return result


# ---------------------------------------------------------------------- RFC 6902


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f"invalid JSON pointer {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _index(container: list, token: str, *, allow_end: bool) -> int:
    if token == "-" and allow_end:
        return len(container)
    if not token.isdigit() or (len(token) > 1 and token[0] == "0"):
        raise PatchError(f"invalid array index {token!r}")
    idx = int(token)
    if idx > len(container) or (idx == len(container) and not allow_end):
        raise PatchError(f"array index {idx} out of range")
    return idx


def _parent(doc: Any, tokens: list[str]) -> Any:
    cur = doc
    for token in tokens[:-1]:
        if isinstance(cur, dict):
            if token not in cur:
                raise PatchError(f"path element {token!r} does not exist")
            cur = cur[token]
        elif isinstance(cur, list):
            cur = cur[_index(cur, token, allow_end=False)]
        else:
            raise PatchError(f"path element {token!r} is not in an object or array")
    return cur


def _get(doc: Any, tokens: list[str]) -> Any:
    if not tokens:
        return doc
    parent = _parent(doc, tokens)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f"path element {last!r} does not exist")
        return parent[last]
    if isinstance(parent, list):
        return parent[_index(parent, last, allow_end=False)]
    raise PatchError(f"path element {last!r} is not in an object or array")


def _add(doc: Any, tokens: list[str], value: Any) -> Any:
    if not tokens:
        return value
    parent = _parent(doc, tokens)
    last = tokens[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, last, allow_end=True), value)
    else:
        raise PatchError(f"cannot add {last!r}: parent is not an object or array")
    return doc


def _remove(doc: Any, tokens: list[str]) -> Any:
    if not tokens:
        raise PatchError("cannot remove the whole document")
    parent = _parent(doc, tokens)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f"cannot remove {last!r}: it does not exist")
        del parent[last]
    elif isinstance(parent, list):
        del parent[_index(parent, last, allow_end=False)]
    else:
        raise PatchError(f"cannot remove {last!r}: parent is not an object or array")
    return doc


def json_patch(doc: Any, operations: Any) -> Any:
    """Apply an RFC 6902 operation list atomically (the input is not modified)."""
    if not isinstance(operations, list):
        raise PatchError("a JSON patch must be a list of operations")
    result = copy.deepcopy(doc)
    for op in operations:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise PatchError(f"invalid JSON patch operation {op!r}")
        kind = op["op"]
        tokens = _pointer(op["path"])
        if kind == "add":
            result = _add(result, tokens, copy.deepcopy(op.get("value")))
        elif kind == "remove":
            result = _remove(result, tokens)
        elif kind == "replace":
            _get(result, tokens)
            result = (
                _add(_remove(result, tokens), tokens, copy.deepcopy(op.get("value")))
                if tokens
                else copy.deepcopy(op.get("value"))
            )
        elif kind in ("move", "copy"):
            source = _pointer(op.get("from", ""))
            value = copy.deepcopy(_get(result, source))
            if kind == "move":
                if tokens[: len(source)] == source and len(tokens) > len(source):
                    raise PatchError("cannot move a value into one of its children")
                result = _remove(result, source)
            result = _add(result, tokens, value)
        elif kind == "test":
            if _get(result, tokens) != op.get("value"):
                raise PatchError(f"test operation failed at {op['path']!r}")
        else:
            raise PatchError(f"unknown JSON patch operation {kind!r}")
    return result


# ---------------------------------------------------------------------- strategic merge patch

#: List fields that merge item by item, and the key that identifies an item. ``ports`` merges by
#: ``containerPort`` in containers and by ``port`` in Services (decided by the items themselves).
MERGE_KEYS: dict[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "imagePullSecrets": "name",
    "hostAliases": "ip",
    "topologySpreadConstraints": "topologyKey",
    "conditions": "type",
    "ownerReferences": "uid",
    "taints": "key",
    "addresses": "type",
    "resourceClaims": "name",
    "containerStatuses": "name",
    "initContainerStatuses": "name",
}
#: Primitive lists that merge as ordered sets.
PRIMITIVE_MERGE = frozenset({"finalizers"})

_DELETE = object()


def _merge_key(field: str, items: list[Any]) -> str | None:
    if field == "ports":
        dicts = [i for i in items if isinstance(i, dict)]
        if any("containerPort" in i for i in dicts):
            return "containerPort"
        return "port"
    return MERGE_KEYS.get(field)


def strategic_merge_patch(original: Any, patch: Any) -> Any:
    """Apply a strategic merge patch to a built-in object (the input is not modified)."""
    if not isinstance(patch, dict):
        raise PatchError("a strategic merge patch must be a JSON object")
    result = _merge_map(copy.deepcopy(original) if isinstance(original, dict) else {}, patch)
    if result is _DELETE:
        raise PatchError("$patch: delete at the top level would delete the whole object")
    return result


def _strip_directives(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: _strip_directives(v)
            for k, v in value.items()
            if not (
                k == "$patch"
                or k == "$retainKeys"
                or k.startswith("$setElementOrder/")
                or k.startswith("$deleteFromPrimitiveList/")
            )
        }
    if isinstance(value, list):
        return [_strip_directives(v) for v in value]
    return value


def _merge_map(original: dict[str, Any], patch: dict[str, Any]) -> Any:
    directive = patch.get("$patch")
    if directive == "delete":
        return _DELETE
    if directive == "replace":
        return _strip_directives(patch)
    if directive not in (None, "merge"):
        raise PatchError(f"unknown $patch directive {directive!r}")
    result = original
    orders: dict[str, list[Any]] = {}
    for key, value in patch.items():
        if key in ("$patch", "$retainKeys"):
            continue
        if key.startswith("$setElementOrder/"):
            if not isinstance(value, list):
                raise PatchError(f"{key} must be a list")
            orders[key.split("/", 1)[1]] = value
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            if not isinstance(value, list):
                raise PatchError(f"{key} must be a list")
            if isinstance(result.get(field), list):
                result[field] = [v for v in result[field] if v not in value]
            continue
        if value is None:
            result.pop(key, None)
            continue
        current = result.get(key)
        if isinstance(value, dict):
            merged = _merge_map(current if isinstance(current, dict) else {}, value)
            if merged is _DELETE:
                result.pop(key, None)
            else:
                result[key] = merged
        elif isinstance(value, list):
            result[key] = _merge_list(key, current if isinstance(current, list) else [], value)
        else:
            result[key] = value
    for field, order in orders.items():
        if isinstance(result.get(field), list):
            result[field] = _apply_order(field, result[field], order)
    retain = patch.get("$retainKeys")
    if retain is not None:
        if not isinstance(retain, list):
            raise PatchError("$retainKeys must be a list")
        result = {k: v for k, v in result.items() if k in retain}
    return result


def _merge_list(field: str, original: list[Any], patch: list[Any]) -> list[Any]:
    if field in PRIMITIVE_MERGE:
        merged = list(original)
        merged.extend(v for v in patch if v not in merged)
        return merged
    key = _merge_key(field, original + patch)
    if key is None or not all(isinstance(i, dict) for i in patch):
        return _strip_directives(patch)
    if any(isinstance(i, dict) and i.get("$patch") == "replace" for i in patch):
        return [_strip_directives(i) for i in patch if i.get("$patch") != "replace"]
    merged = [copy.deepcopy(i) for i in original]
    for item in patch:
        if key not in item:
            raise PatchError(f"item of {field} has no merge key {key!r}: {item!r}")
        idx = next((n for n, o in enumerate(merged) if isinstance(o, dict) and o.get(key) == item[key]), None)
        if item.get("$patch") == "delete":
            if idx is not None:
                del merged[idx]
            continue
        if idx is None:
            merged.append(_strip_directives(item))
        else:
            out = _merge_map(merged[idx], item)
            if out is _DELETE:
                del merged[idx]
            else:
                merged[idx] = out
    return merged


def _apply_order(field: str, items: list[Any], order: list[Any]) -> list[Any]:
    key = _merge_key(field, items)

    def ident(item: Any) -> Any:
        return item.get(key) if key and isinstance(item, dict) else item

    wanted = [ident(o) if isinstance(o, dict) else o for o in order]
    position = {w: n for n, w in enumerate(wanted) if not isinstance(w, (dict, list))}
    ranked = sorted(enumerate(items), key=lambda p: position.get(ident(p[1]), len(wanted) + p[0]))
    return [item for _, item in ranked]
