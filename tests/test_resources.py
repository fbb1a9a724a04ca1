"""Memory, GRES and GPU request parsing."""

from __future__ import annotations

import pytest

from spur.core.resources import (
    GresRequest,
    ResourceError,
    gpus_per_node,
    parse_gpus,
    parse_gres,
    parse_memory_mb,
)


@pytest.mark.parametrize(
    ("spec", "mb"),
    [
        ("0", 0),
        ("100", 100),
        ("100M", 100),
        ("100m", 100),
        ("4G", 4096),
        ("4g", 4096),
        ("1T", 1024 * 1024),
        ("1024K", 1),
        ("1025k", 2),  # K rounds up to whole MB
        ("1k", 1),
        (" 8G ", 8192),
    ],
)
def test_parse_memory_mb(spec: str, mb: int) -> None:
    assert parse_memory_mb(spec) == mb


@pytest.mark.parametrize("spec", ["", "4X", "G", "-1", "1.5G", "4GB", "4 G", "9" * 30, "99999999999T"])
def test_bad_memory_specs_raise_naming_the_spec(spec: str) -> None:
    with pytest.raises(ResourceError) as exc:
        parse_memory_mb(spec)
    assert repr(spec) in str(exc.value)


@pytest.mark.parametrize(
    ("items", "expected"),
    [
        (["gpu"], [GresRequest("gpu", "", 1)]),
        (["gpu:2"], [GresRequest("gpu", "", 2)]),
        (["gpu:a100:2"], [GresRequest("gpu", "a100", 2)]),
        (["gpu:a100"], [GresRequest("gpu", "a100", 1)]),
        (["gpu:2,shard:1"], [GresRequest("gpu", "", 2), GresRequest("shard", "", 1)]),
        (["gpu:1", "mps:50"], [GresRequest("gpu", "", 1), GresRequest("mps", "", 50)]),
        (["gres/gpu:4"], [GresRequest("gpu", "", 4)]),
        (["gpu:0"], [GresRequest("gpu", "", 0)]),
        (["none"], []),
        ([], []),
    ],
)
def test_parse_gres(items: list[str], expected: list[GresRequest]) -> None:
    assert parse_gres(items) == expected


@pytest.mark.parametrize(
    "item", ["", "gpu:", ":2", "gpu:a100:x", "gpu:a:b:c", "gpu,,shard", "gpu:-1", "g pu"]
)
def test_bad_gres_raises(item: str) -> None:
    with pytest.raises(ResourceError):
        parse_gres([item])


def test_gres_str_is_canonical_form() -> None:
    assert str(GresRequest("gpu", "a100", 2)) == "gpu:a100:2"
    assert str(GresRequest("gpu", "", 2)) == "gpu:2"


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("2", GresRequest("gpu", "", 2)),
        ("a100:2", GresRequest("gpu", "a100", 2)),
        (" 8 ", GresRequest("gpu", "", 8)),
    ],
)
def test_parse_gpus(spec: str, expected: GresRequest) -> None:
    assert parse_gpus(spec) == expected


@pytest.mark.parametrize("spec", ["", "x", "a100:", "a:b:2", "-2", "99999999999"])
def test_bad_gpus_raise(spec: str) -> None:
    with pytest.raises(ResourceError):
        parse_gpus(spec)


@pytest.mark.parametrize(
    ("gres", "expected"),
    [
        ([], (0, "")),
        (["gpu:2"], (2, "")),
        (["gpu:a100:2", "shard:4"], (2, "a100")),
        (["gpu:1", "gpu:h100:2"], (3, "h100")),
        (["shard:1"], (0, "")),
    ],
)
def test_gpus_per_node(gres: list[str], expected: tuple[int, str]) -> None:
    assert gpus_per_node(gres) == expected
