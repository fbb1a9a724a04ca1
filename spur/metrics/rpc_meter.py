"""Calls served, counted in plain numbers and shown to Prometheus at scrape time.

A server observes every call it answers (heartbeats included: thousands a second on a big cluster).
prometheus_client's ``Counter.inc`` and ``Histogram.observe`` take a lock on each update and check
the metric each time, which made the two updates of one call about 1.3% of a loaded controller's CPU.
:class:`RpcMeter` keeps the same two series in lists that only the event loop's thread writes, and
is a registry collector that builds them when scraped: ``<name>_total{method, code}`` (a counter) and
``<duration name>{method}`` (a histogram: buckets, ``_count``, ``_sum``), exactly as the labelled
``Counter`` and ``Histogram`` showed them.

A scrape from another thread may see a call in one series before the other; each histogram is
built from one copy of its bucket list, so its buckets and ``_count`` always agree. Series come in
the order their first call came, as prometheus_client's children do.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator, Sequence

from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

__all__ = ["RpcMeter"]


class RpcMeter(Collector):
    """``observe(method, code, seconds)`` per call answered; ``totals()`` per method name.

    ``method`` is the call's path (``/pkg.Service/Name``): series are labelled with its last part.
    ``buckets`` are the histogram's upper bounds, ascending (``+Inf`` is added)."""

    def __init__(
        self, requests_name: str, requests_help: str, duration_name: str, duration_help: str, buckets: Sequence[float]
    ) -> None:
        if list(buckets) != sorted(set(buckets)) or not buckets:
            raise ValueError("histogram buckets must be distinct and ascending")
        self._names = (requests_name, requests_help, duration_name, duration_help)
        self._bounds = tuple(float(b) for b in buckets)
        self._le = [floatToGoString(b) for b in self._bounds] + ["+Inf"]
        self._calls: dict[tuple[str, str], tuple[list[int], list[int], list[float]]] = {}  # by (path, code)
        self._by_name: dict[str, tuple[list[int], list[float]]] = {}  # name -> (bucket counts, [sum])
        self._codes: dict[tuple[str, str], list[int]] = {}  # (name, code) -> [count]

    def observe(self, method: str, code: str, seconds: float) -> None:
        """Count one call of ``method`` answered with status ``code`` after ``seconds``."""
        entry = self._calls.get((method, code))
        if entry is None:
            entry = self._calls[(method, code)] = self._entry(method, code)
        count, buckets, total = entry
        count[0] += 1
        buckets[bisect_left(self._bounds, seconds)] += 1
        total[0] += seconds

    def _entry(self, method: str, code: str) -> tuple[list[int], list[int], list[float]]:
        name = method.rsplit("/", 1)[-1]
        buckets, total = self._by_name.setdefault(name, ([0] * (len(self._bounds) + 1), [0.0]))
        count = self._codes.setdefault((name, code), [0])
        return count, buckets, total

    def totals(self) -> dict[str, tuple[int, float]]:
        """Per method name: (calls, total seconds)."""
        return {name: (sum(buckets), total[0]) for name, (buckets, total) in self._by_name.items()}

    def collect(self) -> Iterator[Metric]:
        requests_name, requests_help, duration_name, duration_help = self._names
        requests = CounterMetricFamily(requests_name, requests_help, labels=["method", "code"])
        for (name, code), count in list(self._codes.items()):
            requests.add_metric([name, code], count[0])
        yield requests
        duration = HistogramMetricFamily(duration_name, duration_help, labels=["method"])
        for name, (buckets, total) in list(self._by_name.items()):
            counts = list(buckets)  # one copy: buckets and _count agree
            cumulative, running = [], 0
            for le, n in zip(self._le, counts, strict=True):
                running += n
                cumulative.append((le, running))
            duration.add_metric([name], cumulative, total[0])
        yield duration
