"""``pods/attach`` for interactive pods: the pod's main process, run on this machine, wired to kubectl.

``kubectl run -it`` creates a pod whose container has ``stdin: true``, waits until it is Running
and Ready, then attaches over WebSocket with the same channel protocol as exec
(``v5.channel.k8s.io``/``v4``: the first byte of each binary message is the stream, 0 stdin,
1 stdout, 2 stderr, 3 the final ``Status``, 4 terminal resize; in v5, 255 + a stream number closes
that stream, which is how kubectl signals the end of its stdin).

With ``KubeAPI(interactive_pods=True)`` the double plays kubelet for such pods: it reports them
Running at creation, and the first attach starts the container's command here
(``runtime.attach_process``: ``command`` + ``args``, or the image's default ``sh`` when neither is
given, as for busybox) with stdin, stdout and stderr on the attach streams. When the process exits the pod is reported Succeeded or Failed
with its exit code (containers are not restarted). This module is pure: it decides what runs and
what is reported; ``runtime.py`` does the I/O.
"""

from __future__ import annotations

from typing import Any

STDIN, STDOUT, STDERR, ERROR, RESIZE, CLOSE = 0, 1, 2, 3, 4, 255
PROTOCOLS = ("v5.channel.k8s.io", "v4.channel.k8s.io")
START_FAILED = 128  #: the exit status reported for a command that could not be started


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
