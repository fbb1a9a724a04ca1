"""Output filename pattern expansion and Spur's default output names."""

from __future__ import annotations

import pytest

from spur.core.output_path import default_output_name, expand_output_pattern

JOB = {"job_id": 128, "job_name": "train", "user": "alice", "node": "gpu01"}
ARRAY = {**JOB, "job_id": 131, "array_job_id": 128, "array_task_id": 3}


@pytest.mark.parametrize(
    ("pattern", "kwargs", "expected"),
    [
        ("slurm-%j.out", JOB, "slurm-128.out"),
        ("job%4j.out", JOB, "job0128.out"),
        ("job%J.out", JOB, "job128.batch.out"),
        ("job%J.out", {**JOB, "step_id": "0"}, "job128.0.out"),
        ("%x-%u-%N.log", JOB, "train-alice-gpu01.log"),
        ("%5x-%3u", JOB, "train-alice"),  # padding is ignored for names
        ("100%%-%j", JOB, "100%-128"),
        ("%2j-%2t.out", {**JOB, "task_id": 1}, "128-01.out"),
        ("n%n-t%t", {**JOB, "node_id": 2, "task_id": 7}, "n2-t7"),
        ("step-%s", JOB, "step-batch"),  # the batch step's id is "batch"
        ("s%3s", {**JOB, "step_id": "4"}, "s004"),
        ("%A_%a.out", ARRAY, "128_3.out"),
        ("%A_%3a.out", ARRAY, "128_003.out"),
        ("%b", {**ARRAY, "array_task_id": 17}, "7"),
        ("%A.out", JOB, "128.out"),  # not an array: %A is the job id
        ("%a", JOB, "4294967294"),  # Slurm prints NO_VAL for a non-array job's %a
        ("%20j", JOB, "0000000128"),  # padding is capped at 10
        ("%" + "9" * 5000 + "j", JOB, "0000000128"),
        ("%z-%j", JOB, "%z-128"),  # unknown symbols stay
        ("%3z", JOB, "%3z"),
        ("end%", JOB, "end%"),
        ("end%4", JOB, "end%4"),
        ("/abs/%j/out", JOB, "/abs/128/out"),
        ("a\\%j", JOB, "a%j"),  # a backslash disables expansion
        ("", JOB, ""),
    ],
)
def test_expand_output_pattern(pattern: str, kwargs: dict, expected: str) -> None:
    assert expand_output_pattern(pattern, **kwargs) == expected


@pytest.mark.parametrize(
    ("args", "expected"),
    [((42, None, None), "slurm-42.out"), ((43, 40, 2), "slurm-40_2.out"), ((43, None, 2), "slurm-43_2.out")],
)
def test_default_output_name(args: tuple, expected: str) -> None:
    assert default_output_name(*args) == expected
