"""Dispatch of a verb with subcommands (``spur k8s up``, ``spur node drain``): one rule for all of them.

No arguments prints the usage (exit 2); a leading ``-h/--help/help/--usage/-V/--version`` is answered
from the generated command info, like every verb; an unknown subcommand exits 2 naming the known ones.
Each subcommand takes its argument list and returns the exit code; argparse's SystemExit becomes that
code, a :class:`~spur.cli.client.CliError` is printed as ``PROG SUB: error: MESSAGE`` (or without
``error:`` when the message starts with one of ``plain_messages``) and exits with its code, Ctrl-C 130.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence

META_FLAGS = ("-h", "--help", "help", "--usage", "-V", "--version")


def run_subcommand(
    verb: str,
    usage: str,
    commands: Mapping[str, Callable[[list[str]], int]],
    args: list[str],
    *,
    plain_messages: Sequence[str] = (),
) -> int:
    """Run ``spur VERB ARGS`` (see the module docstring)."""
    from spur.cli.client import CliError

    prog = f"spur {verb}"
    if not args:
        print(usage, file=sys.stderr)
        return 2
    if args[0] in META_FLAGS:
        from spur.cli.cmdinfo import handle_meta

        return handle_meta(verb, "--help" if args[0] in ("-h", "help") else args[0])
    sub, rest = args[0], args[1:]
    command = commands.get(sub)
    if command is None:
        print(f"{prog}: error: unknown command {sub!r} (commands: {', '.join(commands)})", file=sys.stderr)
        return 2
    try:
        return command(rest)
    except SystemExit as exc:  # argparse: --help (0) or a usage error (2)
        return int(exc.code or 0)
    except CliError as exc:
        plain = any(exc.message.startswith(m) for m in plain_messages)
        print(f"{prog} {sub}: {'' if plain else 'error: '}{exc.message}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
