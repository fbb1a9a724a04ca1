"""Multi-call entry point: ``sbatch``/``squeue``/... by argv[0], or ``spur <verb>``.

Slurm-named commands and native verbs share one implementation per verb. Query commands are
called in loops by scripts, so a known verb is dispatched without importing cyclopts; cyclopts
builds the ``spur`` app (help, unknown verbs) from the same table.
"""

from __future__ import annotations

import importlib
import os
import sys

# verb -> (module, Slurm name, help)
VERBS: dict[str, tuple[str, str, str]] = {
    "submit": ("spur.cli.sbatch", "sbatch", "Submit a batch script (sbatch)."),
    "run": ("spur.cli.srun", "srun", "Run a command through the scheduler and stream its output (srun)."),
    "alloc": ("spur.cli.salloc", "salloc", "Allocate resources and run a shell or command in them (salloc)."),
    "queue": ("spur.cli.squeue", "squeue", "List pending and running jobs (squeue)."),
    "cancel": ("spur.cli.scancel", "scancel", "Cancel or signal jobs (scancel)."),
    "nodes": ("spur.cli.sinfo", "sinfo", "Show partitions and nodes (sinfo)."),
    "history": ("spur.cli.sacct", "sacct", "Show accounting records of jobs and steps (sacct)."),
    "report": ("spur.cli.sreport", "sreport", "Usage reports from the accounting database (sreport)."),
    "diag": ("spur.cli.sdiag", "sdiag", "Controller statistics and accounting storage status (sdiag)."),
    "show": (
        "spur.cli.scontrol",
        "scontrol",
        "Show jobs, nodes, partitions, controllers; update nodes (scontrol).",
    ),
}
SLURM_NAMES = {slurm: verb for verb, (_m, slurm, _h) in VERBS.items()}
# `spur show X` reads like `scontrol show X`.
_PREFIX_ARGS = {"show": ["show"]}


def run_verb(verb: str, args: list[str]) -> int:
    module = importlib.import_module(VERBS[verb][0])
    try:
        return int(module.main(args) or 0)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


def build_app():
    from typing import Annotated

    from cyclopts import App, Parameter

    app = App(
        name="spur", help="Spur: a Slurm-compatible scheduler. Slurm names (sbatch, squeue, ...) work too."
    )
    for verb, (_module, _slurm, helptext) in VERBS.items():

        def command(*args: Annotated[str, Parameter(allow_leading_hyphen=True)], _verb: str = verb) -> int:
            return run_verb(_verb, _PREFIX_ARGS.get(_verb, []) + list(args))

        app.command(command, name=verb, help=helptext)
    return app


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv if argv is None else argv)
    name = os.path.basename(argv[0]) if argv else "spur"
    if name in SLURM_NAMES:
        return run_verb(SLURM_NAMES[name], argv[1:])
    args = argv[1:]
    if args and args[0] in VERBS and "--help" not in args[:1]:
        return run_verb(args[0], _PREFIX_ARGS.get(args[0], []) + args[1:])
    result = build_app()(args, result_action="return_value")
    return int(result or 0) if isinstance(result, int) else 0


def entry() -> None:
    sys.exit(main())


if __name__ == "__main__":
    entry()
