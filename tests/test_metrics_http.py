"""The metrics endpoint: Prometheus text for GET /metrics, 404/405 otherwise, never crashes."""

from __future__ import annotations

import trio
from prometheus_client import CollectorRegistry, Counter
from prometheus_client.parser import text_string_to_metric_families

from spur.metrics.http import serve_metrics


async def _request(port: int, raw: bytes) -> bytes:
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        await stream.send_all(raw)
        data = b""
        while chunk := await stream.receive_some(65536):
            data += chunk
    return data


async def test_metrics_endpoint_answers_prometheus_text_and_errors() -> None:
    registry = CollectorRegistry(auto_describe=False)
    Counter("spur_test_things", "things", registry=registry).inc(3)
    async with trio.open_nursery() as nursery:
        port = await nursery.start(serve_metrics, registry, "127.0.0.1", 0)
        reply = await _request(port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        head, _, body = reply.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200 OK") and b"text/plain" in head
        samples = {s.name: s.value for f in text_string_to_metric_families(body.decode()) for s in f.samples}
        assert samples["spur_test_things_total"] == 3
        assert (await _request(port, b"GET /nope HTTP/1.1\r\n\r\n")).startswith(b"HTTP/1.1 404")
        assert (await _request(port, b"POST /metrics HTTP/1.1\r\n\r\n")).startswith(b"HTTP/1.1 405")
        assert await _request(port, b"\r\n\r\n") == b""  # garbage: connection closed, server fine
        assert (await _request(port, b"GET / HTTP/1.1\r\n\r\n")).startswith(b"HTTP/1.1 200")
        nursery.cancel_scope.cancel()
