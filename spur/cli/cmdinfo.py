"""What each command offers, read from the tables that drive its parser: the source of --help,
--usage, --version, the man pages and shell completion.

A command is described by :class:`CommandDoc`, built by :func:`describe` from the verb's module
(see the hook contract in :mod:`spur.cli.main`). Options come from, in order of preference:

* ``option_docs() -> list[OptionDoc]`` defined by the module (sbatch, srun and salloc derive theirs
  from :data:`spur.core.job_options._OPTIONS`, the table their parser walks);
* ``build_parser()`` returning an :class:`argparse.ArgumentParser`: every action becomes an option;
  its one-line description is the action's ``help=`` or the module's ``OPTION_HELP[long name]``,
  its group the module's ``OPTION_GROUPS[long name]`` (default ``"Options"``).

Rendering (:func:`render_help`, :func:`render_usage`) is pure text; nothing here talks to a
controller, and nothing heavy is imported (help paths of query commands stay fast).
"""

from __future__ import annotations

import argparse
import importlib
import inspect
from collections.abc import Iterable
from dataclasses import dataclass, field
from types import ModuleType

from spur.version import version_line


@dataclass(frozen=True)
class OptionDoc:
    """One command-line option. ``arg`` is ``"none"`` (a flag), ``"required"`` or ``"optional"``."""

    long: str | None  # without the leading "--"
    short: str | None  # one character, without "-"
    arg: str = "none"
    metavar: str = ""
    help: str = ""
    group: str = "Options"
    choices: tuple[str, ...] = ()

    def flags(self) -> str:
        """``-p, --partition=NAME`` as Slurm's --help shows it."""
        parts = []
        if self.short:
            parts.append(f"-{self.short}")
        if self.long:
            long = f"--{self.long}"
            if self.arg == "required":
                long += f"={self.metavar or 'VALUE'}"
            elif self.arg == "optional":
                long += f"[={self.metavar or 'VALUE'}]"
            parts.append(long)
        elif self.short and self.arg == "required":
            parts[-1] += f" {self.metavar or 'VALUE'}"
        text = ", ".join(parts)
        return text if self.short else "    " + text

    def words(self) -> list[str]:
        """The option strings a shell should complete."""
        out = [f"--{self.long}"] if self.long else []
        if self.short:
            out.append(f"-{self.short}")
        return out


@dataclass
class CommandDoc:
    """Everything the help, man and completion generators need to know about one command."""

    name: str  # the Slurm name (sbatch) or the spur verb when it has no Slurm twin
    verb: str
    summary: str
    usage: str  # "Usage: ..." (one or more lines)
    options: list[OptionDoc] = field(default_factory=list)
    subcommands: dict[str, str] = field(default_factory=dict)  # scontrol-like keywords -> help
    description: str = ""
    operands: str = ""  # what positional arguments complete to: "jobs", "nodes", "command", "file", ""

    def groups(self) -> list[tuple[str, list[OptionDoc]]]:
        order: dict[str, list[OptionDoc]] = {}
        for opt in self.options:
            order.setdefault(opt.group, []).append(opt)
        return list(order.items())


def _module(verb: str) -> ModuleType:
    from spur.cli.verbs import VERBS

    return importlib.import_module(VERBS[verb][0])


def _first_paragraph(text: str | None) -> str:
    return inspect.cleandoc(text or "").split("\n\n", 1)[0].replace("\n", " ").strip()


def describe(verb: str) -> CommandDoc:
    """The CommandDoc of ``verb`` (a key of VERBS), read from its module's hooks."""
    from spur.cli.verbs import VERBS

    _mod, slurm, summary = VERBS[verb]
    module = _module(verb)
    name = slurm or verb
    options: list[OptionDoc]
    if hasattr(module, "option_docs"):
        options = list(module.option_docs())
    elif hasattr(module, "build_parser"):
        options = argparse_options(
            module.build_parser(), getattr(module, "OPTION_HELP", {}), getattr(module, "OPTION_GROUPS", {})
        )
    else:
        options = []
    values = getattr(module, "OPTION_VALUES", {})
    if values:
        from dataclasses import replace

        options = [replace(o, choices=tuple(values[o.long])) if o.long in values else o for o in options]
    options += [o for o in META_OPTIONS if not any(o.long == x.long for x in options)]
    usage = getattr(module, "USAGE", "") or f"Usage: {name} [OPTIONS...]"
    usage = usage.strip().split("\n\n", 1)[0]
    return CommandDoc(
        name=name,
        verb=verb,
        summary=summary,
        usage=usage,
        options=options,
        subcommands=dict(getattr(module, "SUBCOMMANDS", {})),
        description=getattr(module, "DESCRIPTION", "") or inspect.cleandoc(module.__doc__ or ""),
        operands=getattr(module, "OPERANDS", ""),
    )


META_OPTIONS = (
    OptionDoc("help", None, help="show this help message", group="Help"),
    OptionDoc("usage", None, help="display a brief summary of the command's options", group="Help"),
    OptionDoc(
        "version",
        "V",
        help="print the Slurm version this command is compatible with, and Spur's",
        group="Help",
    ),
)


