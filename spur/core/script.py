"""Batch scripts: validation and ``#SBATCH`` directive extraction, as sbatch does it."""

from __future__ import annotations

__all__ = [
    "ScriptError",
    "NOT_A_BATCH_SCRIPT",
    "parse_sbatch_directives",
    "validate_script",
    "wrap_command",
]

# Slurm's sbatch prints it as three ``sbatch: error:`` lines.
NOT_A_BATCH_SCRIPT = (
    "This does not look like a batch script.  The first\n"
    "line must start with #! followed by the path to an interpreter.\n"
    "For instance: #!/bin/sh"
)


class ScriptError(ValueError):
    """A batch script sbatch would refuse. ``str()`` is Slurm's message without the ``sbatch: error:``
    prefix; the CLI prints each of its lines as ``sbatch: error: LINE``."""


def _split_directive(text: str, lineno: int, line: str) -> list[str]:
    """Slurm's ``get_argument`` loop: whitespace splits, quotes group, ``\\`` escapes the next
    character (also inside quotes), and an unquoted ``#`` starts a comment anywhere."""
    args: list[str] = []
    i, n = 0, len(text)
    while True:
        while i < n and text[i].isspace():
            i += 1
        if i >= n:
            return args
        buf: list[str] = []
        quote = ""
        escape = False
        comment = False
        while i < n and (quote or not text[i].isspace()):
            ch = text[i]
            i += 1
            if escape:
                escape = False
            elif ch == "\\":
                escape = True
                continue
            elif quote:
                if ch == quote:
                    quote = ""
                    continue
            elif ch in "\"'":
                quote = ch
                continue
            elif ch == "#":
                comment = True
                break
            buf.append(ch)
        if quote:
            raise ScriptError(f"line {lineno}: Unmatched `{quote}` in [{line}]")
        if buf or not comment:
            args.append("".join(buf))
        if comment:
            return args


def parse_sbatch_directives(script: str, prefix: str = "#SBATCH") -> list[str]:
    """Return the argv tokens of the script's ``#SBATCH`` lines, in order.

    Scanning stops at the first line that is neither blank nor a comment (so the shebang and any
    comments before the first command are fine). A directive line must start with ``prefix`` at
    column 0 followed by whitespace or the end of line; other ``#`` lines are comments.
    Raises :class:`ScriptError` for an unmatched quote.
    """
    out: list[str] = []
    for lineno, raw in enumerate(script.split("\n"), start=1):
        line = raw.rstrip("\r")
        if line.startswith(prefix) and (len(line) == len(prefix) or line[len(prefix)].isspace()):
            out.extend(_split_directive(line[len(prefix) :], lineno, line))
            continue
        stripped = line.lstrip()
        if stripped and not stripped.startswith("#"):
            break
    return out


def validate_script(text: str) -> None:
    """Raise :class:`ScriptError` for a script sbatch would refuse.

    Refused: empty or whitespace-only scripts, binary content (NUL bytes), a first line that is not a
    shebang, and DOS line breaks.
    """
    if not text:
        raise ScriptError("Batch script is empty!")
    if "\x00" in text:
        raise ScriptError("Batch script is binary, only text is allowed (it contains NUL bytes).")
    if not text.strip():
        raise ScriptError("Batch script contains only whitespace!")
    if not text.startswith("#!"):
        raise ScriptError(NOT_A_BATCH_SCRIPT)
    if "\r\n" in text:
        raise ScriptError(
            "Batch script contains DOS line breaks (\\r\\n) instead of expected UNIX line breaks (\\n)."
        )


def wrap_command(command: str) -> str:
    """The script sbatch builds for ``--wrap=<command>``."""
    return f"#!/bin/sh\n# This script was created by sbatch --wrap.\n\n{command}\n"
