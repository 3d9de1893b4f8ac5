"""The event log on a real Redis Cluster of three primaries (issue 43): every key and script of
a model stays in its slot, the learner reads the models' streams node by node, and the API
decides, records feedback and serves learned models with redis-py's cluster clients, in one
process and as a replica beside a learner process' loop (``BOOSTBANDIT_REDIS_CLUSTER``)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from service.api.app import create_app
from service.eventlog import EventLog, connect, keys
from service.learner import Learner, limits
from service.settings import Settings
from service.store import ModelStore
from tests.cluster import RedisCluster3, cluster_ports
from tests.test_event_core import decide_and_log, new_model
from tests.test_service_api import FAST, wait_for


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisCluster3]:
    folder = Path(tmp_path_factory.mktemp("cluster"))
    server = RedisCluster3(folder, cluster_ports())
    server.start()
    yield server
    server.stop()


@pytest.fixture
def url(cluster: RedisCluster3) -> str:
    cluster.flush()
    return cluster.url


def test_the_learner_learns_models_spread_over_the_primaries(url: str) -> None:
    client = connect(url, 2.0, cluster=True)
    log = EventLog(client)
    names = [f"m{i}" for i in range(6)]
    models = {name: new_model(log, name=name) for name in names}
    slots = {client.keyslot(keys(name)["joined"]) for name in names}
    owners = {client.nodes_manager.get_node_from_slot(slot).port for slot in slots}
    assert len(owners) >= 2  # the models really are on different primaries
    for name in names:  # every key of a model in its slot
        slot = client.keyslot(keys(name)["joined"])
        assert {client.keyslot(k) for k in keys(name).values()} == {slot}
    settings = Settings(redis_url=url, redis_cluster=True, learner_block_ms=10,
                        learner_lease_seconds=5, snapshot_every_events=5)
    learner = Learner(ModelStore(EventLog(client, limits=limits(settings))), settings, client)
    for name, model in models.items():
        for i in range(12):
            event_id = decide_and_log(log, model, i)
            log.append_feedback(name, event_id, {"EventId": event_id, "ts": time.time(),
                                                  "reward": float(i % 2), "label": None})
    for _ in range(6):
        learner.step()
    assert {name: learner.store.get(name).version for name in names} == dict.fromkeys(names, 12)
    assert all(log.snapshot_meta(name)[0] >= 10 for name in names)  # snapshots every 5 events


@pytest.mark.parametrize("shape", ["one process", "replica"])
def test_the_api_decides_and_learns_on_the_cluster(url: str, shape: str) -> None:
    one = shape == "one process"
    settings = Settings(redis_url=url, redis_cluster=True,
                        **{**FAST, "run_learner": one, "redis_async": "auto" if one else "on"})
    learner = None
    if not one:  # the scaled-out shape: the learner in a loop of its own
        client = connect(url, 2.0, cluster=True)
        learner = Learner(ModelStore(EventLog(client, limits=limits(settings))), settings, client)
        learner.start()
    try:
        with TestClient(create_app(settings)) as c:
            names = [f"api{i}" for i in range(4)]
            for name in names:
                assert c.post("/v1/models", json={"name": name, "booster": "banditbbm",
                                                  "actions": ["a", "b", "c"],
                                                  "params": {"n_learners": 3, "seed": 7}}
                              ).status_code == 201
            store = learner.store if learner else c.app.state.store
            wait_for(lambda: all(store.get(n) is not None and store.get(n).owned
                                 for n in names), 10)
            for name in names:
                for i in range(10):
                    r = c.post(f"/v1/models/{name}/predict",
                               json={"context": {"x": float(i), "s": "ab"[i % 2]}})
                    assert r.status_code == 200, r.text
                    assert c.post(f"/v1/models/{name}/feedback", json={
                        "event_id": r.json()["event_id"], "reward": 1.0}).status_code == 200
            wait_for(lambda: all(store.get(n).version == 10 for n in names), 10)
            assert [c.get(f"/v1/models/{n}").json()["rewards"] for n in names] == [10] * 4
            assert c.get("/readyz").status_code == 200
    finally:
        if learner is not None:
            learner.stop()


def test_a_cluster_without_a_url_is_refused() -> None:
    with pytest.raises(RuntimeError, match="BOOSTBANDIT_REDIS_CLUSTER needs REDIS_URL"):
        with TestClient(create_app(Settings(redis_url="", redis_cluster=True, run_learner=True))):
            pass
