"""Keep a module a short-lived process never uses out of its start-up: a stand-in until first read.

``dataclasses`` imports ``inspect`` (which imports ``ast``, ``dis``, ``tokenize``...: about 8 ms of a
fresh process) but reads from it only to write a signature docstring for a dataclass that has none.
Every dataclass ``sbatch`` creates has a docstring, so :func:`defer` lets it skip that import: it puts
a stand-in under the module's name, whose first attribute read imports the real module (which then
replaces the stand-in in ``sys.modules``) and answers from it. Code that does use the module still
gets it, transparently; the stand-in only ever saves the import. Likewise ``copy`` (with ``weakref``),
which ``dataclasses`` reads only in ``asdict``/``astuple``. :mod:`spur.rpc.pbruntime` uses it for
protobuf's pure-Python runtime.
"""

from __future__ import annotations

import importlib
import sys
import types

__all__ = ["defer"]


class _Deferred(types.ModuleType):
    """Stands for a module until one of its attributes is read, then loads and delegates to it."""

    def __getattr__(self, attr: str):  # only called for attributes the stand-in does not have
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)  # module protocol probes (__path__, __file__...) load nothing
        if sys.modules.get(self.__name__) is self:
            del sys.modules[self.__name__]
        real = importlib.import_module(self.__name__)
        return getattr(real, attr)


def defer(name: str) -> bool:
    """Put the stand-in for module ``name`` in place unless it is loaded; True when installed now."""
    if name in sys.modules:
        return False
    sys.modules[name] = _Deferred(name)
    return True
