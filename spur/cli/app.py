"""The ``spur`` cyclopts application: every VERBS entry as a command, plus ``help``.

Only imported when ``spur`` is called without a known verb (``spur``, ``spur --help``, ``spur help
VERB``, ``spur --version``, a mistyped verb): a known verb never loads cyclopts. Each verb's help is
its Slurm twin's (``spur submit --help`` is ``sbatch --help``); ``spur --help`` lists every verb with
its twin. An unknown verb is one error line naming the nearest verb and exit code 1.
"""

import difflib
import sys
from typing import Annotated

from cyclopts import App, Parameter

from spur.cli.cmdinfo import handle_meta
from spur.cli.verbs import SLURM_NAMES, VERBS, run_verb, verb_args
from spur.version import version_line

HELP = (
    "Spur: a Slurm-compatible scheduler. Each verb is a Slurm command under a plain name; the Slurm "
    "names (sbatch, squeue, ...) work too. 'spur help VERB' or 'spur VERB --help' shows a verb's options."
)


def _verb_command(verb: str):
    def command(*args: Annotated[str, Parameter(allow_leading_hyphen=True)]) -> int:
        return run_verb(verb, verb_args(verb, list(args)))

    command.__name__ = verb
    return command


def build_app() -> App:
    """The application; commands are generated from VERBS (see the contract in spur.cli.main)."""
    app = App(
        name="spur",
        help=HELP,
        version=version_line(),
        version_flags=["--version", "-V"],
        help_flags=["--help", "-h"],
        result_action="return_value",
    )
    for verb, (_module, _slurm, helptext) in VERBS.items():
        app.command(_verb_command(verb), name=verb, help=helptext)

    @app.command(name="help")
    def help_(verb: str = "") -> int:
        """Show the help of a verb (or of a Slurm command name), or this list."""
        if not verb:
            app.help_print([])
            return 0
        target = SLURM_NAMES.get(verb, verb)
        if target not in VERBS:
            return unknown_verb(verb)
        return run_verb(target, ["--help"]) if VERBS[target][1] else handle_meta(target, "--help")

    return app


def nearest_verb(word: str) -> str | None:
    """The verb (or Slurm name, mapped to its verb) closest to ``word``, if any is close."""
    names = list(VERBS) + ["help"] + list(SLURM_NAMES)
    match = difflib.get_close_matches(word, names, n=1, cutoff=0.5)
    if not match:
        return None
    return SLURM_NAMES.get(match[0], match[0])


def unknown_verb(word: str) -> int:
    hint = nearest_verb(word)
    suggestion = f"; did you mean 'spur {hint}'?" if hint else ""
    print(f"spur: error: unknown command '{word}'{suggestion} (see 'spur --help')", file=sys.stderr)
    return 1


def run_app(args: list[str]) -> int:
    """Run ``spur ARGS`` for everything that is not a known verb; returns the exit code."""
    if args and not args[0].startswith("-") and args[0] not in VERBS and args[0] != "help":
        if args[0] in SLURM_NAMES:  # `spur sbatch job.sh` means `spur submit job.sh`
            verb = SLURM_NAMES[args[0]]
            return run_verb(verb, verb_args(verb, args[1:]))
        return unknown_verb(args[0])
    if args and args[0].startswith("-") and args[0] not in ("--help", "-h", "--version", "-V"):
        print(f"spur: error: unknown option '{args[0]}' (see 'spur --help')", file=sys.stderr)
        return 1
    app = build_app()
    try:
        result = app(args, exit_on_error=False, print_error=True)
    except SystemExit as exc:
        return int(exc.code or 0)
    except Exception:  # a cyclopts parse error: already printed
        return 1
    return int(result) if isinstance(result, int) else 0
