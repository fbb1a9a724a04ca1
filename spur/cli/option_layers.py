"""Command-line options over the input environment, as srun and salloc read them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from spur.cli.client import CliError


def parse_option_layers(
    prog: str,
    argv: list[str],
    environ: Mapping[str, str],
    usage: str,
    *,
    drop_env: Sequence[str] = (),
) -> tuple[Any, Any, list[str]]:
    """Return (merged options, command-line options, positional args); CliError on a bad option.

    The command line overrides ``prog``'s input environment variables; ``drop_env`` names option
    fields the environment must not set (srun inside an allocation ignores SLURM_JOB_NAME).
    ``--help``, ``--usage`` and ``-V``/``--version`` print their text (see :mod:`spur.cli.cmdinfo`)
    and exit 0 before anything is submitted; ``usage`` is kept for callers' error texts. ``--uid`` /
    ``--gid`` from a user other than root are refused with Slurm's message.
    """
    import os

    from spur.core.job_options import (
        JobOptionError,
        check_root_only,
        merge_options,
        options_from_env,
        parse_job_options,
    )

    try:
        cli_opts, rest = parse_job_options(argv, command=prog)
        env_opts = options_from_env(environ, command=prog)
    except JobOptionError as exc:  # Slurm's srun and salloc exit as sbatch does (255 for a bad option)
        raise CliError(f"{exc}\n{exc.hint}" if exc.hint else str(exc), exit_code=exc.exit_code) from None
    from spur.cli.cmdinfo import exit_on_meta

    exit_on_meta(prog, cli_opts)  # --help, --usage, -V/--version: print, exit 0, allocate nothing
    for name in drop_env:
        setattr(env_opts, name, None)
    merged = merge_options(env_opts, cli_opts)
    try:
        check_root_only(merged, real_uid=os.getuid(), command=prog)  # --uid/--gid: root only, as Slurm
    except JobOptionError as exc:
        raise CliError(str(exc), exit_code=1) from None
    return merged, cli_opts, list(rest)
