"""``quick_init``: a frozen dataclass built through it is the object the dataclass's own ``__init__``
builds (same fields, defaults, factories, keyword-only fields, post-init), still frozen, and every
class the hot paths decorate is covered."""

from __future__ import annotations

import dataclasses
from dataclasses import InitVar, dataclass, field

import pytest

from spur.core.frozen_init import quick_init


def _pair() -> tuple[type, type]:
    """The same frozen class twice: as the dataclass builds it, and with ``quick_init``."""

    def make() -> type:
        @dataclass(frozen=True)
        class Shape:
            name: str
            cpus: int
            tags: tuple[str, ...] = ()
            seen: list[int] = field(default_factory=list)
            derived: int = field(default=0, init=False)
            later: dict[str, int] = field(default_factory=dict, init=False)
            mode: str = field(default="shared", kw_only=True)

            def __post_init__(self) -> None:
                object.__setattr__(self, "derived", self.cpus * 2)

        return Shape

    return make(), quick_init(make())


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [
        (("n1", 4), {}),
        (("n1", 4, ("gpu",)), {"mode": "exclusive"}),
        ((), {"name": "n2", "cpus": 8, "seen": [1, 2]}),
    ],
)
def test_quick_init_builds_what_the_dataclass_builds(args: tuple[object, ...], kwargs: dict[str, object]) -> None:
    plain, quick = _pair()
    a, b = plain(*args, **kwargs), quick(*args, **kwargs)
    assert dataclasses.asdict(a) == dataclasses.asdict(b)
    assert b.derived == b.cpus * 2  # __post_init__ ran
    assert quick(*args, **kwargs).later is not b.later  # a fresh default per instance
    assert quick(*args, **kwargs).seen is not b.seen or "seen" in kwargs


def test_quick_init_keeps_the_instance_frozen_and_replace_working() -> None:
    _, quick = _pair()
    shape = quick("n1", 4)
    with pytest.raises(dataclasses.FrozenInstanceError):
        shape.cpus = 5  # type: ignore[misc]
    moved = dataclasses.replace(shape, cpus=6)
    assert (moved.name, moved.cpus, moved.derived) == ("n1", 6, 12)
    assert moved == quick("n1", 6)


def test_quick_init_rejects_calls_the_dataclass_rejects() -> None:
    plain, quick = _pair()
    for cls in (plain, quick):
        with pytest.raises(TypeError):
            cls("n1")  # missing cpus
        with pytest.raises(TypeError):
            cls("n1", 4, (), [], "exclusive")  # mode is keyword-only
        with pytest.raises(TypeError):
            cls("n1", 4, derived=3)  # not an init field


def test_quick_init_refuses_what_it_cannot_build() -> None:
    @dataclass
    class Mutable:
        x: int

    @dataclass(frozen=True, slots=True)
    class Slotted:
        x: int

    @dataclass(frozen=True)
    class WithInitVar:
        x: int
        scale: InitVar[int] = 1

        def __post_init__(self, scale: int) -> None:
            object.__setattr__(self, "x", self.x * scale)

    for cls, words in ((Mutable, "frozen"), (Slotted, "slots"), (WithInitVar, "InitVar")):
        with pytest.raises(TypeError, match=words):
            quick_init(cls)


def test_the_hot_classes_use_it() -> None:
    from spur_sched_backfill.request import Request

    from spur.auth.identity import Identity
    from spur.core import scheduling
    from spur.state.immediate import Decision, InFlight

    hot = [
        scheduling.NodeView, scheduling.RunningView, scheduling.PendingView, scheduling.PartitionView,
        scheduling.SchedSnapshot, scheduling.NodeLayout, InFlight, Decision, Identity, Request,
    ]  # fmt: skip
    for cls in hot:
        assert cls.__init__.__module__ == cls.__module__ and "__d" in cls.__init__.__code__.co_varnames, cls