def argparse_options(
    parser: argparse.ArgumentParser, helps: dict[str, str], groups: dict[str, str]
) -> list[OptionDoc]:
    """OptionDocs of every optional argument of ``parser`` (positionals are operands, not options)."""
    out: list[OptionDoc] = []
    for action in parser._actions:
        if not action.option_strings:
            continue
        longs = [s[2:] for s in action.option_strings if s.startswith("--")]
        shorts = [s[1:] for s in action.option_strings if len(s) == 2 and s[0] == "-" and s[1] != "-"]
        long = longs[0] if longs else None
        if long in ("help", "usage", "version"):
            continue
        if action.nargs == 0:
            arg = "none"
        elif action.nargs == "?":
            arg = "optional"
        else:
            arg = "required"
        metavar = action.metavar if isinstance(action.metavar, str) else (action.dest or "").upper()
        text = (
            action.help if action.help and action.help is not argparse.SUPPRESS else helps.get(long or "", "")
        )
        out.append(
            OptionDoc(
                long=long,
                short=shorts[0] if shorts else None,
                arg=arg,
                metavar=metavar if arg != "none" else "",
                help=text or "",
                group=groups.get(long or "", "Options"),
                choices=tuple(str(c) for c in action.choices or ()),
            )
        )
    return out


def render_help(doc: CommandDoc) -> str:
    """Slurm-style --help: the usage line, then options grouped, one line each."""
    lines = [doc.usage, ""]
    if doc.subcommands:
        lines.append("Commands:")
        width = max(len(k) for k in doc.subcommands) + 2
        lines += [f"  {k.ljust(width)}{v}" for k, v in doc.subcommands.items()]
        lines.append("")
    for title, opts in doc.groups():
        lines.append(f"{title}:")
        flags = [o.flags() for o in opts]
        width = min(34, max(len(f) for f in flags) + 2)
        for flag, opt in zip(flags, opts, strict=True):
            if len(flag) + 2 > width:
                lines.append(f"  {flag}")
                lines.append(f"  {'':{width}}{opt.help}")
            else:
                lines.append(f"  {flag.ljust(width)}{opt.help}")
        lines.append("")
    return "\n".join(lines)


def render_usage(doc: CommandDoc) -> str:
    """Slurm-style --usage: a compact synopsis of every option, wrapped at 80 columns."""
    items: list[str] = []
    for opt in doc.options:
        if opt.group == "Help":
            continue
        if opt.short and opt.arg == "required":
            items.append(f"[-{opt.short} {(opt.metavar or 'value').lower()}]")
        elif opt.short and opt.arg == "optional":
            items.append(f"[-{opt.short} [{(opt.metavar or 'value').lower()}]]")
        elif opt.short:
            items.append(f"[-{opt.short}]")
        elif opt.arg == "required":
            items.append(f"[--{opt.long}={(opt.metavar or 'value').lower()}]")
        else:
            items.append(f"[--{opt.long}]")
    synopsis = doc.usage.splitlines()[0].removeprefix("Usage:").strip()
    tail = synopsis.split(None, 1)[1] if " " in synopsis else ""
    tail = " ".join(w for w in tail.split() if not w.startswith("[OPTIONS"))
    prog = doc.name if doc.name != doc.verb else f"spur {doc.verb}"  # Spur-only verbs run as `spur VERB`
    if tail.split()[:1] == [doc.verb] and prog.startswith("spur "):
        tail = tail.split(None, 1)[1] if " " in tail else ""
        if doc.subcommands:
            tail = "{" + "|".join(doc.subcommands) + "}"
    return "\n".join(_wrap(f"Usage: {prog}", items + ([tail] if tail else []))) + "\n"


def _wrap(head: str, items: Iterable[str], width: int = 80) -> list[str]:
    lines, line = [], head
    indent = " " * (len(head) + 1)
    for item in items:
        if len(line) + 1 + len(item) > width and line.strip():
            lines.append(line)
            line = indent + item
        else:
            line += " " + item
    lines.append(line)
    return lines


def handle_meta(verb: str, flag: str) -> int:
    """Print --help / --usage / --version for ``verb``; returns the exit code (0)."""
    if flag in ("-V", "--version"):
        print(version_line())
        return 0
    doc = describe(verb)
    print(render_usage(doc) if flag == "--usage" else render_help(doc), end="")
    return 0


def verb_of(prog: str) -> str:
    """The VERBS key of a Slurm command name (``sbatch`` -> ``submit``) or of a verb itself."""
    from spur.cli.verbs import SLURM_NAMES, VERBS

    prog = prog.removeprefix("spur ")  # a verb's own parser may be named "spur VERB"
    return prog if prog in VERBS else SLURM_NAMES[prog]


def exit_on_meta(prog: str, opts: object) -> None:
    """For sbatch/srun/salloc: if ``opts`` (JobOptions) asks for --help, --usage or --version, print
    it and exit 0, before anything is read, submitted or allocated."""
    flag = (
        "--help"
        if getattr(opts, "help", None)
        else "--usage"
        if getattr(opts, "usage", None)
        else "--version"
        if getattr(opts, "version", None)
        else None
    )
    if flag is not None:
        raise SystemExit(handle_meta(verb_of(prog), flag))
