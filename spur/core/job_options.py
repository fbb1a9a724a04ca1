"""One option parser for sbatch, srun and salloc: command line, input environment and #SBATCH lines.

Each source produces a :class:`JobOptions` layer in which unset options are ``None``; layers combine
with :func:`merge_options` in Slurm's precedence (script < environment < command line)::

    script_opts = parse_script_options(parse_sbatch_directives(text))
    env_opts = options_from_env(os.environ)
    cli_opts, rest = parse_job_options(sys.argv[1:])
    opts = merge_options(script_opts, env_opts, cli_opts)
    spec = build_job_spec(opts, script=text, argv=rest, cwd=os.getcwd(), environ=os.environ)

Parsing follows GNU ``getopt_long`` as Slurm uses it: options stop at the first positional argument
or ``--``; long options take ``--opt=value`` or ``--opt value`` and may be abbreviated to any
unambiguous prefix; short options take ``-N2`` or ``-N 2`` and flags cluster (``-vvH``).
Errors raise :class:`JobOptionError` whose ``str()`` is the exact line Slurm prints.
"""

from __future__ import annotations

import os.path
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields, replace

from spur.core import hostlist
from spur.core.jobspec import JobSpec
from spur.core.resources import (
    ResourceError,
    format_gres,
    parse_gpus,
    parse_gres,
    parse_memory_mb,
)
from spur.core.submit_words import SUBMIT_FAILED
from spur.core.timespec import TimeSpecError, parse_begin_time, parse_time_limit

TYPE_CHECKING = False  # typing is not imported at run time: sbatch's start-up pays for every import
if TYPE_CHECKING:
    from typing import Any, Literal

    ArgKind = Literal["none", "required", "optional"]
    _Parser = Callable[[str | None, "JobOptions"], dict[str, Any]]
    ExportMode = Literal["ALL", "NONE", "LIST"]

__all__ = [
    "JobOptionError",
    "JobOptions",
    "Dependency",
    "DependencyCondition",
    "DependencyTarget",
    "SignalSpec",
    "parse_job_options",
    "parse_script_options",
    "options_from_env",
    "merge_options",
    "check_root_only",
    "build_job_spec",
    "parse_array_spec",
    "parse_dependency",
    "parse_signal_spec",
    "parse_export",
    "export_environment",
    "ENV_OPTIONS",
]

COMMANDS = ("sbatch", "srun", "salloc")
MAX_COUNT = 2**31 - 2
MAX_ARRAY_INDEX = 4_000_000
MAX_JOB_ID = 2**32 - 3
NICE_LIMIT = 2**31 - 3
DEFAULT_NICE = 100
DEFAULT_SIGNAL_TIME = 60


class JobOptionError(ValueError):
    """A bad option or value. ``str()`` is the full line Slurm prints (e.g.
    ``sbatch: unrecognized option '--bogus'``); ``hint`` is the follow-up line, if any."""

    def __init__(self, line: str, *, command: str = "sbatch", hint: str = "", exit_code: int = 255) -> None:
        super().__init__(line)
        self.command = command
        self.hint = hint
        # sbatch's exit status for it: 255 for what its option parser refuses, 1 for what Slurm's
        # sbatch leaves to a later check (counts) or to the controller (array, dependency, node list).
        self.exit_code = exit_code


@dataclass
class JobOptions:
    """Options given to sbatch/srun/salloc. Every field is ``None`` when the option was not given.

    Values are parsed and validated: counts are ints, memory is MB, ``time_limit`` is seconds (or
    UNLIMITED), flags are bools. Specs whose meaning needs more context stay strings but are
    validated: ``array`` (:func:`parse_array_spec`), ``dependency`` (:func:`parse_dependency`),
    ``signal`` (:func:`parse_signal_spec`), ``export`` (:func:`parse_export`), ``begin``
    (:func:`spur.core.timespec.parse_begin_time`), ``gres``/``gpus*`` and host lists.
    """

    job_name: str | None = None
    account: str | None = None
    partition: str | None = None
    qos: str | None = None
    nodes_min: int | None = None
    nodes_max: int | None = None
    ntasks: int | None = None
    cpus_per_task: int | None = None
    ntasks_per_node: int | None = None
    mem_mb: int | None = None
    mem_per_cpu_mb: int | None = None
    time_limit: int | None = None
    begin: str | None = None
    output: str | None = None
    error: str | None = None
    input: str | None = None
    chdir: str | None = None
    export: str | None = None
    array: str | None = None
    dependency: str | None = None
    gres: str | None = None
    gpus: str | None = None
    gpus_per_node: str | None = None
    gpus_per_task: str | None = None
    nodelist: str | None = None
    exclude: str | None = None
    constraint: str | None = None
    exclusive: bool | None = None
    hold: bool | None = None
    requeue: bool | None = None
    signal: str | None = None
    wrap: str | None = None
    parsable: bool | None = None
    test_only: bool | None = None
    wait: bool | None = None
    wait_secs: int | None = None
    comment: str | None = None
    wckey: str | None = None
    ntasks_per_gpu: int | None = None
    nice: int | None = None
    quiet: bool | None = None
    verbose: int | None = None
    mail_type: str | None = None
    mail_user: str | None = None
    open_mode: str | None = None
    kill_on_invalid_dep: bool | None = None
    oversubscribe: bool | None = None
    unbuffered: bool | None = None
    label: bool | None = None
    pty: bool | None = None
    mpi: str | None = None
    kill_on_bad_exit: bool | None = None
    cpu_bind: str | None = None
    overlap: bool | None = None
    uid: str | None = None
    gid: str | None = None
    jobid: int | None = None
    help: bool | None = None
    usage: bool | None = None
    version: bool | None = None


# Fields that are one Slurm setting: a layer that sets any of them replaces all of them.
_FIELD_GROUPS: tuple[tuple[str, ...], ...] = (("nodes_min", "nodes_max"), ("mem_mb", "mem_per_cpu_mb"))


