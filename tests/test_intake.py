"""Bounded admission (pure decision and gate) and the client's backoff schedule."""

from __future__ import annotations

import pytest

from spur.cli.busy import BUSY_RETRY_MESSAGE, Busy, backoff_delays, retry_while_busy
from spur.controller.intake import BUSY, SubmitGate, array_size, refusal
from spur.rpc.status import RpcError, StatusCode


def test_refusal_names_the_limit_reached() -> None:
    assert refusal(0, 0, 1, max_in_flight=2, max_job_count=10) is None
    assert refusal(2, 0, 1, max_in_flight=2, max_job_count=10).startswith(BUSY + " (controller busy")
    assert refusal(0, 10, 1, max_in_flight=2, max_job_count=10).startswith(BUSY + " (MaxJobCount 10")
    assert refusal(0, 5, 6, max_in_flight=2, max_job_count=10) is not None  # an array counts its tasks
    assert refusal(0, 0, 50, max_in_flight=2, max_job_count=10) is None  # alone it is still admitted


def test_array_size_counts_tasks() -> None:
    assert array_size("") == 1
    assert array_size("1-10000%5") == 10000
    assert array_size("1,3,5") == 3
    assert array_size("not an array") == 1


def test_gate_counts_until_commit_and_refuses_when_full() -> None:
    gate = SubmitGate()
    limits = {"max_in_flight": 1, "max_job_count": 100}
    with gate.admit(0, 1, **limits):
        assert gate.in_flight == 1
        with pytest.raises(RpcError) as exc:
            with gate.admit(0, 1, **limits):
                pass
        assert exc.value.code is StatusCode.RESOURCE_EXHAUSTED
        assert gate.in_flight == 1 and gate.refused == 1
    assert gate.in_flight == 0
    with pytest.raises(ValueError):  # a failed proposal releases its place too
        with gate.admit(0, 1, **limits):
            raise ValueError("proposal failed")
    assert gate.in_flight == 0


def test_backoff_is_slurms_schedule() -> None:
    assert list(backoff_delays()) == [float(n) for n in range(1, 16)]
    assert list(backoff_delays(3, scale=0.5)) == [0.5, 1.0, 1.5]


def test_retry_while_busy_sleeps_between_tries_and_says_so(capsys, monkeypatch) -> None:
    monkeypatch.delenv("SPUR_BUSY_RETRY_SCALE", raising=False)
    slept: list[float] = []
    answers = iter([Busy(BUSY), Busy(BUSY), 42])

    def attempt() -> int:
        a = next(answers)
        if isinstance(a, Busy):
            raise a
        return a

    assert retry_while_busy(attempt, "sbatch", sleep=slept.append) == 42
    assert slept == [1.0, 2.0]
    assert capsys.readouterr().err.splitlines() == [f"sbatch: error: {BUSY_RETRY_MESSAGE}"] * 2


def test_retry_while_busy_gives_up_after_fifteen_retries(monkeypatch) -> None:
    monkeypatch.delenv("SPUR_BUSY_RETRY_SCALE", raising=False)
    slept: list[float] = []

    def attempt() -> int:
        raise Busy(BUSY)

    with pytest.raises(Busy):
        retry_while_busy(attempt, "sbatch", sleep=slept.append)
    assert len(slept) == 15


async def test_submit_retrying_backs_off_on_resource_exhausted_only(capsys, monkeypatch) -> None:
    from spur.cli.busy import submit_retrying

    monkeypatch.delenv("SPUR_BUSY_RETRY_SCALE", raising=False)
    slept: list[float] = []
    answers = iter([RpcError(StatusCode.RESOURCE_EXHAUSTED, BUSY), 7])

    async def sleep(delay: float) -> None:
        slept.append(delay)

    async def call() -> int:
        a = next(answers)
        if isinstance(a, RpcError):
            raise a
        return a

    assert await submit_retrying(call, "srun", sleep=sleep) == 7
    assert slept == [1.0]
    assert capsys.readouterr().err == f"srun: error: {BUSY_RETRY_MESSAGE}\n"

    async def refused() -> int:
        raise RpcError(StatusCode.PERMISSION_DENIED, "no")

    with pytest.raises(RpcError):  # other refusals are not retried
        await submit_retrying(refused, "srun", sleep=sleep)
    assert slept == [1.0]
