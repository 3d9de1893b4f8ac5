"""Replica freshness: the learner publishes a fenced serving copy between full snapshots, and an
API replica loads it (real Redis, a real learner thread, the real app in replica mode).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

import pytest
import redis
from fastapi.testclient import TestClient

from service.api.app import create_app
from service.eventlog import EventLog, keys
from service.eventlog.log import LeaseLost
from service.learner import Learner, limits
from service.models.store import ModelStore, restore
from service.settings import Settings
from tests.service.learner.test_observability import MODEL, wait_for


def _learner(settings: Settings) -> Learner:
    client = redis.Redis.from_url(settings.redis_url)
    return Learner(ModelStore(EventLog(client, limits=limits(settings))), settings, client)


@contextlib.contextmanager
def _run(redis_url: str, publish_seconds: float, n: int) -> Iterator[tuple[TestClient, Learner]]:
    """A learner (full snapshots: never, in practice) and a replica serving ``n`` feedbacks;
    both stopped on exit, whatever happened."""
    settings = Settings(redis_url=redis_url, learner_block_ms=20, snapshot_every_events=10**6,
                        snapshot_every_seconds=3600, serving_publish_seconds=publish_seconds)
    learner = _learner(settings)
    replica = Settings(redis_url=redis_url, run_learner=False, replica_refresh_seconds=0.05)
    with contextlib.ExitStack() as stack:
        learner.start()
        stack.callback(learner.stop)
        client = stack.enter_context(TestClient(create_app(replica)))
        assert client.post("/v1/models", json=MODEL).status_code == 201
        for i in range(n):
            d = client.post("/v1/models/m/predict", json={"context": {"x": float(i)}}).json()
            client.post("/v1/models/m/feedback", json={"event_id": d["event_id"],
                                                       "reward": i % 2})
        yield client, learner


@pytest.mark.slow
def test_replica_loads_the_published_serving_copy(redis_url: str) -> None:
    """Without a new full snapshot, the replica reaches the learner's version through the
    published copy, which decides exactly like the whole model."""
    with _run(redis_url, publish_seconds=0.1, n=6) as (client, learner):
        wait_for(lambda: client.get("/v1/models/m").json()["version"] == 6, timeout=30)
        log = client.app.state.store.log
        assert log.snapshot_meta("m")[0] == 0  # only the initial snapshot: the copy did it
        info = client.get("/v1/models/m").json()  # the copy is not reported as a snapshot
        assert (info["version"], info["snapshot_version"]) == (6, 0)
        served = client.app.state.store.get("m")
        assert served.serving_copy
        whole = restore(log, served.config)  # snapshot 0 + every joined event
        assert whole.version == served.version == 6
        for i in range(8):
            a, _ = served.decide({"x": i / 2}, f"probe{i}")
            b, _ = whole.decide({"x": i / 2}, f"probe{i}")
            assert a.action == b.action and a.probabilities.tolist() == b.probabilities.tolist()
        scrape = client.get("/metrics").text
        assert 'boostbandit_model_staleness_seconds{model="m"} 0.0' in scrape


@pytest.mark.slow
def test_without_publishing_the_replica_waits_for_a_snapshot(redis_url: str) -> None:
    """serving_publish_seconds=0: the replica stays at the latest full snapshot (version 0)
    and its staleness gauge says how old the oldest event it misses is."""
    with _run(redis_url, publish_seconds=0, n=3) as (client, learner):
        wait_for(lambda: learner.store.peek("m") is not None
                 and learner.store.peek("m").version == 3, timeout=30)
        time.sleep(0.6)
        assert client.get("/v1/models/m").json()["version"] == 0
        line = wait_for(lambda: [
            ln for ln in client.get("/metrics").text.splitlines()
            if ln.startswith('boostbandit_model_staleness_seconds{model="m"}')
            and float(ln.split()[-1]) >= 0.5
        ])
        assert line


def test_publishing_is_fenced_and_monotonic(redis_url: str) -> None:
    """Only the lease holder publishes, and an older copy never replaces a newer one."""
    settings = Settings(redis_url=redis_url)
    log = EventLog(redis.Redis.from_url(redis_url))
    replica = TestClient(create_app(Settings(redis_url=redis_url, run_learner=False)))
    with replica:
        assert replica.post("/v1/models", json=MODEL).status_code == 201
    config = log.config("m")
    learner = _learner(settings)
    assert learner.hold("m") == 2
    lease = learner.held("m")
    with pytest.raises(LeaseLost):
        log.publish_serving(config, b"x", 5, "1-0", lease + "stale")
    assert log.publish_serving(config, b"copy5", 5, "5-0", lease)
    assert not log.publish_serving(config, b"copy4", 4, "4-0", lease)
    assert log.serving_meta("m") == (5, config.uid)
    snap = log.load_snapshot("m", serving=True)
    assert (snap["version"], snap["blob"], snap["serving"]) == (5, b"copy5", True)
    assert log.load_snapshot("m")["version"] == 0  # the full snapshot is untouched
    learner.release_all()
    assert log.delete_model("m")
    assert log.serving_meta("m") is None and not log.r.exists(keys("m")["serving_copy"])


@pytest.mark.slow
def test_a_slow_publish_spaces_out_the_next(redis_url: str) -> None:
    """A copy that took t seconds to publish waits t / PUBLISH_DUTY before the next one."""
    with _run(redis_url, publish_seconds=0.1, n=2) as (client, learner):
        wait_for(lambda: client.get("/v1/models/m").json()["version"] == 2, timeout=30)
        model = learner.store.peek("m")
        wait_for(lambda: not learner._publishing["m"].is_alive())  # its timing is recorded
        model.publish_seconds = 1000.0  # as if the last publish took that long
        for i in range(2):
            d = client.post("/v1/models/m/predict", json={"context": {"x": 9.0 + i}}).json()
            client.post("/v1/models/m/feedback", json={"event_id": d["event_id"], "reward": 1})
        wait_for(lambda: model.version == 4, timeout=30)
        time.sleep(0.6)  # several publish intervals and replica refreshes
        assert client.get("/v1/models/m").json()["version"] == 2
        model.publish_seconds = 0.0
        wait_for(lambda: client.get("/v1/models/m").json()["version"] == 4, timeout=30)


@pytest.mark.slow
def test_a_models_export_frequency_overrides_the_setting(redis_url: str) -> None:
    """A model's ``export_seconds`` (Personalizer's modelExportFrequency), changed in place,
    reaches the running learner: with the setting at 0 (never), the model still publishes."""
    from dataclasses import replace

    with _run(redis_url, publish_seconds=0, n=3) as (client, learner):
        wait_for(lambda: learner.store.peek("m") is not None
                 and learner.store.peek("m").version == 3, timeout=30)
        time.sleep(0.3)
        assert client.get("/v1/models/m").json()["version"] == 0  # nothing published
        log = client.app.state.store.log
        config = log.config("m")
        assert log.replace_config(replace(config, export_seconds=0.1), config.uid)
        wait_for(lambda: client.get("/v1/models/m").json()["version"] == 3, timeout=30)
        assert learner.store.peek("m").config.export_seconds == 0.1  # same model, in place
        assert learner.store.peek("m").config.uid == config.uid


@pytest.mark.slow
def test_a_renewed_model_serves_its_old_version_until_the_new_one_is_ready(
        redis_url: str) -> None:
    """A renewal (a new uid, e.g. a Personalizer configuration change) never makes a replica
    serve an untrained model, nor a request wait for a rebuild: the old version serves until
    the learner has rebuilt the new one and snapshotted it, then the replica swaps it in."""
    with _run(redis_url, publish_seconds=0, n=4) as (client, learner):
        wait_for(lambda: learner.store.peek("m") is not None
                 and learner.store.peek("m").version == 4, timeout=30)
        store = client.app.state.store
        log = store.log
        old = log.config("m")
        before = store.get("m").version
        new = old.renewed(default_reward=0.25)
        assert log.replace_config(new, old.uid)
        store.sync_configs(log.configs())
        assert store.get("m").config.uid == old.uid  # still the old version, at once
        assert store.get("m").version == before
        wait_for(lambda: store.get("m").config.uid == new.uid, timeout=30)
        assert store.get("m").version == 4  # the new version, rebuilt from the 4 events
        assert learner.store.peek("m").config.uid == new.uid