# ---- value parsers -------------------------------------------------------------------------------


class _BadValue(Exception):
    """Raised by value parsers; turned into a JobOptionError naming the option (Slurm's words: the
    option's own :class:`_Opt` ``bad`` line, or ``line`` given here for one particular value)."""

    def __init__(self, line: _BadLine | None = None) -> None:
        super().__init__()
        self.line = line


# (command, option's long name, value) -> (the line Slurm's command prints, sbatch's exit status)
_BadLine = Callable[[str, str, str], tuple[str, int]]


def _bad_spec(command: str, long: str, _value: str) -> tuple[str, int]:
    return f"{command}: error: Invalid --{long} specification", 255


def _bad_number(command: str, long: str, value: str) -> tuple[str, int]:
    return f'{command}: error: Invalid numeric value "{value}" for --{long}.', 1


def _refused(reason: str) -> _BadLine:
    """A value Slurm's command passes on and its controller refuses (``Batch job submission failed: ...``)."""

    def line(command: str, _long: str, _value: str) -> tuple[str, int]:
        return f"{command}: error: {SUBMIT_FAILED.get(command, '')}{reason}", 1

    return line


def _said(text: str, exit_code: int) -> _BadLine:
    """A fixed error text (``{value}`` replaced by the value)."""

    def line(command: str, _long: str, value: str) -> tuple[str, int]:
        return f"{command}: error: {text.format(value=value)}", exit_code

    return line


def _int_in(text: str, lo: int, hi: int) -> int:
    t = text.strip()
    if not re.fullmatch(r"[+-]?\d{1,12}", t):
        raise _BadValue
    v = int(t)
    if not lo <= v <= hi:
        raise _BadValue
    return v


def _str(field_name: str) -> _Parser:
    def parse(value: str | None, _cur: JobOptions) -> dict[str, Any]:
        return {field_name: value}

    return parse


def _nonempty(field_name: str) -> _Parser:
    def parse(value: str | None, _cur: JobOptions) -> dict[str, Any]:
        if not value or not value.strip():
            raise _BadValue
        return {field_name: value}

    return parse


def _flag(field_name: str, value_when_set: bool = True) -> _Parser:
    def parse(_value: str | None, _cur: JobOptions) -> dict[str, Any]:
        return {field_name: value_when_set}

    return parse


def _count(field_name: str, lo: int = 1) -> _Parser:
    def parse(value: str | None, _cur: JobOptions) -> dict[str, Any]:
        return {field_name: _int_in(value or "", lo, MAX_COUNT)}

    return parse


def _nodes(value: str | None, _cur: JobOptions) -> dict[str, Any]:
    m = re.fullmatch(r"\s*(\d{1,10})(?:-(\d{1,10}))?\s*", value or "")
    if not m:
        raise _BadValue(_said('"{value}" is not a valid node count', 255))
    lo = int(m.group(1))
    hi = int(m.group(2)) if m.group(2) else lo
    if lo < 1 or hi < lo or hi > MAX_COUNT:
        raise _BadValue(_refused("Node count specification invalid"))
    return {"nodes_min": lo, "nodes_max": hi}


def _mem(field_name: str) -> _Parser:
    def parse(value: str | None, _cur: JobOptions) -> dict[str, Any]:
        text = (value or "").strip()
        # Slurm accepts a trailing B after the unit ("2GB", "512MB"), as submitit writes it.
        if len(text) >= 3 and text[-1] in "bB" and text[-2] in "kmgtKMGT" and text[-3].isdigit():
            text = text[:-1]
        try:
            return {field_name: parse_memory_mb(text)}
        except ResourceError:
            raise _BadValue from None

    return parse


def _time(value: str | None, _cur: JobOptions) -> dict[str, Any]:
    try:
        return {"time_limit": parse_time_limit(value or "")}
    except TimeSpecError:
        raise _BadValue from None


# Validity of a --begin spec does not depend on the current time; any fixed instant will do.
_BEGIN_PROBE_NOW = 1_700_000_000.0


def _begin(value: str | None, _cur: JobOptions) -> dict[str, Any]:
    try:
        parse_begin_time(value or "", _BEGIN_PROBE_NOW)
    except TimeSpecError:
        raise _BadValue from None
    return {"begin": value}


def _validated(field_name: str, check: Callable[[str], object]) -> _Parser:
    def parse(value: str | None, _cur: JobOptions) -> dict[str, Any]:
        try:
            check(value or "")
        except ValueError:
            raise _BadValue from None
        return {field_name: value}

    return parse


def _check_hostlist(value: str) -> None:
    if not hostlist.expand(value):
        raise ValueError(value)


def _check_gres(value: str) -> None:
    parse_gres([value])


def _kill_on_bad_exit(value: str | None, _cur: JobOptions) -> dict[str, Any]:
    """``-K``/``--kill-on-bad-exit[=0|1]`` (Slurm: a bare flag means 1)."""
    if value is None:
        return {"kill_on_bad_exit": True}
    try:
        return {"kill_on_bad_exit": int(value) != 0}
    except ValueError:
        raise _BadValue from None


def _exclusive(value: str | None, _cur: JobOptions) -> dict[str, Any]:
    if value is not None and value.strip().lower() not in ("", "user", "mcs", "topo"):
        raise _BadValue
    return {"exclusive": True}


def _nice(value: str | None, _cur: JobOptions) -> dict[str, Any]:
    if value is None or not value.strip():
        return {"nice": DEFAULT_NICE}
    return {"nice": _int_in(value, -NICE_LIMIT, NICE_LIMIT)}


def _verbose(value: str | None, cur: JobOptions) -> dict[str, Any]:
    # From the command line each -v adds one; from SBATCH_DEBUG etc. the value is the level.
    if value is not None:
        return {"verbose": _int_in(value, 0, 100)}
    return {"verbose": (cur.verbose or 0) + 1}


