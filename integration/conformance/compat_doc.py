"""Write ``docs/slurm-compat.md``: the hand-written template plus the conformance suite's cases per
command and the allow-list of intended differences, each with its reason.

    python -m integration.conformance.compat_doc          # rewrite docs/slurm-compat.md
    python -m integration.conformance.compat_doc --check  # exit 1 when the committed file differs
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

from integration.conformance.allowlist import ALLOWED
from integration.conformance.cases import all_case_ids, command_of

HERE = Path(__file__).resolve().parent
TEMPLATE = HERE / "slurm-compat.template.md"
DOC = HERE.parents[1] / "docs" / "slurm-compat.md"
MARKER = "<!-- conformance -->"


def render() -> str:
    """The full text of docs/slurm-compat.md (pure but for reading the template)."""
    counts = Counter(command_of(case_id) for case_id in all_case_ids())
    lines = [
        "## Checked against real Slurm 22.05",
        "`integration/conformance/` runs every case below as the same shell snippet against Debian's Slurm 22.05",
        "(`slurm-wlm`: a private slurmctld + slurmd + munged, with slurmdbd on its own MariaDB for accounting)",
        "and against Spur, on the same machine and as the same",
        "user, and compares exit status and output after replacing what legitimately differs (job ids, times,",
        "host, cluster and partition names, working directories, the node's spool directory of a job). Field and",
        "error tables (`squeue -o`/`-O`, `sinfo -o` and layouts, `scontrol show` keys, first error lines and exit",
        "codes, every `sacct` field and layout) run against a held, a running and a completed job made once per side.",
        "The session ends with the match ratio per command.",
        "",
        "| command | cases |",
        "| --- | --- |",
        *(f"| {command} | {counts[command]} |" for command in sorted(counts)),
        f"| all | {sum(counts.values())} |",
        "",
        "### Intended differences (the allow-list)",
        "Each entry is run and must still differ; its reason says why Spur does not follow Slurm there",
        "(`integration/conformance/allowlist.py`).",
        "",
    ]
    for pattern, reason in ALLOWED.items():
        lines.append(f"- `{pattern}`: {reason}")
    template = TEMPLATE.read_text()
    return template.replace(MARKER, "\n".join(lines).rstrip() + "\n")


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    text = render()
    if "--check" in args:
        if DOC.read_text() != text:
            print(f"{DOC} is out of date: run python -m integration.conformance.compat_doc", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(text)
    print(f"wrote {DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
