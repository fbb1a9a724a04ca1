"""docs/slurm-compat.md is what integration/conformance/compat_doc.py generates (no Slurm needed)."""

from __future__ import annotations

from integration.conformance import compat_doc
from integration.conformance.allowlist import ALLOWED


def test_committed_doc_equals_the_generated_one() -> None:
    assert compat_doc.DOC.read_text() == compat_doc.render(), (
        "docs/slurm-compat.md is out of date: run python -m integration.conformance.compat_doc"
    )


def test_every_allowed_difference_has_a_reason_in_the_doc() -> None:
    text = compat_doc.DOC.read_text()
    for pattern, reason in ALLOWED.items():
        assert len(reason) > 40, f"{pattern}: a reason must say why"
        assert f"- `{pattern}`: {reason}" in text