def _open_mode(value: str | None, _cur: JobOptions) -> dict[str, Any]:
    v = (value or "").strip().lower()
    if v and "append".startswith(v):
        return {"open_mode": "append"}
    if v and "truncate".startswith(v):
        return {"open_mode": "truncate"}
    raise _BadValue


def _yes_no(field_name: str) -> _Parser:
    def parse(value: str | None, _cur: JobOptions) -> dict[str, Any]:
        v = (value or "").strip().lower()
        if v in ("yes", "y", "1", "true"):
            return {field_name: True}
        if v in ("no", "n", "0", "false"):
            return {field_name: False}
        raise _BadValue

    return parse


_MAIL_TYPES = frozenset(
    "NONE BEGIN END FAIL REQUEUE ALL INVALID_DEPEND STAGE_OUT TIME_LIMIT TIME_LIMIT_90 TIME_LIMIT_80 "
    "TIME_LIMIT_50 ARRAY_TASKS".split()
)


def _mail_type(value: str | None, _cur: JobOptions) -> dict[str, Any]:
    parts = [p.strip().upper() for p in (value or "").split(",")]
    if not parts or any(p not in _MAIL_TYPES for p in parts):
        raise _BadValue
    return {"mail_type": value}


def _int_field(field_name: str, lo: int, hi: int) -> _Parser:
    def parse(value: str | None, _cur: JobOptions) -> dict[str, Any]:
        return {field_name: _int_in(value or "", lo, hi)}

    return parse


# ---- option table --------------------------------------------------------------------------------

_ALL = frozenset(COMMANDS)
_SB = frozenset({"sbatch"})
_SR = frozenset({"srun"})
_SB_SR = frozenset({"sbatch", "srun"})


@dataclass(frozen=True)
class _Opt:
    """One option of the sbatch/srun/salloc table: its names, parser and the commands it belongs to."""

    long: str
    short: str | None
    arg: ArgKind
    parse: _Parser
    commands: frozenset[str] = _ALL
    # Slurm's line for a value ``parse`` refuses.
    bad: _BadLine = _bad_spec


_OPTIONS: tuple[_Opt, ...] = (
    _Opt("job-name", "J", "required", _str("job_name")),
    _Opt("account", "A", "required", _nonempty("account")),
    _Opt("partition", "p", "required", _nonempty("partition")),
    _Opt("qos", "q", "required", _nonempty("qos")),
    _Opt("nodes", "N", "required", _nodes),
    _Opt("ntasks", "n", "required", _count("ntasks"), bad=_bad_number),
    _Opt("cpus-per-task", "c", "required", _count("cpus_per_task"), bad=_bad_number),
    _Opt("ntasks-per-node", None, "required", _count("ntasks_per_node"), bad=_bad_number),
    _Opt("tasks-per-node", None, "required", _count("ntasks_per_node"), bad=_bad_number),
    _Opt("mem", None, "required", _mem("mem_mb")),
    _Opt("mem-per-cpu", None, "required", _mem("mem_per_cpu_mb")),
    _Opt("time", "t", "required", _time),
    _Opt("begin", "b", "required", _begin),
    _Opt("output", "o", "required", _nonempty("output"), _SB_SR),
    _Opt("error", "e", "required", _nonempty("error"), _SB_SR),
    _Opt("input", "i", "required", _nonempty("input"), _SB_SR),
    _Opt("chdir", "D", "required", _nonempty("chdir")),
    _Opt("export", None, "required", _validated("export", lambda v: parse_export(v)), _SB_SR),
    _Opt(
        "array", "a", "required", _validated("array", lambda v: parse_array_spec(v)), _SB,
        bad=_refused("Invalid job array specification"),
    ),
    _Opt(
        "dependency", "d", "required", _validated("dependency", lambda v: parse_dependency(v)),
        bad=_refused("Job dependency problem"),
    ),
    _Opt(
        "gres", None, "required", _validated("gres", _check_gres),
        bad=_said("Invalid generic resource (gres) specification", 1),
    ),
    _Opt("gpus", "G", "required", _validated("gpus", parse_gpus)),
    _Opt("gpus-per-node", None, "required", _validated("gpus_per_node", parse_gpus)),
    _Opt("gpus-per-task", None, "required", _validated("gpus_per_task", parse_gpus)),
    _Opt(
        "nodelist", "w", "required", _validated("nodelist", _check_hostlist),
        bad=_refused("Invalid node name specified"),
    ),
    _Opt("exclude", "x", "required", _validated("exclude", _check_hostlist)),
    _Opt("constraint", "C", "required", _nonempty("constraint")),
    _Opt("exclusive", None, "optional", _exclusive),
    _Opt("hold", "H", "none", _flag("hold")),
    _Opt("requeue", None, "none", _flag("requeue", True), _SB),
    _Opt("no-requeue", None, "none", _flag("requeue", False), _SB),
    _Opt("signal", None, "required", _validated("signal", lambda v: parse_signal_spec(v))),
    _Opt("wrap", None, "required", _str("wrap"), _SB),
    _Opt("parsable", None, "none", _flag("parsable"), _SB),
    _Opt("test-only", None, "none", _flag("test_only"), _SB_SR),
    _Opt("wait", "W", "none", _flag("wait"), _SB),
    _Opt("wait", "W", "required", _int_field("wait_secs", 0, MAX_COUNT), _SR),
    _Opt("comment", None, "required", _str("comment")),
    _Opt("wckey", None, "required", _nonempty("wckey")),
    _Opt("ntasks-per-gpu", None, "required", _count("ntasks_per_gpu"), bad=_bad_number),
    _Opt("nice", None, "optional", _nice),
    _Opt("quiet", "Q", "none", _flag("quiet")),
    _Opt("verbose", "v", "none", _verbose),
    _Opt("mail-type", None, "required", _mail_type),
    _Opt("mail-user", None, "required", _nonempty("mail_user")),
    _Opt("open-mode", None, "required", _open_mode, _SB_SR),
    _Opt("kill-on-invalid-dep", None, "required", _yes_no("kill_on_invalid_dep")),
    _Opt("oversubscribe", "s", "none", _flag("oversubscribe")),
    _Opt("unbuffered", "u", "none", _flag("unbuffered"), _SR),
    _Opt("label", "l", "none", _flag("label"), _SR),
    _Opt("pty", None, "none", _flag("pty"), _SR),
    _Opt("mpi", None, "required", _nonempty("mpi"), _SR),
    _Opt("kill-on-bad-exit", "K", "optional", _kill_on_bad_exit, _SR),
    _Opt("cpu-bind", None, "required", _nonempty("cpu_bind")),
    _Opt("overlap", None, "none", _flag("overlap"), _SR),
    _Opt("jobid", None, "required", _int_field("jobid", 1, MAX_JOB_ID), _SR),
    _Opt("uid", None, "required", _nonempty("uid")),
    _Opt("gid", None, "required", _nonempty("gid")),
    _Opt("help", "h", "none", _flag("help")),
    _Opt("usage", None, "none", _flag("usage")),
    _Opt("version", "V", "none", _flag("version")),
)


