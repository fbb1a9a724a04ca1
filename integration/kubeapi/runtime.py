"""The I/O half of ``pods/attach``: run a pod's process with its streams on the WebSocket.

What runs and the channel numbers come from ``attach.py`` (pure); see its docstring for the protocol.
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

import trio

from integration.kubeapi.attach import CLOSE, ERROR, START_FAILED, STDERR, STDIN, STDOUT, exit_status


async def attach_process(websocket: Any, argv: list[str], env: dict[str, str], *, stdin: bool) -> int:
    """Run ``argv`` with its streams on ``websocket`` (already accepted); return its exit status.

    stdin messages go to the process (closed when the client closes stream 0, or the socket);
    stdout/stderr come back on streams 1/2 until the process closes them; then the exit
    ``Status`` goes out on stream 3. A command that cannot be started (not found, not executable)
    gets a Failure ``Status`` and ``START_FAILED``.
    """
    try:
        proc = await trio.lowlevel.open_process(
            argv,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
    except OSError as exc:  # as a runtime reports a container whose command cannot start
        failure = {
            "metadata": {},
            "status": "Failure",
            "message": f"failed to start container process: exec: {argv[0]!r}: {exc.strerror}",
            "reason": "InternalError",
        }
        await websocket.send(bytes([ERROR]) + json.dumps(failure).encode())
        return START_FAILED
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    try:
        async with trio.open_nursery() as outputs:

            async def pump(stream: Any, channel: int) -> None:
                async for chunk in stream:
                    await websocket.send(bytes([channel]) + chunk)

            outputs.start_soon(pump, proc.stdout, STDOUT)
            outputs.start_soon(pump, proc.stderr, STDERR)
            async with trio.open_nursery() as inputs:

                async def feed() -> None:
                    try:
                        if not stdin:
                            return
                        while True:
                            message = await websocket.receive()
                            data = message.encode() if isinstance(message, str) else message
                            if not data:
                                continue
                            if data[0] == STDIN and len(data) > 1:
                                try:
                                    await proc.stdin.send_all(data[1:])
                                except (trio.BrokenResourceError, trio.ClosedResourceError):
                                    return
                            elif data[0] == CLOSE and data[1:2] == bytes([STDIN]):
                                return
                    finally:
                        await proc.stdin.aclose()

                inputs.start_soon(feed)
                await proc.wait()
                inputs.cancel_scope.cancel()
        returncode = await proc.wait()
        await websocket.send(bytes([ERROR]) + json.dumps(exit_status(returncode)).encode())
        return returncode
    finally:
        if proc.returncode is None:
            proc.kill()
            with trio.CancelScope(shield=True):
                await proc.wait()
