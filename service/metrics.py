"""Prometheus metrics of the API and the learner (prometheus-client).

``serve`` is one process and uses the default registry. With several worker processes (uvicorn
``--workers 2`` in docker-compose.yml) set ``PROMETHEUS_MULTIPROC_DIR`` to an empty directory:
every worker then writes its samples there and ``/metrics`` adds them up (counters and histograms
summed, gauges the most recent value), prometheus-client's multiprocess mode.
"""

from __future__ import annotations

import os
import time

from prometheus_client import (
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
)

__all__ = [
    "DECISIONS",
    "JOINED",
    "LEARNER_LAG",
    "REQUESTS",
    "REQUEST_LATENCY",
    "REWARDS",
    "SNAPSHOT_AGE",
    "exposition",
    "update_model_gauges",
]

REQUESTS = Counter("boostbandit_requests_total", "HTTP requests", ["route", "method", "status"])
REQUEST_LATENCY = Histogram(
    "boostbandit_request_seconds",
    "HTTP request latency",
    ["route", "method"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0),
)
DECISIONS = Counter("boostbandit_decisions_total", "Decisions logged", ["model"])
REWARDS = Counter("boostbandit_rewards_total", "Feedback logged (first per event)", ["model"])
JOINED = Counter(
    "boostbandit_joined_total", "Joined events applied by this learner", ["model", "source"]
)
LEARNER_LAG = Gauge(
    "boostbandit_learner_lag_seconds",
    "Age of the oldest feedback or expired decision the learner has not applied yet",
    ["model"],
    multiprocess_mode="mostrecent",
)
SNAPSHOT_AGE = Gauge(
    "boostbandit_snapshot_age_seconds",
    "Age of the latest snapshot",
    ["model"],
    multiprocess_mode="mostrecent",
)
MODEL_VERSION = Gauge(
    "boostbandit_model_version",
    "Joined events applied to the model",
    ["model"],
    multiprocess_mode="mostrecent",
)


def exposition() -> bytes:
    """The text exposition: this process's registry, or all workers' in multiprocess mode."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        return generate_latest(registry)
    return generate_latest(REGISTRY)


def update_model_gauges(models) -> None:
    """Refresh the per-model gauges (called when /metrics is scraped)."""
    now = time.time()
    for model in models:
        SNAPSHOT_AGE.labels(model.name).set(max(0.0, now - model.snapshot_time))
        MODEL_VERSION.labels(model.name).set(model.version)
