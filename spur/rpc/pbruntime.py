"""Keep protobuf's pure-Python message runtime out of short-lived processes that do not use it.

``google.protobuf.descriptor_pool`` and ``google.protobuf.internal.builder`` import
``google.protobuf.internal.python_message`` unconditionally (and with it ``text_format``, the
pure-Python decoder/encoder, containers and well-known types), although with the upb backend, the one
this project runs on, message classes are built in C and never touch it. That import is about a third
of what loading ``spur_pb2`` costs a CLI command.

:func:`defer_pure_python_runtime` puts a stand-in module under that name, only when the backend is
upb and the module is not loaded yet. The stand-in has no attributes of its own: the first attribute
anyone reads from it imports the real module (which then replaces the stand-in in ``sys.modules``) and
answers from it, so code that does use the pure-Python runtime still gets it. Call it before the
first ``*_pb2`` import; it is a no-op afterwards.
"""

from __future__ import annotations

import sys

from spur.lazymodule import defer

__all__ = ["PYTHON_MESSAGE", "defer_pure_python_runtime"]

PYTHON_MESSAGE = "google.protobuf.internal.python_message"


def defer_pure_python_runtime() -> bool:
    """Install the stand-in (see the module docstring); True when it was installed now."""
    if PYTHON_MESSAGE in sys.modules:
        return False
    from google.protobuf.internal import api_implementation

    if api_implementation.Type() != "upb":
        return False
    return defer(PYTHON_MESSAGE)
