"""Every case of integration/conformance/cases.py against real Slurm 22.05 and Spur, side by side.

A case passes when the normalized results are equal, or when the allow-list names it and they differ;
an allow-listed case that now matches fails, so the list only holds real differences.
"""

from __future__ import annotations

import re

import pytest

from integration.conformance.allowlist import reason_for
from integration.conformance.cases import (
    CLOCK_KEYS,
    ENV_OPTION_SETS,
    ENV_VARIABLES,
    KEYED,
    SNIPPETS,
    TABLES,
    command_of,
    keyed_values,
    sections,
)
from integration.conformance.pair import run_both
from integration.conformance.tally import TALLY


def _judge(case_id: str, same: bool, detail: str) -> None:
    reason = reason_for(case_id)
    tally = TALLY[command_of(case_id)]
    if same and reason is None:
        tally["match"] += 1
        return
    if not same and reason is not None:
        tally["allowed"] += 1
        return
    tally["differ"] += 1
    if same:
        pytest.fail(f"{case_id} now matches Slurm: remove it from the allow-list ({reason})")
    pytest.fail(f"{case_id} differs from Slurm 22.05:\n{detail}")


@pytest.mark.parametrize("option_set", list(ENV_OPTION_SETS))
@pytest.mark.parametrize("variable", list(ENV_VARIABLES))
def test_env(env_jobs, option_set: str, variable: str) -> None:
    slurm, spur, a, b = env_jobs(option_set)
    assert a.rc == 0 and slurm, f"the Slurm job of {option_set} failed:\n{a.as_text()}"
    assert b.rc == 0 and spur, f"the Spur job of {option_set} failed:\n{b.as_text()}"
    want, got = slurm.get(variable, "(unset)"), spur.get(variable, "(unset)")
    _judge(f"env/{option_set}/{variable}", want == got, f"Slurm: {variable}={want}\nSpur:  {variable}={got}")


@pytest.mark.parametrize("option_set", list(ENV_OPTION_SETS))
def test_env_names(env_jobs, option_set: str) -> None:
    """The set of SLURM_* variables, less those whose difference is allowed."""
    slurm, spur, _, _ = env_jobs(option_set)

    def names(env: dict[str, str]) -> set[str]:
        return {n for n in env if n.startswith("SLURM") and reason_for(f"env/{option_set}/{n}") is None}

    missing, extra = sorted(names(slurm) - names(spur)), sorted(names(spur) - names(slurm))
    _judge(
        f"env/{option_set}/names",
        not missing and not extra,
        f"missing in Spur: {missing}\nonly in Spur: {extra}",
    )


@pytest.mark.parametrize("snippet", SNIPPETS, ids=[s.id for s in SNIPPETS])
def test_snippet(pair, snippet) -> None:
    a, b = run_both(pair, snippet.id, snippet.script)
    detail = f"--- snippet\n{snippet.script}\n===== Slurm 22.05\n{a.as_text()}\n===== Spur\n{b.as_text()}"
    _judge(snippet.id, a == b, detail)


_ROWS = [(i, row) for i, table in enumerate(TABLES) for row, _ in table.rows]


@pytest.mark.parametrize(
    ("table", "row"), _ROWS, ids=[f"{TABLES[i].command}/{TABLES[i].name}/{r}" for i, r in _ROWS]
)
def test_table_row(table_runs, table: int, row: str) -> None:
    a, b = table_runs(table)
    want, got = sections(a.stdout).get(row, "(no output)"), sections(b.stdout).get(row, "(no output)")
    t = TABLES[table]
    shell = dict(t.rows)[row]
    _judge(
        f"{t.command}/{t.name}/{row}", want == got, f"$ {shell}\n===== Slurm 22.05\n{want}===== Spur\n{got}"
    )


_KEYS = [(what, key) for what, (_, keys) in KEYED.items() for key in keys]


@pytest.mark.parametrize(("what", "key"), _KEYS, ids=[f"scontrol/{w}/{k}" for w, k in _KEYS])
def test_scontrol_key(table_runs, what: str, key: str) -> None:
    a, b = table_runs(what)
    want, got = keyed_values(a.stdout).get(key, "(absent)"), keyed_values(b.stdout).get(key, "(absent)")
    if (what, key) in CLOCK_KEYS:
        want, got = re.sub(r"\d", "N", want), re.sub(r"\d", "N", got)
    _judge(f"scontrol/{what}/{key}", want == got, f"Slurm: {key}={want}\nSpur:  {key}={got}")
