"""sacctmgr's command line and table output (pure, no I/O).

``parse(argv)`` turns ``[-i] [-n] [-P|-p] [-s] add|modify|delete|show|list <entity> [names]
[where k=v...] [set k=v...] [format=a,b%20] [tree] [withassoc]`` into a :class:`Request`
(options may also follow the command, as Slurm allows). ``render(rows, columns, ...)`` prints
records as sacctmgr does: right-justified columns of fixed widths, a dashed rule, values longer
than their column cut to ``width - 1`` characters plus ``+``; ``-P`` (parsable2) joins with ``|``,
``-p`` also ends each line with ``|``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

OPS = {
    "add": "add",
    "create": "add",
    "modify": "modify",
    "update": "modify",
    "delete": "delete",
    "remove": "delete",
    "show": "show",
    "list": "show",
    "view": "show",
}
# Accepted spellings (Slurm matches a prefix of at least a few letters) -> entity.
_ENTITY_WORDS = {
    "account": "account",
    "accounts": "account",
    "acct": "account",
    "user": "user",
    "users": "user",
    "association": "association",
    "associations": "association",
    "assoc": "association",
    "qos": "qos",
    "tres": "tres",
    "cluster": "cluster",
    "clusters": "cluster",
}
_ENTITY_HELP = {
    "show": (
        "No valid entity in list command\n"
        'Input line must include "Account", "Association", "Cluster", "Configuration",\n'
        '"Event", "Federation", "Problem", "QOS", "Resource", "Reservation",\n'
        '"RunAwayJobs", "Stats", "Transaction", "TRES", "User", or "WCKey"'
    ),
    "add": (
        "No valid entity in add command\n"
        'Input line must include "Account", "Cluster", "Coordinator",\n'
        '"Federation", "QOS", "Resource", "User", or "WCKey"'
    ),
    "modify": (
        "No valid entity in modify command\n"
        'Input line must include "Account", "Association", "Cluster", "Federation",\n'
        '"Job", "QOS", "Resource", "User", or "WCKey"'
    ),
    "delete": (
        "No valid entity in delete command\n"
        'Input line must include "Account", "Association", "Cluster", "Coordinator",\n'
        '"Federation", "QOS", "Resource", "User", or "WCKey"'
    ),
}
# Entities each operation supports here.
SUPPORTED = {
    "add": {"account", "user", "qos", "cluster"},
    "modify": {"account", "user", "qos"},
    "delete": {"account", "user", "qos", "cluster"},
    "show": {"account", "user", "association", "qos", "tres", "cluster"},
}


class GrammarError(ValueError):
    """A command line sacctmgr refuses; the message is printed as is (exit 1)."""


@dataclass
class Request:
    op: str = ""
    entity: str = ""
    names: list[str] = field(default_factory=list)
    where: dict[str, str] = field(default_factory=dict)
    values: dict[str, str] = field(default_factory=dict)
    format: list[Column] = field(default_factory=list)
    tree: bool = False
    with_assoc: bool = False
    immediate: bool = False
    noheader: bool = False
    parsable: int = 0  # 0 table, 1 -p, 2 -P


@dataclass(frozen=True)
class Column:
    key: str  # record field name (lower case)
    header: str
    width: int
    left: bool = False


# Field name -> (header, default width). Aliases map to the same record key via _KEY_ALIASES.
COLUMNS: dict[str, tuple[str, int]] = {
    "account": ("Account", 10),
    "descr": ("Descr", 20),
    "org": ("Org", 20),
    "cluster": ("Cluster", 10),
    "user": ("User", 10),
    "partition": ("Partition", 10),
    "share": ("Share", 9),
    "priority": ("Priority", 10),
    "grptres": ("GrpTRES", 13),
    "grpjobs": ("GrpJobs", 7),
    "grpsubmit": ("GrpSubmit", 9),
    "grpwall": ("GrpWall", 11),
    "grptresmins": ("GrpTRESMins", 13),
    "grptresrunmin": ("GrpTRESRunMin", 13),
    "grptresrunmins": ("GrpTRESRunMins", 14),
    "maxjobs": ("MaxJobs", 7),
    "maxsubmit": ("MaxSubmit", 9),
    "maxwall": ("MaxWall", 11),
    "maxtres": ("MaxTRES", 13),
    "maxtrespernode": ("MaxTRESPerNode", 14),
    "maxtresmins": ("MaxTRESMins", 13),
    "maxtrespu": ("MaxTRESPU", 13),
    "maxjobspu": ("MaxJobsPU", 9),
    "maxsubmitpu": ("MaxSubmitPU", 11),
    "maxtrespa": ("MaxTRESPA", 13),
    "maxjobspa": ("MaxJobsPA", 9),
    "maxsubmitpa": ("MaxSubmitPA", 11),
    "mintres": ("MinTRES", 13),
    "qos": ("QOS", 20),
    "defaultqos": ("Def QOS", 9),
    "parentname": ("Par Name", 10),
    "name": ("Name", 10),
    "description": ("Descr", 20),
    "gracetime": ("GraceTime", 10),
    "preempt": ("Preempt", 10),
    "preemptexempttime": ("PreemptExemptTime", 19),
    "preemptmode": ("PreemptMode", 11),
    "flags": ("Flags", 40),
    "usagethres": ("UsageThres", 10),
    "usagefactor": ("UsageFactor", 11),
    "defaultaccount": ("Def Acct", 10),
    "admin": ("Admin", 9),
    "type": ("Type", 8),
    "id": ("ID", 6),
    "controlhost": ("ControlHost", 15),
    "controlport": ("ControlPort", 12),
    "rpc": ("RPC", 5),
}
_KEY_ALIASES = {
    "adminlevel": "admin",
    "defacct": "defaultaccount",
    "organization": "org",
    "fairshare": "share",
    "parent": "parentname",
    "maxtresperjob": "maxtres",
    "maxtresperuser": "maxtrespu",
    "grpsubmitjobs": "grpsubmit",
    "maxsubmitjobs": "maxsubmit",
    "maxjobsperuser": "maxjobspu",
    "defqos": "defaultqos",
    "clusters": "cluster",
    "accounts": "account",
    "users": "user",
}
DEFAULT_FORMATS: dict[str, list[str]] = {
    "account": ["account", "descr", "org"],
    "account+assoc": [
        "account",
        "descr",
        "org",
        "cluster",
        "parentname",
        "user",
        "share",
        "grpjobs",
        "grptres",
        "grpsubmit",
        "maxjobs",
        "maxtres",
        "maxsubmit",
        "maxwall",
        "qos",
        "defaultqos",
    ],
    "user": ["user", "defaultaccount", "admin"],
    "user+assoc": [
        "user",
        "defaultaccount",
        "admin",
        "cluster",
        "account",
        "partition",
        "share",
        "maxjobs",
        "maxtres",
        "maxsubmit",
        "maxwall",
        "qos",
        "defaultqos",
    ],
    "association": [
        "cluster",
        "account",
        "user",
        "partition",
        "share",
        "priority",
        "grpjobs",
        "grptres",
        "grpsubmit",
        "grpwall",
        "grptresmins",
        "maxjobs",
        "maxtres",
        "maxtrespernode",
        "maxsubmit",
        "maxwall",
        "maxtresmins",
        "qos",
        "defaultqos",
        "grptresrunmins",
    ],
    "qos": [
        "name",
        "priority",
        "gracetime",
        "preempt",
        "preemptexempttime",
        "preemptmode",
        "flags",
        "usagethres",
        "usagefactor",
        "grptres",
        "grptresmins",
        "grptresrunmin",
        "grpjobs",
        "grpsubmit",
        "grpwall",
        "maxtres",
        "maxtrespernode",
        "maxtresmins",
        "maxwall",
        "maxtrespu",
        "maxjobspu",
        "maxsubmitpu",
        "maxtrespa",
        "maxjobspa",
        "maxsubmitpa",
        "mintres",
    ],
    "tres": ["type", "name", "id"],
    "cluster": [
        "cluster",
        "controlhost",
        "controlport",
        "rpc",
        "share",
        "grpjobs",
        "grptres",
        "grpsubmit",
        "maxjobs",
        "maxtres",
        "maxsubmit",
        "maxwall",
        "qos",
        "defaultqos",
    ],
}
# Entity-specific widths that differ from COLUMNS.
_WIDTHS = {("tres", "name"): 15}


def column(spec: str, entity: str = "") -> Column:
    """One ``format=`` item: ``name``, ``name%20`` (right, width 20) or ``name%-20`` (left)."""
    name, _, width_text = spec.partition("%")
    key = name.strip().lower()
    key = _KEY_ALIASES.get(key, key)
    if key not in COLUMNS:
        raise GrammarError(f" Unknown field '{name.strip()}'")
    header, width = COLUMNS[key]
    width = _WIDTHS.get((entity, key), width)
    left = False
    if width_text:
        text = width_text.strip()
        left = text.startswith("-")
        if not text.lstrip("-").isdigit() or int(text.lstrip("-")) < 1:
            raise GrammarError(f" Invalid width in format field '{spec}'")
        width = int(text.lstrip("-"))
    return Column(key, header, width, left)


def parse(argv: Sequence[str]) -> Request:
    """Parse a sacctmgr command line; raises :class:`GrammarError` with sacctmgr's message."""
    req = Request()
    words: list[str] = []
    for arg in argv:
        if arg.startswith("-") and len(arg) > 1 and "=" not in arg:
            _flag(req, arg)
        else:
            words.append(arg)
    if not words:
        raise GrammarError("sacctmgr: error: no command given (add, modify, delete, show, list)")
    op = OPS.get(words[0].lower())
    if op is None:
        raise GrammarError(f"sacctmgr: error: Invalid keyword: {words[0]}")
    req.op = op
    entity = _ENTITY_WORDS.get(words[1].lower()) if len(words) > 1 else None
    if entity is None or entity not in SUPPORTED[op]:
        raise GrammarError(_ENTITY_HELP[op])
    req.entity = entity
    mode = "names"
    for word in words[2:]:
        low = word.lower()
        if low == "where":
            mode = "where"
            continue
        if low == "set":
            if op != "modify":
                raise GrammarError(f" Unknown option: {word}")
            mode = "set"
            continue
        if low == "tree" and op == "show":
            req.tree = True
            continue
        if low in ("withassoc", "withassocs") and op == "show":
            req.with_assoc = True
            continue
        key, eq, value = word.partition("=")
        key = key.strip().lower()
        if not eq:
            if mode == "set":
                raise GrammarError(f" Unknown option: {word}\n Use keyword 'set' with key=value settings")
            req.names.append(word)
            continue
        if key == "format" and op == "show":
            req.format = [column(item, entity) for item in value.split(",") if item.strip()]
            continue
        if op == "add":
            req.values[key] = value
        elif mode == "set":
            req.values[key] = value
        else:
            req.where[key] = value
    if op == "modify":
        if req.names:
            req.where["name"] = ",".join([*req.names, *([req.where["name"]] if "name" in req.where else [])])
            req.names = []
        if not req.values:
            raise GrammarError(" You didn't give me anything to set")
    if op == "delete" and req.names:
        req.where["name"] = ",".join([*req.names, *([req.where["name"]] if "name" in req.where else [])])
        req.names = []
    if op == "delete" and not req.where:
        raise GrammarError(f" No conditions given to delete {entity}s")
    return req


