"""argparse configured to fail the way Slurm's tools do (message on stderr, Slurm's exit code)."""

from __future__ import annotations

import argparse
import os
import sys

from spur.cli.optlists import split_list as split_list  # re-exported

TYPE_CHECKING = False  # typing is not imported at run time (a CLI start-up cost)
if TYPE_CHECKING:
    from typing import NoReturn


class _MetaAction(argparse.Action):
    """--help, --usage, -V/--version: print the text built from this command's option table, exit 0."""

    def __init__(self, option_strings, dest, **kw) -> None:
        super().__init__(option_strings, dest=argparse.SUPPRESS, nargs=0, default=argparse.SUPPRESS, **kw)

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        from spur.cli.cmdinfo import handle_meta, verb_of

        flag = "--version" if option_string in ("-V", "--version") else option_string
        raise SystemExit(handle_meta(verb_of(parser.prog), flag or "--help"))


class SlurmArgParser(argparse.ArgumentParser):
    """A Slurm command's parser: ``--help`` (options grouped, from :mod:`spur.cli.cmdinfo`),
    ``--usage`` and ``-V``/``--version`` come built in; errors exit with ``error_exit``."""

    def __init__(self, prog: str, *, error_exit: int = 1, **kw) -> None:
        super().__init__(prog=prog, add_help=False, allow_abbrev=False, **kw)
        self.error_exit = error_exit
        self.add_argument("--help", action=_MetaAction, help="show this help message")
        self.add_argument("--usage", action=_MetaAction, help="display a brief summary of the options")
        self.add_argument("-V", "--version", action=_MetaAction, help="print the version")

    def _get_formatter(self) -> argparse.HelpFormatter:
        # argparse builds a formatter on every add_argument (to validate metavars), and the default
        # one imports shutil (with bz2, lzma, fnmatch) to ask for the terminal's width: ~2 ms of a
        # query command's start-up. The width is found here the way shutil.get_terminal_size does.
        formatter_class = self.formatter_class
        if isinstance(formatter_class, type) and issubclass(formatter_class, argparse.HelpFormatter):
            return formatter_class(prog=self.prog, width=_terminal_columns() - 2)
        return formatter_class(prog=self.prog)  # another factory: called as argparse calls it

    def error(self, message: str) -> NoReturn:
        prefix = "unrecognized arguments: "
        if message.startswith(prefix):
            # GNU getopt's wording, as Slurm's tools print it.
            print(f"{self.prog}: unrecognized option '{message[len(prefix) :].split()[0]}'", file=sys.stderr)
        else:
            print(f"{self.prog}: error: {message}", file=sys.stderr)
        print(f'Try "{self.prog} --help" for more information', file=sys.stderr)
        raise SystemExit(self.error_exit)


def _terminal_columns() -> int:
    """$COLUMNS, else the width of the terminal on stdout, else 80 (shutil.get_terminal_size's rule)."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        stdout = sys.__stdout__
        if stdout is None:  # the interpreter started without a stdout: no terminal to ask
            return 80
        try:
            columns = os.get_terminal_size(stdout.fileno()).columns
        except (ValueError, OSError):
            columns = 80
    return columns or 80


