"""The live pages' refresh loop (spur.ui.live) on Trio's mock clock: pacing by cost, idle refreshes,
refusals."""

from __future__ import annotations

from itertools import pairwise

import pytest
import trio

from spur.ui import live


def test_refresh_gap_is_at_least_a_second_and_keeps_the_duty() -> None:
    assert live.refresh_gap(0.0) == live.MIN_GAP_SECS == 1.0
    assert live.refresh_gap(0.01) == 1.0
    assert live.refresh_gap(0.1) == pytest.approx(0.1 / live.DUTY) == pytest.approx(5.0)


class Sink:
    def __init__(self) -> None:
        self.sent: list[tuple[float, str]] = []

    async def send(self, value: str) -> None:
        self.sent.append((trio.current_time(), value))


class Page:
    """A page whose render costs ``cost`` seconds and whose state changes every ``every`` seconds."""

    def __init__(self, cost: float, every: float) -> None:
        self.cost, self.every = cost, every
        self.renders: list[float] = []

    async def render(self) -> str:
        self.renders.append(trio.current_time())
        await trio.sleep(self.cost)
        return f"page {len(self.renders)}"

    async def wait_change(self) -> None:
        await trio.sleep(self.every)


async def _run_for(seconds: float, page: Page, sink: Sink) -> None:
    with trio.move_on_after(seconds):
        await live.refresh_loop(page.render, lambda: page.wait_change, sink, lambda html: f"live:{html}")


async def test_a_cheap_page_refreshes_once_a_second_under_constant_change(autojump_clock: trio.abc.Clock) -> None:
    page, sink = Page(cost=0.005, every=0.1), Sink()
    start = trio.current_time()
    await _run_for(10.0, page, sink)
    gaps = [b - a for a, b in pairwise(page.renders)]
    assert page.renders[0] == start
    assert gaps and all(g == pytest.approx(1.0) for g in gaps)
    assert [v for _t, v in sink.sent][:2] == ["live:page 1", "live:page 2"]


async def test_an_expensive_page_backs_off_to_its_duty(autojump_clock: trio.abc.Clock) -> None:
    page, sink = Page(cost=0.2, every=0.1), Sink()
    await _run_for(60.0, page, sink)
    gaps = [b - a for a, b in pairwise(page.renders)]
    assert gaps and all(g == pytest.approx(0.2 / live.DUTY) for g in gaps)  # 10 s: 2% of the time
    busy = len(page.renders) * page.cost
    assert busy / 60.0 <= live.DUTY + 0.2 / 60.0  # the last refresh may have begun just before the end


async def test_without_change_a_page_refreshes_every_idle_period_and_says_idle(
    autojump_clock: trio.abc.Clock,
) -> None:
    class Static(Page):
        async def render(self) -> str:
            self.renders.append(trio.current_time())
            return "same"

    page, sink = Static(cost=0.0, every=1e9), Sink()
    await _run_for(46.0, page, sink)
    assert [b - a for a, b in pairwise(page.renders)] == [live.IDLE_REFRESH_SECS] * 3
    assert [v for _t, v in sink.sent] == ["live:same", ": idle\n\n", ": idle\n\n", ": idle\n\n"]


async def test_a_refusal_is_sent_and_only_a_final_one_ends_the_stream(autojump_clock: trio.abc.Clock) -> None:
    answers: list[str | live.Refused] = [
        "one",
        live.Refused("refused:403", final=False),
        "two",
        live.Refused("refused:401", final=True),
        "never",
    ]

    async def render() -> str:
        answer = answers.pop(0)
        if isinstance(answer, live.Refused):
            raise answer
        return answer

    async def wait_change() -> None:
        await trio.sleep(0.1)

    sink = Sink()
    with trio.fail_after(30):
        await live.refresh_loop(render, lambda: wait_change, sink, lambda html: f"live:{html}")
    # After a refusal the last page stands (nothing new to send: the idle comment).
    assert [v for _t, v in sink.sent] == ["live:one", "refused:403", ": idle\n\n", "live:two", "refused:401"]
    assert answers == ["never"]


async def test_a_change_made_while_the_page_renders_is_not_missed(autojump_clock: trio.abc.Clock) -> None:
    """The change watch is taken as a refresh begins: a change during the render brings the next
    refresh after the one-second floor, not the idle refresh 15 s later."""
    current = [trio.Event()]

    def changed() -> None:  # what an applied log entry does
        current[0].set()
        current[0] = trio.Event()

    renders: list[float] = []

    async def render() -> str:
        renders.append(trio.current_time())
        if len(renders) == 1:
            changed()
        return f"page {len(renders)}"

    with trio.move_on_after(5):
        await live.refresh_loop(render, lambda: current[0].wait, Sink(), lambda html: f"live:{html}")
    assert len(renders) >= 2 and renders[1] - renders[0] == pytest.approx(1.0)