def _flag(req: Request, arg: str) -> None:
    if arg.startswith("--"):
        long = {
            "--immediate": "i",
            "--noheader": "n",
            "--parsable2": "P",
            "--parsable": "p",
            "--associations": "s",
        }.get(arg)
        if long is None:
            raise GrammarError(f"sacctmgr: unrecognized option '{arg}'")
        letters = long
    else:
        letters = arg[1:]
    for letter in letters:
        if letter == "i":
            req.immediate = True
        elif letter == "n":
            req.noheader = True
        elif letter == "P":
            req.parsable = 2
        elif letter == "p":
            req.parsable = 1
        elif letter == "s":
            req.with_assoc = True
        elif letter in "Qv":
            continue
        else:
            raise GrammarError(f"sacctmgr: invalid option -- '{letter}'")


def default_columns(entity: str, *, with_assoc: bool = False, tree: bool = False) -> list[Column]:
    key = f"{entity}+assoc" if with_assoc and f"{entity}+assoc" in DEFAULT_FORMATS else entity
    cols = [column(name, entity) for name in DEFAULT_FORMATS[key]]
    return _tree_columns(cols) if tree else cols


def _tree_columns(cols: list[Column]) -> list[Column]:
    """In ``tree`` output the Account column is left-justified, 20 wide unless given."""
    return [Column(c.key, c.header, max(c.width, 20), True) if c.key == "account" else c for c in cols]


