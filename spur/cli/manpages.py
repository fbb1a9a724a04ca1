"""Man pages (roff) generated from the tables that drive the parsers, so they never drift.

* ``NAME.1`` for every VERBS entry (its Slurm name, or ``spur-VERB`` for Spur's own verbs), from
  :func:`spur.cli.cmdinfo.describe` (the same option table --help prints);
* ``spur.1``: the verbs and their Slurm twins;
* ``spurctld.8`` and ``spurd.8``: from the daemons' argparse parsers;
* ``spur.conf.5``: from the config schema (:func:`spur.config.dump.reference_markdown`).

``python -m spur.cli.manpages DIR`` writes them under ``DIR/man1``, ``DIR/man5`` and ``DIR/man8``;
``scripts/setup.sh`` runs it into ``.venv/share/man``, which ``man`` searches by itself when
``.venv/bin`` is on ``PATH`` (else ``export MANPATH="$PWD/.venv/share/man:"``).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from spur.cli.cmdinfo import CommandDoc, OptionDoc, argparse_options, describe
from spur.version import spur_version

DATE = "December 2026"


def _esc(text: str) -> str:
    """Escape text for roff: backslashes, and a leading dot or quote."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    return "\\&" + text if text[:1] in (".", "'") else text


def _header(name: str, section: int, title: str) -> list[str]:
    return [
        f'.TH "{name.upper()}" "{section}" "{DATE}" "Spur {spur_version()}" "{title}"',
        ".SH NAME",
        f"{_esc(name)} \\- {_esc(title if section != 1 else '')}".rstrip(" \\-"),
    ]


def _option_lines(opts: list[OptionDoc]) -> list[str]:
    out: list[str] = []
    for title, group in _grouped(opts):
        out += [".SS " + _esc(title)]
        for opt in group:
            out += [".TP", "\\fB" + _esc(opt.flags().strip()) + "\\fR", _esc(opt.help or "")]
    return out


def _grouped(opts: list[OptionDoc]) -> list[tuple[str, list[OptionDoc]]]:
    order: dict[str, list[OptionDoc]] = {}
    for opt in opts:
        order.setdefault(opt.group, []).append(opt)
    return list(order.items())


def command_page(doc: CommandDoc) -> str:
    """NAME.1 of one command."""
    lines = [
        f'.TH "{doc.name.upper()}" "1" "{DATE}" "Spur {spur_version()}" "Spur Commands"',
        ".SH NAME",
        f"{_esc(doc.name)} \\- {_esc(doc.summary)}",
        ".SH SYNOPSIS",
    ]
    for line in doc.usage.splitlines():
        lines += [_esc(line.removeprefix("Usage:").strip()), ".br"]
    if doc.verb != doc.name:
        lines += [f"spur {_esc(doc.verb)} ...", ".br"]
    lines += [".SH DESCRIPTION"]
    for para in doc.description.split("\n\n"):
        lines += [_esc(" ".join(para.replace("``", "").split())), ".PP"]
    if doc.subcommands:
        lines += [".SH COMMANDS"]
        for key, text in doc.subcommands.items():
            lines += [".TP", f"\\fB{_esc(key)}\\fR", _esc(text)]
    lines += [".SH OPTIONS"] + _option_lines(doc.options)
    lines += [
        '.SH "SEE ALSO"',
        "\\fBspur\\fR(1), \\fBspur.conf\\fR(5), \\fBspurctld\\fR(8), \\fBspurd\\fR(8)",
    ]
    return "\n".join(lines) + "\n"


def page_name(doc: CommandDoc) -> str:
    return doc.name if doc.name != doc.verb or doc.verb == "spur" else f"spur-{doc.verb}"


def spur_page() -> str:
    """spur.1: the multi-call command and its verbs."""
    from spur.cli.verbs import VERBS

    lines = [
        f'.TH "SPUR" "1" "{DATE}" "Spur {spur_version()}" "Spur Commands"',
        ".SH NAME",
        "spur \\- a Slurm\\-compatible scheduler: one command, a verb per Slurm tool",
        ".SH SYNOPSIS",
        "spur VERB [OPTIONS...] [ARGS...]",
        ".br",
        "spur \\-\\-help | \\-\\-version | help VERB",
        ".SH DESCRIPTION",
        "Each verb is a Slurm command under a plain name, with that command's options and output. "
        "The Slurm names (sbatch, squeue, ...) are installed too and run the same code.",
        ".SH VERBS",
    ]
    for verb, (_module, slurm, helptext) in VERBS.items():
        see = f" See \\fB{slurm}\\fR(1)." if slurm else f" See \\fBspur\\-{verb}\\fR(1)."
        lines += [".TP", f"\\fB{_esc(verb)}\\fR", _esc(helptext) + see]
    lines += [
        ".SH ENVIRONMENT",
        ".TP",
        "\\fBSPUR_CONTROLLER\\fR",
        "Controller address(es), HOST:PORT[,HOST:PORT...]; overrides the configuration file.",
        ".TP",
        "\\fBSPUR_CONF\\fR",
        "Configuration file (default /etc/spur/spur.conf).",
        '.SH "SEE ALSO"',
        "\\fBspur.conf\\fR(5), \\fBspurctld\\fR(8), \\fBspurd\\fR(8)",
    ]
    return "\n".join(lines) + "\n"


