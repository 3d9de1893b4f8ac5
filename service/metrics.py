"""Prometheus metrics of the API and the learner (prometheus-client, default registry).

Multi-worker deployments would need prometheus-client's multiprocess mode; ``serve`` is one
process, so the default registry is exact there.
"""

from __future__ import annotations

import time

from prometheus_client import Counter, Gauge, Histogram

__all__ = [
    "DECISIONS",
    "JOINED",
    "LEARNER_LAG",
    "REQUESTS",
    "REQUEST_LATENCY",
    "REWARDS",
    "SNAPSHOT_AGE",
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
)
SNAPSHOT_AGE = Gauge("boostbandit_snapshot_age_seconds", "Age of the latest snapshot", ["model"])
MODEL_VERSION = Gauge("boostbandit_model_version", "Joined events applied to the model", ["model"])


def update_model_gauges(models) -> None:
    """Refresh the per-model gauges (called when /metrics is scraped)."""
    now = time.time()
    for model in models:
        SNAPSHOT_AGE.labels(model.name).set(max(0.0, now - model.snapshot_time))
        MODEL_VERSION.labels(model.name).set(model.version)