def _table(command: str) -> tuple[dict[str, _Opt], dict[str, _Opt]]:
    longs: dict[str, _Opt] = {}
    shorts: dict[str, _Opt] = {}
    for opt in _OPTIONS:
        if command not in opt.commands:
            continue
        longs[opt.long] = opt
        if opt.short:
            shorts[opt.short] = opt
    return longs, shorts


_TABLES = {cmd: _table(cmd) for cmd in COMMANDS}


# ---- command line --------------------------------------------------------------------------------


def _hint(command: str) -> str:
    return f'Try "{command} --help" for more information'


def _apply(opts: JobOptions, opt: _Opt, value: str | None, command: str) -> None:
    try:
        updates = opt.parse(value, opts)
    except _BadValue as exc:
        # Slurm's words: mostly without the value, never saying where it came from (line, variable).
        line, exit_code = (exc.line or opt.bad)(command, opt.long, value or "")
        raise JobOptionError(line, command=command, exit_code=exit_code) from None
    for key, val in updates.items():
        setattr(opts, key, val)


# Spellings Slurm's getopt tables also accept (Open MPI's mpirun passes --cpu_bind to srun).
_UNDERSCORE_ALIASES = {"cpu_bind": "cpu-bind", "mem_bind": "mem-bind"}


def _lookup_long(name: str, longs: Mapping[str, _Opt], command: str) -> _Opt:
    name = _UNDERSCORE_ALIASES.get(name, name)
    if name in longs:
        return longs[name]
    matches = [opt for long, opt in longs.items() if name and long.startswith(name)]
    if not matches:
        raise JobOptionError(
            f"{command}: unrecognized option '--{name}'", command=command, hint=_hint(command)
        )
    if len({id(m) for m in matches}) > 1:
        possibilities = " ".join(f"'--{m.long}'" for m in matches)
        raise JobOptionError(
            f"{command}: option '--{name}' is ambiguous; possibilities: {possibilities}",
            command=command,
            hint=_hint(command),
        )
    return matches[0]


def _tables(command: str) -> tuple[dict[str, _Opt], dict[str, _Opt]]:
    try:
        return _TABLES[command]
    except KeyError:
        raise ValueError(f"unknown command {command!r}; expected one of {COMMANDS}") from None


def _parse_argv(args: Sequence[str], command: str) -> tuple[JobOptions, list[str]]:
    longs, shorts = _tables(command)
    opts = JobOptions()
    opt: _Opt | None
    i = 0
    n = len(args)
    while i < n:
        arg = args[i]
        if arg == "--":
            return opts, list(args[i + 1 :])
        if arg.startswith("--"):
            name, eq, inline = arg[2:].partition("=")
            opt = _lookup_long(name, longs, command)
            i += 1
            if opt.arg == "none":
                if eq:
                    raise JobOptionError(
                        f"{command}: option '--{opt.long}' doesn't allow an argument",
                        command=command,
                        hint=_hint(command),
                    )
                _apply(opts, opt, None, command)
            elif opt.arg == "optional":
                _apply(opts, opt, inline if eq else None, command)
            elif eq:
                _apply(opts, opt, inline, command)
            elif i < n:
                _apply(opts, opt, args[i], command)
                i += 1
            else:
                raise JobOptionError(
                    f"{command}: option '--{opt.long}' requires an argument",
                    command=command,
                    hint=_hint(command),
                )
            continue
        if arg.startswith("-") and arg != "-":
            i += 1
            j = 1
            while j < len(arg):
                ch = arg[j]
                opt = shorts.get(ch)
                if opt is None:
                    raise JobOptionError(
                        f"{command}: invalid option -- '{ch}'", command=command, hint=_hint(command)
                    )
                j += 1
                if opt.arg == "none":
                    _apply(opts, opt, None, command)
                    continue
                if j < len(arg):
                    _apply(opts, opt, arg[j:], command)
                elif opt.arg == "optional":
                    _apply(opts, opt, None, command)
                elif i < n:
                    _apply(opts, opt, args[i], command)
                    i += 1
                else:
                    raise JobOptionError(
                        f"{command}: option requires an argument -- '{ch}'",
                        command=command,
                        hint=_hint(command),
                    )
                break
            continue
        return opts, list(args[i:])
    return opts, []


def _check_layer(opts: JobOptions, command: str, what: str) -> None:
    if opts.mem_mb is not None and opts.mem_per_cpu_mb is not None:
        raise JobOptionError(
            f"{command}: fatal: --mem, --mem-per-cpu, and --mem-per-gpu are mutually exclusive{what}.",
            command=command,
        )


