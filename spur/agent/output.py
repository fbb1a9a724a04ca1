"""Streaming a job's output as OutputChunk messages, by polling its output files.

Interactive jobs and job steps: each task's ``task-<rank>.out``/``.err`` in the job dir (``task`` =
global rank; a step's task that writes to an ``--output`` file has no captured stream). Batch jobs: the job's output file (and error file when separate), as task 0. Bytes are sent as they
appear; once the job has finished, the files are drained, each task of a step or interactive job gets a
``stream="task_exit"`` chunk with its own exit code and signal, and a final ``stream="exit"`` chunk carries
the node's exit code and signal. Without ``follow`` the stream sends what exists now, plus the exit chunk if
the job has already finished.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import BinaryIO

import trio

from spur.agent.executor import TrackedJob
from spur.rpc.proto import spur_pb2

__all__ = ["stream_output"]

CHUNK = 64 * 1024


class _Source:
    def __init__(self, path: str, stream: str, task: int) -> None:
        self.path = path
        self.stream = stream
        self.task = task
        self.file: BinaryIO | None = None

    def read(self) -> bytes:
        if self.file is None:
            try:
                self.file = open(self.path, "rb")  # noqa: SIM115 - kept open across polls
            except OSError:
                return b""
        try:
            return self.file.read(CHUNK)
        except OSError:
            return b""

    def close(self) -> None:
        if self.file is not None:
            self.file.close()
            self.file = None


def _sources(job: TrackedJob) -> list[_Source]:
    spec = job.spec
    if spec is None:
        return []
    if spec.interactive or spec.is_step:
        sources = []
        for localid, rank in enumerate(spec.ranks):
            out = spec.task_stdout[localid] if localid < len(spec.task_stdout) else ""
            if out:  # the task writes its --output file (stderr to --error or the same file)
                continue
            sources += [
                _Source(str(job.jobdir.task_output(rank, stream)), stream, rank)
                for stream in ("stdout", "stderr")
            ]
        return sources
    sources = [_Source(spec.stdout_path, "stdout", 0)]
    if spec.stderr_path:
        sources.append(_Source(spec.stderr_path, "stderr", 0))
    return sources


def _task_statuses(job: TrackedJob) -> list[spur_pb2.OutputChunk]:
    """One ``task_exit`` chunk per task of a step or interactive job, from the shim's exit record
    (srun names each failed task, as Slurm does); none for a batch script."""
    if job.spec is None or not (job.spec.interactive or job.spec.is_step):
        return []
    record = job.jobdir.read("exit.json") or {}
    chunks = []
    for task in record.get("tasks") or []:
        if isinstance(task, dict) and isinstance(task.get("rank"), int):
            chunks.append(
                spur_pb2.OutputChunk(
                    stream="task_exit",
                    task=task["rank"],
                    exit_code=int(task.get("exit_code") or 0),
                    signal=int(task.get("signal") or 0),
                )
            )
    return chunks


async def stream_output(
    job: TrackedJob, *, follow: bool, poll_interval: float = 0.05
) -> AsyncIterator[spur_pb2.OutputChunk]:
    """Yield ``job``'s output chunks (see the module docstring); the caller marks completion."""
    sources = _sources(job)
    try:
        while True:
            finished = job.finished.is_set()  # read before draining: output written before the end is seen
            progressed = True
            while progressed:
                progressed = False
                for src in sources:
                    data = src.read()
                    if data:
                        progressed = True
                        yield spur_pb2.OutputChunk(stream=src.stream, data=data, task=src.task)
            if finished:
                assert job.report is not None
                for task in _task_statuses(job):
                    yield task
                yield spur_pb2.OutputChunk(
                    stream="exit", exit_code=job.report.exit_code, signal=job.report.signal
                )
                return
            if not follow:
                return
            with trio.move_on_after(poll_interval):
                await job.finished.wait()
    finally:
        for src in sources:
            with contextlib.suppress(OSError):
                src.close()
