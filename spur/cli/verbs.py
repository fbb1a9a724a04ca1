"""The verb registry of the CLI, below everything that dispatches on it (main, app, cmdinfo, manpages,
completion, doctor).

The VERBS table is the whole registry. A verb's module is its contract:

* ``main(argv: list[str]) -> int`` (required): run the command; argv excludes the program name.
* ``USAGE: str``: the synopsis, ``"Usage: NAME [OPTIONS...] ..."`` (first line of --help/--usage).
* The option table, one of:
    - ``option_docs() -> list[spur.cli.cmdinfo.OptionDoc]``, or
    - ``build_parser() -> argparse.ArgumentParser`` (use :class:`spur.cli.slurmargs.SlurmArgParser`,
      which answers --help, --usage and -V/--version by itself) with each option's one-line text in
      ``help=`` or in a module-level ``OPTION_HELP = {"long-name": "text"}`` (``OPTION_GROUPS``
      likewise groups them; default "Options").
* Optional: ``OPTION_VALUES = {"long-name": ["value", ...]}`` (what completion offers for that
  option's value; argparse ``choices=`` count too), ``SUBCOMMANDS = {"keyword": "text"}``
  (scontrol-like commands), ``DESCRIPTION`` (man
  page text; default: the module docstring), ``OPERANDS`` (what positional arguments complete to:
  ``"jobs"``, ``"nodes"``, ``"partitions"``, ``"command"``, ``"file"``).

From those hooks :mod:`spur.cli.cmdinfo` renders --help/--usage/--version, :mod:`spur.cli.manpages`
writes NAME.1, and :mod:`spur.cli.completion` completes verbs and options: a verb added to VERBS
with these hooks gets all of that with no other change. A command whose parser is not argparse
calls :func:`spur.cli.cmdinfo.exit_on_meta` / :func:`~spur.cli.cmdinfo.handle_meta` itself.
"""

from __future__ import annotations

import importlib

# verb -> (module, Slurm name or "" when Spur's own, one-line help)
VERBS: dict[str, tuple[str, str, str]] = {
    "submit": ("spur.cli.sbatch", "sbatch", "Submit a batch script (sbatch)."),
    "run": ("spur.cli.srun", "srun", "Run a command through the scheduler and stream its output (srun)."),
    "alloc": ("spur.cli.salloc", "salloc", "Allocate resources and run a shell or command in them (salloc)."),
    "queue": ("spur.cli.squeue", "squeue", "List pending and running jobs (squeue)."),
    "cancel": ("spur.cli.scancel", "scancel", "Cancel or signal jobs (scancel)."),
    "nodes": ("spur.cli.sinfo", "sinfo", "Show partitions and nodes (sinfo)."),
    "history": ("spur.cli.sacct", "sacct", "Show accounting records of jobs and steps (sacct)."),
    "attach": ("spur.cli.sattach", "sattach", "Follow a running job's output (sattach)."),
    "report": ("spur.cli.sreport", "sreport", "Usage reports from the accounting database (sreport)."),
    "diag": ("spur.cli.sdiag", "sdiag", "Controller statistics and accounting storage status (sdiag)."),
    "show": (
        "spur.cli.scontrol",
        "scontrol",
        "Show jobs, nodes, partitions, controllers; update nodes (scontrol).",
    ),
    "doctor": (
        "spur.cli.doctor",
        "",
        "Say which controller and config file the commands use, and what shadows them.",
    ),
    "completion": (
        "spur.cli.completion",
        "",
        "Print the bash or zsh completion script (spur completion bash).",
    ),
    "acct": ("spur.cli.sacctmgr", "sacctmgr", "Accounts, users, associations, QOS and limits (sacctmgr)."),
    "shares": ("spur.cli.sshare", "sshare", "Fair-share usage of accounts and users (sshare)."),
    "prio": ("spur.cli.sprio", "sprio", "Multifactor priority of pending jobs (sprio)."),
    "token": (
        "spur.cli.token",
        "",
        "Mint a SLURM_JWT token; create, list and revoke node join tokens (admin).",
    ),
    "net": ("spur.cli.net", "", "Join, leave and inspect the WireGuard mesh between nodes (spur net)."),
    "k8s": ("spur.cli.k8s", "", "Spur-managed Kubernetes (k0s): up, status, down, add-/remove-nodes, kubeconfig."),
    "node": ("spur.cli.node", "", "Drain, resume or remove nodes in Spur's scheduling layer (not k0s; admin)."),
    "web": ("spur.cli.web", "", "Print (and open) the web dashboard URL: a one-time sign-in link for you."),
    "cert": ("spur.cli.cert", "", "Make a cluster CA and node certificates for [tls] (spur cert init, issue)."),
}
SLURM_NAMES = {slurm: verb for verb, (_m, slurm, _h) in VERBS.items() if slurm}
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


def verb_args(verb: str, args: list[str]) -> list[str]:
    """The argv ``spur VERB ARGS`` hands the verb's module (``spur show job 1`` -> scontrol show job 1)."""
    if args[:1] and args[0] in ("--help", "-h", "--usage", "-V", "--version"):
        return args
    return _PREFIX_ARGS.get(verb, []) + args