def parse_job_options(args: list[str], *, command: str = "sbatch") -> tuple[JobOptions, list[str]]:
    """Parse a command line (without the program name) for ``command`` (sbatch, srun or salloc).

    Returns the options and the positional arguments: for sbatch the script path and its
    arguments, for srun/salloc the command to run and its arguments. Raises
    :class:`JobOptionError` for unknown options, missing arguments and invalid values.
    """
    opts, rest = _parse_argv(args, command)
    _check_layer(opts, command, "")
    if opts.quiet and opts.verbose:
        raise JobOptionError(
            f"{command}: error: don't specify both --verbose (-v) and --quiet (-Q)", command=command
        )
    if command == "sbatch" and opts.wrap is not None and rest:
        raise JobOptionError(
            f"{command}: error: Script arguments not permitted with --wrap option", command=command
        )
    return opts, rest


def parse_script_options(tokens: list[str], *, command: str = "sbatch") -> JobOptions:
    """Parse the tokens of ``#SBATCH`` lines (see :func:`spur.core.script.parse_sbatch_directives`).

    A token that is not an option is an error, as in sbatch.
    """
    opts, rest = _parse_argv(tokens, command)
    if rest:
        raise JobOptionError(
            f"{command}: error: Invalid directive found in batch script: {rest[0]}", command=command
        )
    _check_layer(opts, command, " (in the batch script)")
    return opts


# ---- input environment ---------------------------------------------------------------------------

# Variable -> long option, in Slurm's processing order (a later variable for the same field wins).
ENV_OPTIONS: dict[str, tuple[tuple[str, str], ...]] = {
    "sbatch": (
        ("SBATCH_ACCOUNT", "account"),
        ("SBATCH_ARRAY_INX", "array"),
        ("SBATCH_CONSTRAINT", "constraint"),
        ("SBATCH_DEBUG", "verbose"),
        ("SBATCH_EXCLUSIVE", "exclusive"),
        ("SBATCH_EXPORT", "export"),
        ("SBATCH_GRES", "gres"),
        ("SBATCH_GPUS", "gpus"),
        ("SBATCH_GPUS_PER_NODE", "gpus-per-node"),
        ("SBATCH_GPUS_PER_TASK", "gpus-per-task"),
        ("SBATCH_JOB_NAME", "job-name"),
        ("SBATCH_MEM_PER_CPU", "mem-per-cpu"),
        ("SBATCH_MEM_PER_NODE", "mem"),
        ("SBATCH_NO_REQUEUE", "no-requeue"),
        ("SBATCH_OPEN_MODE", "open-mode"),
        ("SBATCH_PARTITION", "partition"),
        ("SBATCH_QOS", "qos"),
        ("SBATCH_REQUEUE", "requeue"),
        ("SBATCH_SIGNAL", "signal"),
        ("SBATCH_TIMELIMIT", "time"),
        ("SBATCH_WAIT", "wait"),
        ("SBATCH_WCKEY", "wckey"),
    ),
    "srun": (
        ("SLURM_ACCOUNT", "account"),
        ("SLURM_CONSTRAINT", "constraint"),
        ("SLURM_CPUS_PER_TASK", "cpus-per-task"),
        ("SLURM_CPU_BIND", "cpu-bind"),
        ("SLURM_DEBUG", "verbose"),
        ("SLURM_DEPENDENCY", "dependency"),
        ("SLURM_EXCLUSIVE", "exclusive"),
        ("SLURM_EXPORT_ENV", "export"),
        ("SRUN_EXPORT_ENV", "export"),
        ("SLURM_GPUS", "gpus"),
        ("SLURM_GPUS_PER_NODE", "gpus-per-node"),
        ("SLURM_GPUS_PER_TASK", "gpus-per-task"),
        ("SLURM_GRES", "gres"),
        ("SLURM_JOB_ID", "jobid"),
        ("SLURM_JOB_NAME", "job-name"),
        ("SLURM_JOB_NUM_NODES", "nodes"),
        ("SLURM_KILL_BAD_EXIT", "kill-on-bad-exit"),
        ("SLURM_LABELIO", "label"),
        ("SLURM_MEM_PER_CPU", "mem-per-cpu"),
        ("SLURM_MEM_PER_NODE", "mem"),
        ("SLURM_MPI_TYPE", "mpi"),
        ("SLURM_NPROCS", "ntasks"),
        ("SLURM_NTASKS", "ntasks"),
        ("SLURM_NTASKS_PER_NODE", "ntasks-per-node"),
        ("SLURM_OPEN_MODE", "open-mode"),
        ("SLURM_OVERLAP", "overlap"),
        ("SLURM_PARTITION", "partition"),
        ("SLURM_QOS", "qos"),
        ("SLURM_REMOTE_CWD", "chdir"),
        ("SLURM_SIGNAL", "signal"),
        ("SLURM_STDERRMODE", "error"),
        ("SLURM_STDINMODE", "input"),
        ("SLURM_STDOUTMODE", "output"),
        ("SLURM_TIMELIMIT", "time"),
        ("SLURM_UNBUFFEREDIO", "unbuffered"),
        ("SLURM_WAIT", "wait"),
        ("SLURM_WORKING_DIR", "chdir"),
    ),
    "salloc": (
        ("SALLOC_ACCOUNT", "account"),
        ("SALLOC_CONSTRAINT", "constraint"),
        ("SALLOC_DEBUG", "verbose"),
        ("SALLOC_EXCLUSIVE", "exclusive"),
        ("SALLOC_GPUS", "gpus"),
        ("SALLOC_GPUS_PER_NODE", "gpus-per-node"),
        ("SALLOC_GPUS_PER_TASK", "gpus-per-task"),
        ("SALLOC_GRES", "gres"),
        ("SALLOC_MEM_PER_CPU", "mem-per-cpu"),
        ("SALLOC_MEM_PER_NODE", "mem"),
        ("SALLOC_PARTITION", "partition"),
        ("SALLOC_QOS", "qos"),
        ("SALLOC_SIGNAL", "signal"),
        ("SALLOC_TIMELIMIT", "time"),
    ),
}


