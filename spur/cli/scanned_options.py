"""For commands that scan their short option list by hand (``sprio``, ``sshare``): the usage error and
the option-argument rule they share.

Slurm's option rules are the usual getopt ones: ``-o FMT``, ``-oFMT`` is not supported here, and a long
option takes its argument after ``=`` or as the next word.
"""

from __future__ import annotations


class UsageError(ValueError):
    """A bad command line; the message is printed as it is, and the command exits 1."""


def option_value(prog: str, arg: str, eq: str, inline: str, args: list[str]) -> str:
    """The argument of option ``arg``: the text after ``=`` when there was one (``eq``/``inline`` are
    ``arg.partition("=")``'s second and third parts), else the next word, taken off ``args``."""
    if eq:
        return inline
    if not args:
        raise UsageError(f"{prog}: option '{arg}' requires an argument")
    return args.pop(0)
