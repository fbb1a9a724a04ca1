"""Multi-call entry point: ``sbatch``/``squeue``/... by argv[0], or ``spur <verb>``.

Slurm-named commands and native verbs share one implementation per verb. Query commands are
called in loops by scripts, so a known verb is dispatched without importing cyclopts (nor anything
else but its own module); the ``spur`` cyclopts application (:mod:`spur.cli.app`: ``spur --help``,
``spur help VERB``, unknown verbs) is built from the same table, only when it is needed.

The verb table and its module contract are in :mod:`spur.cli.verbs`.
"""

from __future__ import annotations

import os
import sys

from spur.cli.verbs import SLURM_NAMES, VERBS, run_verb, verb_args

__all__ = ["SLURM_NAMES", "VERBS", "entry", "main", "run_verb", "verb_args"]


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv if argv is None else argv)
    name = os.path.basename(argv[0]) if argv else "spur"
    if name in SLURM_NAMES:
        return run_verb(SLURM_NAMES[name], argv[1:])
    if name not in ("spur", "main.py", "__main__.py", "-c") and not name.startswith("python"):
        print(
            f"{name}: error: {name} is not a command of this Spur installation; see 'spur --help'",
            file=sys.stderr,
        )
        return 1
    args = argv[1:]
    if args and args[0] in VERBS:
        return run_verb(args[0], verb_args(args[0], args[1:]))
    from spur.cli.app import run_app

    return run_app(args)


def entry() -> None:
    rc = main()
    import gc

    # The process exits now: what is alive goes with it. Frozen, the interpreter's final collection
    # does not scan it all again (2-5 ms of a query command; the console scripts only, not main()).
    gc.freeze()
    sys.exit(rc)


if __name__ == "__main__":
    entry()