def options_from_env(env: Mapping[str, str], command: str = "sbatch") -> JobOptions:
    """The options set by ``command``'s input environment variables (Slurm's INPUT ENVIRONMENT).

    For flag options any value sets the flag. srun also reads the SLURM_* variables of the
    allocation it runs in (SLURM_NTASKS, SLURM_JOB_NUM_NODES, ...); SLURM_NNODES is output only.
    Raises :class:`JobOptionError` for an invalid value (Slurm's line, which does not name the variable).
    """
    longs, _ = _tables(command)
    opts = JobOptions()
    for var, long in ENV_OPTIONS[command]:
        value = env.get(var)
        if value is None:
            continue
        opt = longs[long]
        # Flags ignore the value, except the verbosity variables whose value is the level.
        takes_value = opt.arg != "none" or long == "verbose"
        _apply(opts, opt, value if takes_value else None, command)
    _check_layer(opts, command, " (in the environment)")
    return opts


# ---- merging -------------------------------------------------------------------------------------

_FIELD_NAMES = tuple(f.name for f in fields(JobOptions))
_GROUP_OF = {name: group for group in _FIELD_GROUPS for name in group}


def check_root_only(opts: JobOptions, *, real_uid: int, command: str) -> None:
    """Refuse ``--uid`` / ``--gid`` unless the command runs as root (real uid 0), with Slurm's text
    (``sbatch: error: --uid only permitted by root user``); from any layer (command line, ``#SBATCH``).

    Root may give them; the job is still submitted as root (the options are accepted and not
    applied, as before). Raises :class:`JobOptionError`.
    """
    if real_uid == 0:
        return
    for name in ("uid", "gid"):
        if getattr(opts, name) is not None:
            raise JobOptionError(f"{command}: error: --{name} only permitted by root user", command=command)


def merge_options(*layers: JobOptions) -> JobOptions:
    """Combine layers; a later layer's set (non-None) values override earlier ones.

    Grouped settings move together: a layer that sets ``--nodes`` or one of ``--mem`` /
    ``--mem-per-cpu`` replaces the whole group from earlier layers (as Slurm resets the others).
    """
    merged = JobOptions()
    for layer in layers:
        for group in _FIELD_GROUPS:
            if any(getattr(layer, name) is not None for name in group):
                for name in group:
                    setattr(merged, name, getattr(layer, name))
        for name in _FIELD_NAMES:
            if name in _GROUP_OF:
                continue
            value = getattr(layer, name)
            if value is not None:
                setattr(merged, name, value)
    return merged


# ---- specs kept as strings -----------------------------------------------------------------------


def parse_array_spec(s: str) -> tuple[list[int], int | None]:
    """Parse a job array spec: ``1-5``, ``1,3,5``, ``0-15:4``, ``1-20%4`` and combinations.

    Returns the sorted distinct task ids and the ``%`` limit on simultaneously running tasks
    (``None`` when absent). Raises ``ValueError`` for malformed specs, steps below 1, limits below 1
    and indices above :data:`MAX_ARRAY_INDEX`.
    """
    text = s.strip()
    body, pct, limit_s = text.partition("%")
    max_running: int | None = None
    if pct:
        if not limit_s.isdigit() or len(limit_s) > 10 or int(limit_s) < 1:
            raise ValueError(f"Invalid job array specification: {s!r}")
        max_running = int(limit_s)
    ids: set[int] = set()
    for item in body.split(","):
        m = re.fullmatch(r"\s*(\d{1,10})(?:-(\d{1,10})(?::(\d{1,10}))?)?\s*", item)
        if not m:
            raise ValueError(f"Invalid job array specification: {s!r}")
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) is not None else lo
        step = int(m.group(3)) if m.group(3) is not None else 1
        if hi < lo or step < 1 or hi > MAX_ARRAY_INDEX:
            raise ValueError(f"Invalid job array specification: {s!r}")
        ids.update(range(lo, hi + 1, step))
    return sorted(ids), max_running


DEPENDENCY_TYPES = frozenset({"after", "afterany", "afterok", "afternotok", "aftercorr", "singleton"})


@dataclass(frozen=True)
class DependencyTarget:
    """A job a dependency waits on; ``array_task_id`` for ``123_4``; ``delay_minutes`` for ``+N``."""

    job_id: int
    array_task_id: int | None = None
    delay_minutes: int = 0


@dataclass(frozen=True)
class DependencyCondition:
    """One ``type:job[:job...]`` element of a ``--dependency``."""

    type: str
    targets: tuple[DependencyTarget, ...] = ()


@dataclass(frozen=True)
class Dependency:
    """Parsed ``--dependency``; ``any_of`` is True for ``?``-separated (any satisfies) lists."""

    conditions: tuple[DependencyCondition, ...]
    any_of: bool = False


def _dep_target(text: str, dep_type: str, spec: str) -> DependencyTarget:
    m = re.fullmatch(r"(\d{1,10})(?:_(\d{1,10}))?(?:\+(\d{1,10}))?", text)
    if not m:
        raise ValueError(f"Invalid dependency specification: {spec!r}")
    job_id = int(m.group(1))
    if not 1 <= job_id <= MAX_JOB_ID:
        raise ValueError(f"Invalid dependency specification: {spec!r}")
    task = int(m.group(2)) if m.group(2) is not None else None
    delay = int(m.group(3)) if m.group(3) is not None else 0
    if m.group(3) is not None and dep_type != "after":
        raise ValueError(f"Invalid dependency specification: {spec!r} (+time only applies to after:)")
    return DependencyTarget(job_id, task, delay)