def columns_for(req: Request) -> list[Column]:
    if req.format:
        if req.tree:
            return [
                Column(c.key, c.header, c.width if c.width != 10 else 20, True) if c.key == "account" else c
                for c in req.format
            ]
        return req.format
    return default_columns(req.entity, with_assoc=req.with_assoc, tree=req.tree)


def _fit(value: str, col: Column) -> str:
    if len(value) > col.width:
        value = value[: col.width - 1] + "+"
    return value.ljust(col.width) if col.left else value.rjust(col.width)


def render(
    rows: Sequence[Mapping[str, str]],
    columns: Sequence[Column],
    *,
    noheader: bool = False,
    parsable: int = 0,
    tree: bool = False,
) -> list[str]:
    """Output lines for ``rows`` (see the module docstring). In ``tree`` mode account names are
    indented by the row's ``depth``."""
    lines: list[str] = []

    def value(row: Mapping[str, str], col: Column) -> str:
        text = row.get(col.key, "")
        if tree and col.key == "account":
            depth = row.get("depth", "0")
            text = " " * (int(depth) if depth.isdigit() else 0) + text
        return text

    if parsable:
        end = "|" if parsable == 1 else ""
        if not noheader:
            lines.append("|".join(c.header for c in columns) + end)
        lines.extend("|".join(value(r, c) for c in columns) + end for r in rows)
        return lines
    if not noheader:
        lines.append("".join(_fit(c.header, c) + " " for c in columns))
        lines.append("".join("-" * c.width + " " for c in columns))
    lines.extend("".join(_fit(value(r, c), c) + " " for c in columns) for r in rows)
    return lines


