"""A Trio instrument for tests: where the run-loop steps of one task begin, among other marks."""

from __future__ import annotations

import trio


class StepMarks(trio.abc.Instrument):
    """Appends "step" to ``log`` each time ``task`` starts a run-loop step. A step ends at a
    checkpoint, where the loop's other tasks and I/O get their turn, so what a test logs between two
    marks happened without the loop serving anything else."""

    def __init__(self, log: list[str]) -> None:
        self.log = log
        self.task: trio.lowlevel.Task | None = None

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        if task is self.task:
            self.log.append("step")


def items_per_step(log: list[str]) -> list[int]:
    """How many "item" marks each step of ``log`` holds (steps without one left out)."""
    return [s.split().count("item") for s in " ".join(log).split("step") if "item" in s]
