"""Observability of the scaled-out shape: the learner's own ``/healthz`` and ``/metrics``, a
health check that fails when its loop is stuck, snapshot age measured against unapplied events
(not wall time), and no ``*_created`` samples. Everything runs against a real Redis; scrapes are
parsed with prometheus-client's text parser.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest
import redis
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from service.api.app import create_app
from service.eventlog import EventLog
from service.learner import Learner, limits
from service.models.store import ModelStore
from service.settings import Settings
from tests.conftest import free_port

pytestmark = pytest.mark.slow  # real processes or long runs: the full suite only

ROOT = Path(__file__).resolve().parents[3]
MODEL = {"name": "m", "booster": "banditbbm", "actions": ["a", "b", "c"],
         "params": {"n_learners": 2, "seed": 1}}


def wait_for(condition: Callable[[], object], timeout: float = 20.0, every: float = 0.05):
    """Poll ``condition`` until it returns something truthy (returned), or fail."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = condition()
            if value:
                return value
        except (OSError, urllib.error.URLError):
            pass
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(every)


def get(url: str, timeout: float = 2.0) -> tuple[int, str]:
    """Status and body of GET ``url`` (4xx/5xx included)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def samples(text: str) -> dict[tuple[str, tuple], float]:
    """Every sample of a scrape: (name, sorted labels) -> value."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def traffic(client: TestClient, n: int, name: str = "m") -> None:
    """Create the model ``name`` and log ``n`` decisions with their rewards."""
    assert client.post("/v1/models", json={**MODEL, "name": name}).status_code == 201
    for i in range(n):
        d = client.post(f"/v1/models/{name}/predict", json={"context": {"x": float(i)}}).json()
        r = client.post(f"/v1/models/{name}/feedback",
                        json={"event_id": d["event_id"], "reward": 1})
        assert r.status_code in (200, 202), r.text


def test_learner_process_serves_health_and_metrics(redis_url: str, tmp_path: Path) -> None:
    """``boostbandit learner`` alone: /metrics shows its lag, joined counts and versions;
    /healthz is 200 while it runs, and a stopped process fails the compose health check."""
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "REDIS_URL": redis_url,
           "BOOSTBANDIT_LEARNER_METRICS_PORT": str(port), "BOOSTBANDIT_LEARNER_BLOCK_MS": "20",
           "BOOSTBANDIT_LEARNER_LEASE_SECONDS": "2"}
    out = open(tmp_path / "learner.log", "wb")
    learner = subprocess.Popen([sys.executable, "-m", "service", "learner"], env=env, cwd=ROOT,
                               stdout=out, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: get(f"{base}/healthz")[0] == 200)
        settings = Settings(redis_url=redis_url, run_learner=False)
        with TestClient(create_app(settings)) as client:
            traffic(client, 5)
        key = ("boostbandit_joined_total", (("model", "m"), ("source", "feedback")))
        version = ("boostbandit_model_version", (("model", "m"),))
        # joined (counted), then applied (the version): wait for both
        staleness = ("boostbandit_model_staleness_seconds", (("model", "m"),))
        # joined (counted), then applied (the version), then measured caught up (staleness 0:
        # nothing joined is unapplied, however long ago it was applied)
        scrape = wait_for(lambda: (s := samples(get(f"{base}/metrics")[1])).get(key) == 5
                          and s.get(version) == 5 and s.get(staleness) == 0 and s)
        assert scrape[("boostbandit_learner_lag_seconds", (("model", "m"),))] >= 0
        assert not [name for name, _ in scrape if name.endswith("_created")]
        assert get(f"{base}/nothing")[0] == 404
        # a frozen process (what a deadlock looks like from outside) fails the health check
        learner.send_signal(signal.SIGSTOP)
        with pytest.raises((TimeoutError, urllib.error.URLError)):
            urllib.request.urlopen(f"{base}/healthz", timeout=1)
        learner.send_signal(signal.SIGCONT)
        wait_for(lambda: get(f"{base}/healthz")[0] == 200)
    finally:
        learner.send_signal(signal.SIGCONT)
        learner.send_signal(signal.SIGTERM)
        assert learner.wait(15) == 0, (tmp_path / "learner.log").read_text()
        out.close()
    with pytest.raises(urllib.error.URLError):  # the endpoint goes with the process
        urllib.request.urlopen(f"{base}/healthz", timeout=1)


