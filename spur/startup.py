"""How the daemons (spurctld, spurd) report failures to start: one line, one documented exit code.

Exit codes, the same in every daemon:

* ``EXIT_USAGE`` (2): a bad command-line flag (argparse's convention);
* ``EXIT_CONFIG`` (78, ``EX_CONFIG`` of sysexits.h): the configuration file cannot be read or is
  invalid (the message names the file and key), or names a plugin that is not installed;
* ``EXIT_STARTUP`` (1): the daemon cannot start here (port in use, state directory in use or
  unusable); the message names the port or directory and what to do.

:func:`startup_message` turns what the start-up code raised (often inside a Trio exception group)
into that one line; it returns None for anything that is not a known start-up failure.
"""

from __future__ import annotations

import errno

EXIT_STARTUP = 1
EXIT_USAGE = 2
EXIT_CONFIG = 78


def leaves(exc: BaseException) -> list[BaseException]:
    """The non-group exceptions inside ``exc`` (itself if it is not a group)."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for sub in exc.exceptions for leaf in leaves(sub)]
    return [exc]


def startup_message(daemon: str, exc: BaseException, *, flag_hint: str = "--listen") -> str | None:
    """One line for a start-up failure of ``daemon``, or None if ``exc`` holds none we know."""
    from spur.raft.storage import StorageError
    from spur.rpc.server import ListenError

    for leaf in leaves(exc):
        if isinstance(leaf, ListenError):
            if leaf.errno == errno.EADDRINUSE:
                return (
                    f"{daemon}: error: {leaf}: another process (another {daemon}?) holds port {leaf.port}; "
                    f"stop it or choose another address with {flag_hint}"
                )
            return f"{daemon}: error: {leaf}; check the address given with {flag_hint}"
        if isinstance(leaf, StorageError):
            text = str(leaf)
            if "in use" in text:
                return (
                    f"{daemon}: error: {text}; stop the other {daemon} or give this one another --state-dir"
                )
            return f"{daemon}: error: {text}"
        if isinstance(leaf, OSError):
            where = f" {leaf.filename}" if leaf.filename else ""
            return f"{daemon}: error: cannot start:{where} {leaf.strerror or leaf}"
    return None
