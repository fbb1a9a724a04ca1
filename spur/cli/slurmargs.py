"""argparse configured to fail the way Slurm's tools do (message on stderr, Slurm's exit code)."""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn


class SlurmArgParser(argparse.ArgumentParser):
    def __init__(self, prog: str, *, error_exit: int = 1, **kw) -> None:
        super().__init__(prog=prog, add_help=False, allow_abbrev=False, **kw)
        self.error_exit = error_exit
        self.add_argument("--help", action="help", help="show this help message and exit")

    def error(self, message: str) -> NoReturn:
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        print(f'Try "{self.prog} --help" for more information', file=sys.stderr)
        raise SystemExit(self.error_exit)


def split_list(values: list[str] | None) -> list[str]:
    """Flatten repeated comma-separated option values ("-u a,b -u c")."""
    out: list[str] = []
    for v in values or []:
        out.extend(x for x in v.split(",") if x)
    return out
