"""Prometheus metrics of the API, the learner and the offline worker (prometheus-client), and
the small HTTP endpoint (``/healthz``, ``/metrics``) of a learner or worker process running alone.

``serve`` is one process and uses the default registry. With several worker processes (uvicorn
``--workers 2`` in docker-compose.yml) set ``PROMETHEUS_MULTIPROC_DIR`` to an empty directory:
every worker then writes its samples there and ``/metrics`` adds them up (counters and histograms
summed, gauges the most recent value), prometheus-client's multiprocess mode.

No ``*_created`` samples are exported (they double every counter and histogram series for a
timestamp Prometheus does not use).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
    multiprocess,
)

disable_created_metrics()

log = logging.getLogger("boostbandit.metrics")

__all__ = [
    "AHEAD_OF_LOG",
    "DECISIONS",
    "INCOMPLETE_CLOSED",
    "JOINED",
    "JOINED_REWARD",
    "LEARNER_LAG",
    "MODEL_STALENESS",
    "MODEL_VERSION",
    "REQUESTS",
    "REQUEST_LATENCY",
    "REWARDS",
    "SNAPSHOT_AGE",
    "EVALUATION_ROUNDS",
    "TRAININGS",
    "count_refusal",
    "count_training",
    "exposition",
    "serve_consumer",
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
REFUSALS = Counter("boostbandit_redis_refusals_total",
                   "Requests answered 503 because Redis refused a write", ["kind"])
AHEAD_OF_LOG = Counter(
    "boostbandit_model_ahead_of_log_total",
    "Models (a snapshot at load, or a learner's after Redis came back) found to have applied "
    "joined events the log lost, and rebuilt from the log", ["model"],
)
INCOMPLETE_CLOSED = Counter(
    "boostbandit_incomplete_requests_closed_total",
    "Connections closed because their request did not arrive within api_request_timeout_seconds",
)
REWARDS = Counter("boostbandit_rewards_total", "Feedback logged (first per event)", ["model"])
JOINED = Counter(
    "boostbandit_joined_total", "Joined events applied by this learner", ["model", "source"]
)
JOINED_REWARD = Counter(
    "boostbandit_joined_reward",
    "Sum of the rewards of the joined events (divided by boostbandit_joined_total: the "
    "average reward)",
    ["model", "source"],
)
LEARNER_LAG = Gauge(
    "boostbandit_learner_lag_seconds",
    "Seconds from the latest joined feedback's arrival to its join",
    ["model"],
    multiprocess_mode="mostrecent",
)
SNAPSHOT_AGE = Gauge(
    "boostbandit_snapshot_age_seconds",
    "Age of the oldest joined event not in the model's latest snapshot (0: it holds them all)",
    ["model"],
    multiprocess_mode="mostrecent",
)
MODEL_STALENESS = Gauge(
    "boostbandit_model_staleness_seconds",
    "Age of the oldest joined event this process's copy of the model has not applied (0: "
    "caught up); on an API replica, how far its serving copy trails the joined stream",
    ["model"],
    multiprocess_mode="mostrecent",
)
MODEL_VERSION = Gauge(
    "boostbandit_model_version",
    "Joined events applied to the model",
    ["model"],
    multiprocess_mode="mostrecent",
)


TRAININGS = Counter(
    "boostbandit_worker_trainings_total",
    "Policies the offline worker trained and stored, by whether it published them",
    ["model", "published"],
)
TRAINING_SECONDS = Histogram(
    "boostbandit_worker_training_seconds",
    "Seconds of one training (fit, off-policy evaluation and storing the policy)",
    ["model"],
    buckets=(0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 900.0),
)
LAST_TRAINING = Gauge(
    "boostbandit_worker_last_training_timestamp_seconds",
    "Unix time of the worker's latest stored policy",
    ["model"],
    multiprocess_mode="mostrecent",
)
EVALUATION_ROUNDS = Counter(
    "boostbandit_worker_evaluation_rounds_total",
    "Rounds of the Personalizer evaluations and auto-optimization the worker ran, by outcome",
    ["outcome"],
)


def count_training(model: str, published: bool, seconds: float, now: float) -> None:
    """One more policy trained and stored by the worker."""
    TRAININGS.labels(model, "true" if published else "false").inc()
    TRAINING_SECONDS.labels(model).observe(seconds)
    LAST_TRAINING.labels(model).set(now)


def count_refusal(kind: str) -> None:
    """One more request answered 503 for a Redis refusal of ``kind`` (``OOM``, ``MISCONF``...)."""
    REFUSALS.labels(kind).inc()


def exposition() -> bytes:
    """The text exposition: this process's registry, or all workers' in multiprocess mode."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        return generate_latest(registry)
    return generate_latest(REGISTRY)


def update_model_gauges(models) -> None:
    """Set the per-model gauges (called when /metrics is scraped) to the models given, and only
    those; the staleness figures are those of the latest
    :meth:`~service.models.store.ModelStore.measure_staleness`."""
    for gauge in (MODEL_VERSION, MODEL_STALENESS, SNAPSHOT_AGE):
        gauge.clear()  # a deleted model's (or one another learner took over) series goes away
    for model in models:
        MODEL_VERSION.labels(model.name).set(model.version)
        if model.staleness is not None:
            MODEL_STALENESS.labels(model.name).set(model.staleness)
        if model.snapshot_staleness is not None:
            SNAPSHOT_AGE.labels(model.name).set(model.snapshot_staleness)


def serve_consumer(
    alive: Callable[[], tuple[bool, str]],
    host: str,
    port: int,
    before_scrape: Callable[[], None] | None = None,
) -> ThreadingHTTPServer:
    """Serve ``/healthz`` (200, or 503 when ``alive()`` says the loop is not working) and
    ``/metrics`` (``before_scrape()`` first, e.g. to measure staleness) on ``host:port`` from
    a daemon thread; returns the server (``server.server_address``; ``shutdown()`` stops it).

    >>> server = serve_consumer(lambda: (True, "ok"), "127.0.0.1", 0)
    >>> import urllib.request
    >>> url = "http://127.0.0.1:%d/healthz" % server.server_address[1]
    >>> urllib.request.urlopen(url, timeout=5).read()
    b'ok\\n'
    >>> server.shutdown(); server.server_close()
    """

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            path = self.path.split("?", 1)[0]
            if path == "/healthz":
                ok, reason = alive()
                self._send(200 if ok else 503, "text/plain; charset=utf-8",
                           f"{reason}\n".encode())
            elif path == "/metrics":
                try:
                    if before_scrape is not None:
                        before_scrape()
                except Exception as exc:  # Redis down: still export what this process knows
                    log.warning("measuring before a scrape failed: %s", exc)
                self._send(200, CONTENT_TYPE_LATEST, exposition())
            else:
                self._send(404, "text/plain; charset=utf-8", b"not found: /healthz, /metrics\n")

        def _send(self, status: int, content_type: str, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args) -> None:  # noqa: A002 - scrapes are not news
            log.debug(format, *args)

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="boostbandit-health",
                     daemon=True).start()
    return server
