"""A minimal HTTP/1.1 endpoint serving a registry's Prometheus text on Trio (no web framework).

``GET /metrics`` (or ``/``) answers the registry's exposition (``CONTENT_TYPE_LATEST``); other paths
404 (unless ``routes`` names them: health checks answer 200 or 503 with their text), other methods 405. One request per connection (``Connection: close``); a request head larger
than 16 KiB or slower than 10 s is dropped. Serving never raises into the caller's nursery for a
client's misbehaviour.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

import trio

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

log = logging.getLogger("spur.metrics")

_MAX_HEAD = 16 * 1024
_HEAD_TIMEOUT = 10.0


def _response(status: str, body: bytes, content_type: str = "text/plain; charset=utf-8") -> bytes:
    head = (
        f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


Routes = dict[str, Callable[[], tuple[bool, str]]]


async def _handle(stream: trio.SocketStream, registry: CollectorRegistry, routes: Routes | None = None) -> None:
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

    try:
        head = b""
        with trio.move_on_after(_HEAD_TIMEOUT):
            while b"\r\n\r\n" not in head and len(head) < _MAX_HEAD:
                data = await stream.receive_some(4096)
                if not data:
                    break
                head += data
        line = head.split(b"\r\n", 1)[0].decode("latin-1")
        parts = line.split()
        if len(parts) < 2:
            return
        method, target = parts[0], parts[1].split("?", 1)[0]
        if method not in ("GET", "HEAD"):
            reply = _response("405 Method Not Allowed", b"only GET\n")
        elif routes and target in routes:
            ok, text = routes[target]()
            body = (text + "\n").encode()
            reply = _response(
                "200 OK" if ok else "503 Service Unavailable", b"" if method == "HEAD" else body
            )
        elif target not in ("/metrics", "/"):
            reply = _response("404 Not Found", b"not found: try /metrics\n")
        else:
            body = generate_latest(registry)
            reply = _response("200 OK", b"" if method == "HEAD" else body, CONTENT_TYPE_LATEST)
        await stream.send_all(reply)
    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
        pass
    except Exception:
        log.exception("metrics request failed")
    finally:
        await stream.aclose()


async def serve_metrics(
    registry: CollectorRegistry,
    host: str,
    port: int,
    *,
    routes: Routes | None = None,
    task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Listen on ``host:port`` (0 = free port), report the bound port, serve until cancelled.

    ``routes``: extra paths (``/healthz``...) answered by a check returning (healthy, text)."""
    listeners = await trio.open_tcp_listeners(port, host=host or None)
    if port == 0 and len(listeners) > 1:
        for extra in listeners[1:]:
            await extra.aclose()
        listeners = listeners[:1]
    bound = listeners[0].socket.getsockname()[1]
    log.info("metrics on http://%s:%d/metrics", host, bound)
    task_status.started(bound)

    async def handler(stream: trio.SocketStream) -> None:
        await _handle(stream, registry, routes)

    await trio.serve_listeners(handler, listeners)