def parse_dependency(s: str) -> Dependency:
    """Parse ``type:id[:id...][,type:id...]`` or ``?``-separated lists, and ``singleton``.

    Types: after, afterany, afterok, afternotok, aftercorr, singleton. Ids are ``123`` or
    ``123_4``; ``after`` ids may carry ``+minutes``. Mixing ``,`` and ``?`` is an error.
    """
    text = s.strip()
    if not text:
        raise ValueError("Invalid dependency specification: ''")
    if "," in text and "?" in text:
        raise ValueError(f"Invalid dependency specification: {s!r} (cannot mix ',' and '?')")
    any_of = "?" in text
    conditions: list[DependencyCondition] = []
    for part in text.split("?" if any_of else ","):
        dep_type, colon, ids = part.partition(":")
        dep_type = dep_type.strip().lower()
        if dep_type not in DEPENDENCY_TYPES:
            raise ValueError(f"Invalid dependency specification: {s!r}")
        if dep_type == "singleton":
            if colon:
                raise ValueError(f"Invalid dependency specification: {s!r}")
            conditions.append(DependencyCondition("singleton"))
            continue
        if not ids:
            raise ValueError(f"Invalid dependency specification: {s!r}")
        targets = tuple(_dep_target(t, dep_type, s) for t in ids.split(":"))
        conditions.append(DependencyCondition(dep_type, targets))
    return Dependency(tuple(conditions), any_of)


@dataclass(frozen=True)
class SignalSpec:
    """Parsed ``--signal=[{R|B}:]<sig>[@time]``: signal number, seconds before the end, flags."""

    signal: int
    time: int = DEFAULT_SIGNAL_TIME
    batch_only: bool = False
    reservation: bool = False


def _signal_number(name: str) -> int:
    n = name.strip().upper()
    if n.isdigit():
        num = int(n)
        if 1 <= num <= 64:
            return num
        raise ValueError(name)
    if not n.startswith("SIG"):
        n = "SIG" + n
    try:
        import signal  # only for a --signal by name (its enums cost sbatch's start-up ~0.6 ms)

        return int(signal.Signals[n])
    except KeyError:
        raise ValueError(name) from None


def parse_signal_spec(s: str) -> SignalSpec:
    """Parse ``[{R|B}:]<sig_num|sig_name>[@sig_time]`` (time in seconds, 0..65535, default 60)."""
    text = s.strip()
    batch = reservation = False
    m = re.fullmatch(r"(?:([RBrb]{1,2}):)?([A-Za-z0-9]+)(?:@(\d{1,5}))?", text)
    if not m:
        raise ValueError(f"Invalid --signal specification: {s!r}")
    if m.group(1):
        flags = m.group(1).upper()
        batch, reservation = "B" in flags, "R" in flags
    try:
        num = _signal_number(m.group(2))
    except ValueError:
        raise ValueError(f"Invalid --signal specification: {s!r}") from None
    when = int(m.group(3)) if m.group(3) is not None else DEFAULT_SIGNAL_TIME
    if when > 0xFFFF:
        raise ValueError(f"Invalid --signal specification: {s!r}")
    return SignalSpec(num, when, batch, reservation)


def _split_quoted(text: str, sep: str = ",") -> list[str]:
    """Split at ``sep`` outside double or single quotes (Slurm's find_quote_token)."""
    out: list[str] = []
    buf: list[str] = []
    quote = ""
    for ch in text:
        if quote:
            if ch == quote:
                quote = ""
            buf.append(ch)
        elif ch in "\"'":
            quote = ch
            buf.append(ch)
        elif ch == sep:
            out.append("".join(buf))
            buf = []
        else:
            buf.append(ch)
    if quote:
        raise ValueError(f"Unmatched quote in --export specification: {text!r}")
    out.append("".join(buf))
    return out


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def parse_export(spec: str) -> tuple[ExportMode, list[tuple[str, str | None]]]:
    """Parse ``--export``: ``ALL``, ``NONE``, or ``[ALL,]NAME[=value],...``.

    Returns the mode and, for ``LIST``, the items in order; an item is ``("ALL", None)`` for an
    embedded ALL, ``(name, None)`` to copy the caller's value or ``(name, value)``.
    """
    text = spec.strip()
    if not text:
        raise ValueError("Invalid --export specification: ''")
    if text.upper() == "ALL":
        return "ALL", []
    if text.upper() in ("NONE", "NIL"):
        return "NONE", []
    items: list[tuple[str, str | None]] = []
    for tok in _split_quoted(text):
        tok = tok.strip()
        if not tok:
            continue
        if tok.upper() == "ALL":
            items.append(("ALL", None))
            continue
        name, eq, value = tok.partition("=")
        if not _ENV_NAME.match(name):
            raise ValueError(f"Invalid --export specification: {spec!r}")
        items.append((name, _unquote(value) if eq else None))
    return "LIST", items


def export_environment(spec: str | None, environ: Mapping[str, str]) -> dict[str, str]:
    """The job environment for an ``--export`` spec (``None`` = ALL), as sbatch builds it.

    ALL copies ``environ``. NONE keeps only ``SLURM_*`` variables. A list applies its items in order
    (``ALL`` copies everything, ``NAME`` copies the caller's value if set, ``NAME=value`` sets it)
    and then adds the caller's ``SLURM_*`` variables.
    """
    if spec is None:
        return dict(environ)
    mode, items = parse_export(spec)
    if mode == "ALL":
        return dict(environ)
    env: dict[str, str] = {}
    for name, value in items:
        if name == "ALL" and value is None:
            env.update(environ)
        elif value is None:
            if name in environ:
                env[name] = environ[name]
        else:
            env[name] = value
    env.update({k: v for k, v in environ.items() if k.startswith("SLURM_")})
    return env


# ---- JobSpec -------------------------------------------------------------------------------------


def _split_constraint(expr: str) -> list[str]:
    """``a&b`` / ``a,b`` become ``[a, b]``; expressions with ``|``, ``[]`` or ``*`` stay whole."""
    if any(c in expr for c in "|[]*()"):
        return [expr]
    return [p for p in re.split(r"[&,]", expr) if p]


