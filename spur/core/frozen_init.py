"""A faster ``__init__`` for frozen dataclasses built on hot paths (scheduler views, decisions).

``@dataclass(frozen=True)`` generates an ``__init__`` that stores each field through
``object.__setattr__`` (a global lookup, an attribute lookup and a call per field), because the class's
own ``__setattr__`` refuses. For a twelve-field view that is about six times the cost of a plain
dataclass's ``__init__``. :func:`quick_init` replaces it with one that writes the fields straight into
the instance's ``__dict__``, as attrs does for its frozen classes. Everything else stays the
dataclass's: fields, defaults, ``__eq__``/``__hash__``/``__repr__``, ``replace``, and the instance
stays frozen (assigning a field still raises ``FrozenInstanceError``).

Supported: positional-or-keyword and keyword-only fields, defaults, default factories, fields with
``init=False``, ``__post_init__`` without ``InitVar``. A class with ``__slots__`` (no instance dict) or
an ``InitVar`` is refused at decoration time with ``TypeError``.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any, TypeVar

T = TypeVar("T")

_MISSING = dataclasses.MISSING


def quick_init(cls: type[T]) -> type[T]:
    """Give frozen dataclass ``cls`` an ``__init__`` that fills its instance dict directly (see the
    module docstring); returns ``cls``."""
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen:
        raise TypeError(f"{cls.__name__}: quick_init is for frozen dataclasses")
    if "__slots__" in cls.__dict__:
        raise TypeError(f"{cls.__name__}: quick_init needs an instance __dict__ (no slots)")
    taken = [n for n in inspect.signature(cls.__init__).parameters if n != "self"]
    if taken != [f.name for f in dataclasses.fields(cls) if f.init]:  # type: ignore[arg-type]
        raise TypeError(f"{cls.__name__}: quick_init does not support InitVar")
    namespace: dict[str, Any] = {"__MISSING": _MISSING}
    positional: list[str] = []
    keyword: list[str] = []
    body = ["    __d = self.__dict__"]
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if f.init:
            param = f.name
            if f.default is not _MISSING:
                namespace[f"__default_{f.name}"] = f.default
                param += f"=__default_{f.name}"
            elif f.default_factory is not _MISSING:
                namespace[f"__factory_{f.name}"] = f.default_factory
                param += "=__MISSING"
            (keyword if f.kw_only else positional).append(param)
            if f.default_factory is not _MISSING:
                value = f"__factory_{f.name}() if {f.name} is __MISSING else {f.name}"
            else:
                value = f.name
        elif f.default is not _MISSING:
            namespace[f"__default_{f.name}"] = f.default
            value = f"__default_{f.name}"
        elif f.default_factory is not _MISSING:
            namespace[f"__factory_{f.name}"] = f.default_factory
            value = f"__factory_{f.name}()"
        else:
            continue  # init=False without a default: the dataclass leaves it unset too
        body.append(f"    __d[{f.name!r}] = {value}")
    if hasattr(cls, "__post_init__"):
        body.append("    self.__post_init__()")
    signature = ", ".join(["self", *positional, *(["*", *keyword] if keyword else [])])
    source = f"def __init__({signature}):\n" + "\n".join(body) + "\n"
    exec(source, namespace)  # noqa: S102 - generated from the class's own field names, as dataclasses does
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    init.__doc__ = cls.__init__.__doc__
    cls.__init__ = init  # type: ignore[method-assign]
    return cls
