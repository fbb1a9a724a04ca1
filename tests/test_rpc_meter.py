"""The controller's call meter (spur.metrics.rpc_meter) exposes exactly what prometheus_client's
labelled Counter and Histogram exposed for the same calls."""

from __future__ import annotations

import random

import pytest
from prometheus_client import CollectorRegistry, Counter, Histogram, disable_created_metrics, generate_latest

from spur.metrics.rpc_meter import RpcMeter

disable_created_metrics()  # as spur.metrics.controller does: no *_created series

BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


def _pair() -> tuple[CollectorRegistry, RpcMeter, CollectorRegistry, Counter, Histogram]:
    ours = CollectorRegistry(auto_describe=False)
    meter = RpcMeter("spur_rpc_requests", "calls", "spur_rpc_duration_seconds", "time", BUCKETS)
    ours.register(meter)
    theirs = CollectorRegistry(auto_describe=False)
    counter = Counter("spur_rpc_requests", "calls", ["method", "code"], registry=theirs)
    histogram = Histogram("spur_rpc_duration_seconds", "time", ["method"], buckets=BUCKETS, registry=theirs)
    return ours, meter, theirs, counter, histogram


def test_the_meter_exposes_what_counter_and_histogram_did() -> None:
    ours, meter, theirs, counter, histogram = _pair()
    rng = random.Random(7)
    methods = ["/spur.v1.Controller/SubmitJob", "/spur.v1.Controller/Heartbeat", "/spur.batch.v1.Batch/SubmitJobs"]
    seconds = [0.0, 0.0005, 0.001, 10.0, 11.0]  # on the bounds, past the last one
    for i in range(2000):
        method, code = rng.choice(methods), rng.choice(["OK", "OK", "RESOURCE_EXHAUSTED"])
        took = seconds[i] if i < len(seconds) else rng.expovariate(200)
        meter.observe(method, code, took)
        name = method.rsplit("/", 1)[-1]
        counter.labels(name, code).inc()
        histogram.labels(name).observe(took)
    assert generate_latest(ours) == generate_latest(theirs)
    totals = meter.totals()
    assert sum(n for n, _ in totals.values()) == 2000
    assert set(totals) == {"SubmitJob", "Heartbeat", "SubmitJobs"}


def test_an_unused_meter_exposes_empty_families() -> None:
    ours, _, theirs, _, _ = _pair()
    assert generate_latest(ours) == generate_latest(theirs)


def test_buckets_must_ascend() -> None:
    with pytest.raises(ValueError, match="ascending"):
        RpcMeter("a", "a", "b", "b", (1.0, 0.5))