def default_job_name(
    opts: JobOptions, argv: Sequence[str], command: str = "sbatch", script_path: str | None = None
) -> str:
    """Slurm's default job name.

    sbatch: ``--job-name``, else ``wrap`` for --wrap, else the script's basename, else ``""`` when
    ``script_path`` is unknown (``None``; the caller decides, Slurm uses ``sbatch`` for a script read
    from stdin). srun/salloc: ``--job-name``, else the command's basename, else the command name.
    """
    if opts.job_name:
        return opts.job_name
    if command == "sbatch":
        if opts.wrap is not None:
            return "wrap"
        return os.path.basename(script_path) if script_path else ""
    if argv:
        return os.path.basename(argv[0]) or command
    return command


def build_job_spec(
    opts: JobOptions,
    *,
    script: str,
    argv: list[str],
    cwd: str,
    environ: Mapping[str, str],
    command: str = "sbatch",
    script_path: str | None = None,
    now: float | None = None,
    session_id: int = 0,
    command_line: Sequence[str] = (),
) -> JobSpec:
    """Fill a :class:`JobSpec` from merged options.

    ``argv`` is stored as given (sbatch: the script's arguments; srun: the command and its
    arguments); the name defaults as :func:`default_job_name` says (pass ``script_path`` for sbatch).
    ``work_dir`` is ``--chdir`` resolved against ``cwd``; the environment follows ``--export``;
    ``gres`` holds canonical ``name[:type]:count`` items from ``--gres`` with ``--gpus-per-node``
    replacing any ``gpu`` items; ``gpus_total`` comes from ``--gpus``; ``time_limit_secs`` is 0 when
    not given (partition default applies) and -1 for UNLIMITED; host lists are expanded; output
    patterns are kept unexpanded ("" means the default). ``num_nodes`` is the minimum node count
    (or the size of ``--nodelist`` when -N is absent). ``array``, ``dependency`` and ``signal``
    are stored as given (validated); ``begin_time`` is ``--begin`` resolved against ``now``
    (default: the current time); ``no_requeue`` is set by ``--no-requeue``; salloc specs are
    ``allocation_only``. Options without a JobSpec field (mail, verbosity, ...) stay in ``opts``.
    ``session_id`` is the submitting shell's session (Slurm's AllocSID) and ``command_line`` the
    command as typed, program first (sacct's SubmitLine: its words joined by single spaces, as Slurm
    joins them).
    """
    work_dir = os.path.normpath(os.path.join(cwd, opts.chdir)) if opts.chdir else cwd
    gres = [format_gres(g) for g in parse_gres([opts.gres])] if opts.gres else []
    if opts.gpus_per_node:
        gres = [g for g in gres if not g.startswith("gpu:") and g != "gpu"]
        gres.append(format_gres(parse_gpus(opts.gpus_per_node)))
    nodelist = hostlist.expand(opts.nodelist) if opts.nodelist else []
    exclude = hostlist.expand(opts.exclude) if opts.exclude else []
    if opts.nodes_min is not None:
        num_nodes = opts.nodes_min
    elif nodelist:
        num_nodes = len(dict.fromkeys(nodelist))
    else:
        num_nodes = 1
    time_limit = 0 if opts.time_limit is None else opts.time_limit
    begin_time = 0.0
    if opts.begin:
        import time as _time

        try:
            begin_time = parse_begin_time(opts.begin, _time.time() if now is None else now)
        except TimeSpecError as exc:
            raise JobOptionError(
                f"{command}: error: Invalid --begin specification", command=command
            ) from exc
    environment = export_environment(opts.export, environ)
    if opts.cpus_per_task is not None:
        # slurmd exports SLURM_CPUS_PER_TASK whenever -c was given, 1 included; the spec's field
        # cannot tell an explicit 1 from the default, so the request travels in the environment.
        environment["SLURM_CPUS_PER_TASK"] = str(opts.cpus_per_task)
    if command == "sbatch" and opts.export is not None and opts.export != "ALL":
        environment["SLURM_EXPORT_ENV"] = opts.export  # as Slurm's sbatch, for a non-default --export
    return JobSpec(
        name=default_job_name(opts, argv, command, script_path),
        script=script,
        argv=list(argv),
        work_dir=work_dir,
        stdout_pattern=opts.output or "",
        stderr_pattern=opts.error or "",
        stdin_path=opts.input or "",
        environment=environment,
        partition=opts.partition or "",
        num_nodes=num_nodes,
        num_tasks=opts.ntasks or 0,
        cpus_per_task=opts.cpus_per_task or 1,
        mem_per_node_mb=opts.mem_mb or 0,
        gres=gres,
        time_limit_secs=time_limit,
        interactive=command in ("srun", "salloc"),
        account=opts.account or "",
        gpus_total=parse_gpus(opts.gpus).count if opts.gpus else 0,
        nice=opts.nice or 0,
        nodelist=nodelist,
        exclude=exclude,
        exclusive=bool(opts.exclusive),
        mem_per_cpu_mb=opts.mem_per_cpu_mb or 0,
        ntasks_per_node=opts.ntasks_per_node or 0,
        hold=bool(opts.hold),
        comment=opts.comment or "",
        constraint=_split_constraint(opts.constraint) if opts.constraint else [],
        array=opts.array or "",
        dependency=opts.dependency or "",
        begin_time=begin_time,
        no_requeue=opts.requeue is False,
        signal=opts.signal or "",
        open_mode=opts.open_mode or "",
        qos=opts.qos or "",
        wckey=opts.wckey or "",
        gpus_per_task=parse_gpus(opts.gpus_per_task).count if opts.gpus_per_task else 0,
        kill_on_invalid_dep=bool(opts.kill_on_invalid_dep),
        ntasks_per_gpu=opts.ntasks_per_gpu or 0,
        allocation_only=command == "salloc",
        alloc_sid=session_id,
        submit_line=" ".join(command_line),
    )


def with_defaults(opts: JobOptions, **values: Any) -> JobOptions:
    """A copy of ``opts`` with ``values`` filled in where ``opts`` leaves them unset."""
    return replace(opts, **{k: v for k, v in values.items() if getattr(opts, k) is None})