# Which record field a bare name or a where key selects, per entity.
_PRIMARY = {
    "account": "account",
    "user": "user",
    "qos": "name",
    "cluster": "cluster",
    "tres": "type",
    "association": "account",
}
_WHERE_FIELDS = {
    "name": None,
    "names": None,
    "account": "account",
    "accounts": "account",
    "user": "user",
    "users": "user",
    "cluster": "cluster",
    "clusters": "cluster",
    "partition": "partition",
    "parent": "parentname",
    "parentname": "parentname",
    "type": "type",
    "id": "id",
    "qos": "qos",
    "defaultaccount": "defaultaccount",
    "adminlevel": "admin",
}


def select(rows: Sequence[Mapping[str, str]], req: Request) -> list[Mapping[str, str]]:
    """Rows matching the request's bare names and ``where`` clauses (comma lists, case-insensitive)."""
    tests: list[tuple[str, set[str]]] = []
    primary = _PRIMARY[req.entity]
    if req.names:
        tests.append((primary, {n.lower() for n in req.names}))
    for key, raw in req.where.items():
        if key not in _WHERE_FIELDS:
            raise GrammarError(f" Unknown condition: {key}")
        fieldname = _WHERE_FIELDS[key] or primary
        # ``user=`` (nothing) selects the records without one (an account's own association).
        tests.append((fieldname, {v.strip().lower() for v in raw.split(",") if v.strip()} or {""}))
    return [r for r in rows if all(r.get(f, "").lower() in wanted for f, wanted in tests)]