def test_healthz_fails_when_the_loop_is_stuck(redis_url: str) -> None:
    """A learner whose loop stops making progress (its step blocked by a test hook) answers
    503 within ``learner_stuck_seconds`` (+ polling), and 200 again once it moves."""
    settings = Settings(redis_url=redis_url, learner_metrics_port=free_port(),
                        learner_stuck_seconds=1.0, learner_block_ms=20)
    client = redis.Redis.from_url(redis_url)
    learner = Learner(ModelStore(EventLog(client, limits=limits(settings))), settings, client)
    learner.open_endpoint()  # what `boostbandit learner` does on its main thread
    url = f"http://127.0.0.1:{settings.learner_metrics_port}/healthz"
    release = threading.Event()
    stuck = threading.Event()
    step = learner.step

    def hooked_step() -> None:
        if stuck.is_set():
            release.wait(30)  # the test hook: the loop hangs here
            stuck.clear()
        step()

    learner.step = hooked_step
    learner.start()
    try:
        wait_for(lambda: get(url)[0] == 200, timeout=10)
        stuck.set()
        started = time.monotonic()
        status, body = wait_for(lambda: (r := get(url))[0] == 503 and r, timeout=10)
        assert time.monotonic() - started < settings.learner_stuck_seconds + 5
        assert "stuck" in body
        release.set()
        wait_for(lambda: get(url)[0] == 200, timeout=10)
    finally:
        release.set()
        learner.stop()
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(url, timeout=1)


def test_healthz_fails_while_redis_is_down(private_redis) -> None:
    """The learner's loop cannot reach Redis: its health check says so (503)."""
    settings = Settings(redis_url=private_redis.url, learner_metrics_port=free_port(),
                        learner_block_ms=20, redis_timeout_seconds=0.5)
    client = redis.Redis.from_url(private_redis.url, socket_timeout=0.5)
    learner = Learner(ModelStore(EventLog(client, limits=limits(settings))), settings, client)
    learner.open_endpoint()
    url = f"http://127.0.0.1:{settings.learner_metrics_port}/healthz"
    learner.start()
    try:
        wait_for(lambda: get(url)[0] == 200, timeout=10)
        private_redis.stop()
        status, body = wait_for(lambda: (r := get(url))[0] == 503 and r, timeout=10)
        assert "Redis" in body
        private_redis.start()
        wait_for(lambda: get(url)[0] == 200, timeout=10)
    finally:
        learner.stop()


def test_snapshot_age_measures_unapplied_events_not_wall_time(redis_url: str) -> None:
    """An idle model whose snapshot holds every joined event has snapshot age 0 however long
    ago it was written; a snapshot missing events is as old as the oldest one it misses."""
    settings = Settings(redis_url=redis_url, run_learner=True, learner_block_ms=20,
                        snapshot_every_events=1, replica_refresh_seconds=0.05)
    with TestClient(create_app(settings)) as client:
        traffic(client, 4)
        wait_for(lambda: client.get("/v1/models/m").json()["snapshot_version"] == 4)
        time.sleep(1.2)  # idle: wall time since the snapshot grows, staleness must not
        scrape = wait_for(lambda: samples(client.get("/metrics").text))
        assert scrape[("boostbandit_snapshot_age_seconds", (("model", "m"),))] == 0
        assert scrape[("boostbandit_model_staleness_seconds", (("model", "m"),))] == 0
        assert not [name for name, _ in scrape if name.endswith("_created")]
        total = [v for (name, _), v in scrape.items() if name == "boostbandit_requests_total"]
        assert sum(total) >= 8  # counters are still exported, only their _created went

    settings = Settings(redis_url=redis_url, run_learner=True, learner_block_ms=20,
                        snapshot_every_events=1000, snapshot_every_seconds=3600,
                        replica_refresh_seconds=0.05)
    redis.Redis.from_url(redis_url).flushdb()
    with TestClient(create_app(settings)) as client:
        traffic(client, 3)
        wait_for(lambda: client.get("/v1/models/m").json()["version"] == 3)
        time.sleep(1.0)
        key = ("boostbandit_snapshot_age_seconds", (("model", "m"),))
        first = wait_for(lambda: samples(client.get("/metrics").text).get(key, 0) >= 1.0
                         and samples(client.get("/metrics").text)[key])
        assert client.get("/v1/models/m").json()["snapshot_version"] == 0
        time.sleep(0.5)  # the unsnapshotted events age: so does the snapshot
        # the gauge is measured by the refresh thread: wait until it has seen the time pass
        wait_for(lambda: samples(client.get("/metrics").text)[key] >= first + 0.4)


def test_worker_serves_health_and_metrics(redis_url: str) -> None:
    """The offline worker's endpoint: 200 once its loop ran, /metrics parses, gone at stop."""
    from service.worker import Worker

    settings = Settings(redis_url=redis_url, worker_metrics_port=free_port(),
                        worker_block_ms=20, worker_stuck_seconds=1.0)
    worker = Worker(redis.Redis.from_url(redis_url), settings)
    worker.open_endpoint()
    base = f"http://127.0.0.1:{settings.worker_metrics_port}"
    worker.start()
    try:
        wait_for(lambda: get(f"{base}/healthz")[0] == 200, timeout=10)
        status, text = get(f"{base}/metrics")
        assert status == 200 and list(text_string_to_metric_families(text))
    finally:
        worker.stop()
        worker.join(5)
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f"{base}/healthz", timeout=1)
