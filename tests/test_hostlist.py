"""Hostlist expansion/compression against Slurm 22.05 reference output and error cases."""

from __future__ import annotations

import csv
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spur.core.hostlist import MAX_HOSTS, HostlistError, compress, count, expand

REFERENCE = Path(__file__).resolve().parents[2] / "shared" / "reference"


def _rows(name: str) -> list[list[str]]:
    path = REFERENCE / name
    if not path.exists():
        pytest.skip(f"reference data {path} not present")
    with path.open(newline="") as f:
        rows = list(csv.reader(f, delimiter="\t"))
    return rows[1:]


def test_reference_expand_rows_all_match_slurm() -> None:
    rows = _rows("hostlist_expand.tsv")
    assert rows
    for expr, expected in rows:
        if "error" in expected:
            with pytest.raises(HostlistError) as exc:
                expand(expr)
            assert expr in str(exc.value)
        else:
            assert ",".join(expand(expr)) == expected, expr


def test_reference_compress_rows_all_match_slurm() -> None:
    rows = _rows("hostlist_compress.tsv")
    assert rows
    for names, expected in rows:
        assert compress(names.split(",")) == expected, names


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ("", []),
        (" , ,", []),
        ("n1 n2\tn3", ["n1", "n2", "n3"]),
        ("n1,n1", ["n1", "n1"]),
        ("n[1-2],n[1-2]", ["n1", "n2", "n1", "n2"]),
        ("[1-3]", ["1", "2", "3"]),
        ("n[5]", ["n5"]),
        ("n[1-010]", [f"n{i}" for i in range(1, 11)]),
        ("n[08-11]", ["n08", "n09", "n10", "n11"]),
        ("a[1-2]b[3-4]c[5,6]", [f"a{a}b{b}c{c}" for a in (1, 2) for b in (3, 4) for c in (5, 6)]),
        ("x[1-2],y", ["x1", "x2", "y"]),
        ("node1-ib", ["node1-ib"]),
    ],
)
def test_expand_cases(expr: str, expected: list[str]) -> None:
    assert expand(expr) == expected
    assert count(expr) == len(expected)


@pytest.mark.parametrize(
    "expr",
    [
        "n[1-3",  # unbalanced
        "n1-3]",
        "n[[1-2]]",  # nested
        "n[5-1]",  # reversed
        "n[a-b]",  # non-numeric
        "n[1,,2]",
        "n[]",
        "n[-1]",
        "n[1-2]x",  # text after the last bracket (Slurm rejects it too)
        "n[1-4:2]",
        "n[0-99999999999999999999999]",  # huge numbers must not overflow
    ],
)
def test_malformed_expressions_raise_hostlist_error_naming_the_expression(expr: str) -> None:
    with pytest.raises(HostlistError) as exc:
        expand(expr)
    assert expr in str(exc.value)
    assert isinstance(exc.value, ValueError)


@pytest.mark.parametrize(
    "expr",
    [
        f"n[0-{MAX_HOSTS}]",
        "a[0-999999]b[0-9]",  # the product is what counts
        "a[0-999],b[0-999],c[1-2]" + ",d[0-999999]",
    ],
)
def test_expansion_is_capped_quickly(expr: str) -> None:
    start = time.monotonic()
    with pytest.raises(HostlistError, match="more than|Too many"):
        expand(expr)
    assert time.monotonic() - start < 2.0


def test_cap_allows_exactly_max_hosts() -> None:
    assert count(f"n[1-{MAX_HOSTS}]") == MAX_HOSTS


@pytest.mark.parametrize(
    ("names", "expected"),
    [
        ([], ""),
        (["x", "x"], "x,x"),
        (["n8", "n9", "n10"], "n[8-10]"),
        (["n08", "n09", "n10"], "n[08-10]"),
        (["n8", "n09"], "n[8,09]"),  # widths 1 and 2 are not equivalent for 8 vs 09
        (["n1", "x", "n2"], "n1,x,n2"),
        (["n[1-3]", "n4"], "n[1-4]"),
        (["a1b3", "a1b4", "a2b3"], "a1b[3-4],a2b3"),
        (["node1-ib", "node2-ib"], "node1-ib,node2-ib"),
    ],
)
def test_compress_cases(names: list[str], expected: str) -> None:
    assert compress(names) == expected


@pytest.mark.parametrize(
    "expr", ["gpu[01-08,10]", "rack[1-2]-node[01-02]", "n[9-11],m[1-2],z", "c1,c1,c2", "n[001-100]"]
)
def test_compress_of_expand_round_trips(expr: str) -> None:
    assert expand(compress(expand(expr))) == expand(expr)


@given(st.from_regex(r"[A-Za-z0-9._-]{1,16}", fullmatch=True))
@settings(max_examples=400, deadline=None)
def test_one_plain_name_compresses_as_the_general_path_does(name: str) -> None:
    # A list or tuple of one plain name takes a shortcut; a generator takes the general path.
    assert compress([name]) == compress(iter([name])) == compress((name,))


@pytest.mark.parametrize("expr", ["n[1-2]", "n1,n2", "n1 n2", "n[3]"])
def test_one_item_holding_hostlist_syntax_is_still_parsed(expr: str) -> None:
    assert compress([expr]) == compress(iter([expr])) == compress(expand(expr))
