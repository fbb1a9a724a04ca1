"""``pods/attach`` for interactive pods: the pod's main process, run on this machine, wired to kubectl.

``kubectl run -it`` creates a pod whose container has ``stdin: true``, waits until it is Running
and Ready, then attaches over WebSocket with the same channel protocol as exec
(``v5.channel.k8s.io``/``v4``: the first byte of each binary message is the stream, 0 stdin,
1 stdout, 2 stderr, 3 the final ``Status``, 4 terminal resize; in v5, 255 + a stream number closes
that stream, which is how kubectl signals the end of its stdin).

With ``KubeAPI(interactive_pods=True)`` the double plays kubelet for such pods: it reports them
Running at creation, and the first attach starts the container's command here (``command`` +
``args``, or the image's default ``sh`` when neither is given, as for busybox) with stdin, stdout
and stderr on the attach streams. When the process exits the pod is reported Succeeded or Failed
with its exit code (containers are not restarted). The pure helpers below decide what runs; the
``attach_process`` coroutine does the I/O.
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

import trio

STDIN, STDOUT, STDERR, ERROR, RESIZE, CLOSE = 0, 1, 2, 3, 4, 255
PROTOCOLS = ("v5.channel.k8s.io", "v4.channel.k8s.io")


def interactive_container(pod: dict[str, Any], name: str | None = None) -> dict[str, Any] | None:
    """The container of ``pod`` an attach reaches (``name``, or the first), if it takes stdin."""
    containers = (pod.get("spec") or {}).get("containers") or []
    chosen = next((c for c in containers if c.get("name") == name), None) if name else None
    if chosen is None and not name and containers:
        chosen = containers[0]
    if chosen is None or not chosen.get("stdin"):
        return None
    return chosen


def container_argv(container: dict[str, Any]) -> list[str]:
    """What the container runs: its ``command`` and ``args``, or the image's default shell."""
    argv = [*(container.get("command") or []), *(container.get("args") or [])]
    return argv or ["sh"]


def pick_protocol(offered_header: str | None) -> str | None:
    """The channel protocol to accept among those the client offers (newest first), or None."""
    offered = [p.strip() for p in (offered_header or "").split(",")]
    return next((p for p in PROTOCOLS if p in offered), None)


def exit_status(returncode: int) -> dict[str, Any]:
    """The ``Status`` sent on the error stream when the process ends (as for exec)."""
    if returncode == 0:
        return {"metadata": {}, "status": "Success"}
    return {
        "metadata": {},
        "status": "Failure",
        "message": f"command terminated with non-zero exit code: {returncode}",
        "reason": "NonZeroExitCode",
        "details": {"causes": [{"reason": "ExitCode", "message": str(returncode)}]},
    }


async def attach_process(websocket: Any, argv: list[str], env: dict[str, str], *, stdin: bool) -> int:
    """Run ``argv`` with its streams on ``websocket`` (already accepted); return its exit status.

    stdin messages go to the process (closed when the client closes stream 0, or the socket);
    stdout/stderr come back on streams 1/2 until the process closes them; then the exit
    ``Status`` goes out on stream 3.
    """
    proc = await trio.lowlevel.open_process(
        argv,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
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