def daemon_page(name: str) -> str:
    """spurctld.8 / spurd.8 from the daemon's own argparse parser."""
    if name == "spurctld":
        from spur.controller.main import build_parser

        parser, summary = build_parser(), "the Spur controller daemon"
    else:
        from spur.agent.main import _parser

        parser, summary = _parser(), "the Spur node agent daemon"
    opts = argparse_options(parser, {}, {})
    opts.append(OptionDoc("help", "h", help="show the help message and exit"))
    opts.append(OptionDoc("version", "V", help="print the version and exit"))
    lines = [
        f'.TH "{name.upper()}" "8" "{DATE}" "Spur {spur_version()}" "Spur Administration"',
        ".SH NAME",
        f"{name} \\- {summary}",
        ".SH SYNOPSIS",
        f"{name} [OPTIONS...]",
        ".SH DESCRIPTION",
        _esc(parser.description or ""),
        ".SH OPTIONS",
        *_option_lines(opts),
        '.SH "EXIT STATUS"',
        _esc(parser.epilog or ""),
        ".SH FILES",
        "/etc/spur/spur.conf, or the file named by \\fB$SPUR_CONF\\fR or \\fB\\-\\-conf\\fR.",
        '.SH "SEE ALSO"',
        "\\fBspur.conf\\fR(5), \\fBspur\\fR(1)",
    ]
    return "\n".join(lines) + "\n"


def conf_page() -> str:
    """spur.conf.5 from the configuration schema's reference tables."""
    from spur.config.dump import reference_markdown

    lines = [
        f'.TH "SPUR.CONF" "5" "{DATE}" "Spur {spur_version()}" "Spur Configuration"',
        ".SH NAME",
        "spur.conf \\- Spur configuration file (TOML)",
        ".SH DESCRIPTION",
        "spurctld, spurd and the commands read /etc/spur/spur.conf, or the file named by "
        "\\fB$SPUR_CONF\\fR (the daemons also take \\fB\\-\\-conf\\fR). Every key is optional. "
        "Durations ending in _secs are seconds and _ms milliseconds. An invalid file stops a daemon "
        "with one message naming the file and key, and exit code 78.",
    ]
    row = re.compile(r"^\| `([^`]+)` \| (.*?) \| (.*) \|$")
    for line in reference_markdown().splitlines():
        if line.startswith("### "):
            lines.append(".SH " + _esc(line[4:].strip().upper() if line[4:5] != "[" else line[4:].strip()))
            continue
        m = row.match(line)
        if m:
            key, default, meaning = m.groups()
            lines += [".TP", f"\\fB{_esc(key)}\\fR (default {_esc(default.replace('`', ''))})", _esc(meaning)]
    lines += ['.SH "SEE ALSO"', "\\fBspurctld\\fR(8), \\fBspurd\\fR(8), \\fBspur\\fR(1)"]
    return "\n".join(lines) + "\n"


def all_pages() -> dict[str, str]:
    """Relative path (``man1/sbatch.1``) -> page text, for every command, daemon and the config file."""
    from spur.cli.verbs import VERBS

    pages = {"man1/spur.1": spur_page()}
    for verb in VERBS:
        doc = describe(verb)
        pages[f"man1/{page_name(doc)}.1"] = command_page(doc)
    pages["man8/spurctld.8"] = daemon_page("spurctld")
    pages["man8/spurd.8"] = daemon_page("spurd")
    pages["man5/spur.conf.5"] = conf_page()
    return pages


def write_pages(root: Path) -> list[Path]:
    """Write every page under ``root`` (created as needed); returns the paths written."""
    written = []
    for rel, text in all_pages().items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0].startswith("-"):
        print(
            "usage: python -m spur.cli.manpages DIR   (writes DIR/man1, DIR/man5, DIR/man8)", file=sys.stderr
        )
        return 2
    paths = write_pages(Path(args[0]))
    print(f"wrote {len(paths)} man pages under {args[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
