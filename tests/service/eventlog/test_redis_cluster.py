"""The event log on a real Redis Cluster of three primaries: every key and script of
a model stays in its slot, the learner reads the models' streams node by node, and the API
decides, records feedback and serves learned models with redis-py's cluster clients, in one
process and as a replica beside a learner process' loop (``BOOSTBANDIT_REDIS_CLUSTER``)."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from fastapi.testclient import TestClient

from service.api.app import create_app
from service.eventlog import EventLog, OutcomeUnknown, connect, keys, scripts
from service.eventlog.replicas import replicated
from service.learner import Learner, limits
from service.models.store import ModelStore
from service.settings import Settings
from tests.cluster import RedisCluster3, cluster_ports
from tests.conftest import free_port
from tests.service.api.test_service_api import FAST, make_model, wait_for
from tests.service.eventlog.test_event_core import decide_and_log, new_model


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


@pytest.mark.slow
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


@pytest.mark.slow
@pytest.mark.parametrize("shape", ["one process", "replica"])
def test_the_api_decides_and_learns_on_the_cluster(url: str, shape: str) -> None:
    one = shape == "one process"
    settings = Settings(redis_url=url, redis_cluster=True,
                        **{**FAST, "run_learner": one, "redis_async": "auto"})
    learner = None
    if not one:  # the scaled-out shape: the learner in a loop of its own
        client = connect(url, 2.0, cluster=True)
        learner = Learner(ModelStore(EventLog(client, limits=limits(settings))), settings, client)
        learner.start()
    try:
        with TestClient(create_app(settings)) as c:
            assert c.app.state.log.ar is None  # auto: the blocking client on a cluster
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


def test_a_write_its_node_redirects_is_an_unknown_outcome_not_an_error(
        cluster: RedisCluster3, url: str) -> None:
    """A node that no longer serves the keys' slot (a failover moved it) answers ``MOVED``,
    which redis-py raises as a ``MovedError`` whose message drops the code: the write ran
    nowhere, so its outcome is unknown (503, retry), not a server error (a fault run on a
    cluster once answered a feedback 500 from it)."""
    client = connect(url, 2.0, cluster=True)
    key = "bb:{moved}:k"
    owner = client.get_node_from_key(key).port
    wrong = redis.Redis(port=next(p for p in cluster.ports if p != owner), socket_timeout=2)
    script = wrong.register_script("return redis.call('SET', KEYS[1], ARGV[1])")
    with pytest.raises(OutcomeUnknown):
        replicated(wrong, script, [{"keys": [key], "args": ["1"]}], 0, 100)
    assert client.get(key) is None  # redirected: nothing written
    assert replicated(client, client.register_script(
        "return redis.call('SET', KEYS[1], ARGV[1])"), [{"keys": [key], "args": ["1"]}],
        0, 100) == [b"OK"]  # the node that serves it writes


def test_a_cluster_without_a_url_is_refused() -> None:
    with pytest.raises(RuntimeError, match="BOOSTBANDIT_REDIS_CLUSTER needs REDIS_URL"):
        with TestClient(create_app(Settings(redis_url="", redis_cluster=True, run_learner=True))):
            pass


def _record_scripts(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, list]]:
    """Every Lua script call from now on as ``(script, keys)``: the registered scripts of
    service/eventlog/scripts.py by name, the inline ones by their text."""
    from redis.commands.core import Script, ScriptCommands

    by_sha = {hashlib.sha1(getattr(scripts, n).encode()).hexdigest(): n for n in dir(scripts)
              if n.isupper() and isinstance(getattr(scripts, n), str)}
    calls: list[tuple[str, list]] = []
    call, evaluate = Script.__call__, ScriptCommands.eval

    def recorded_call(self, keys=None, args=None, client=None):
        calls.append((by_sha.get(self.sha, self.script), list(keys or [])))
        return call(self, keys, args, client)

    def recorded_eval(self, script, numkeys, *keys_and_args):
        calls.append((script, list(keys_and_args[:int(numkeys)])))
        return evaluate(self, script, numkeys, *keys_and_args)

    monkeypatch.setattr(Script, "__call__", recorded_call)
    monkeypatch.setattr(ScriptCommands, "eval", recorded_eval)
    return calls


def _inline_scripts() -> int:
    """How many ``.eval(`` calls (inline scripts) the service's code makes."""
    return sum(path.read_text().count(".eval(") for path in Path("service").rglob("*.py"))


@pytest.mark.slow
def test_every_script_keeps_its_keys_in_one_slot(url: str, monkeypatch) -> None:
    """Every Lua script the service runs (the registered ones and the inline ones), run on the
    cluster: its keys hash to one slot, so a cluster never answers CROSSSLOT."""
    calls = _record_scripts(monkeypatch)
    client = connect(url, 2.0, cluster=True)
    log = EventLog(client)
    model = new_model(log, name="slots")
    settings = Settings(redis_url=url, redis_cluster=True, learner_block_ms=10,
                        learner_lease_seconds=5, snapshot_every_events=5)
    learner = Learner(ModelStore(EventLog(client, limits=limits(settings))), settings, client)
    for i in range(6):
        event_id = decide_and_log(log, model, i)
        log.append_feedback("slots", event_id, {"EventId": event_id, "ts": time.time(),
                                                "reward": 1.0, "label": None})
    for _ in range(4):
        learner.step()
    learner.stop()
    took, held = log.lease("slots", "test", 5.0)
    assert took == 2
    log.staleness("slots", "0-0")
    log.publish_serving(model.config, b"copy", 99, "0-0", held)
    log.release("slots", held)
    assert log.replace_config(model.config, model.config.uid)
    log.defer_decision("slots", "late", {"decision": 1}, time.time(), 30.0)
    log.deferred_reward("slots", "late", {"EventId": "late", "reward": 1.0, "ts": time.time()})
    doc = {"id": "e1", "status": "pending", "creationTime": "2026-01-01T00:00:00Z"}
    assert log.add_evaluation(doc) and log.update_evaluation({**doc, "status": "succeeded"})
    assert log.add_feature_importance("f1", {"id": "f1", "status": "NotSubmitted"})
    assert log.set_feature_importance("f1", {"id": "f1", "status": "Succeeded"})
    assert log.claim_evaluation("e1", "test", 5.0)
    assert log.renew_evaluation_claim("e1", "test", 5.0)
    registered = {n for n in dir(scripts) if n.isupper() and not n.startswith("_")}
    ran = {name for name, _ in calls}
    assert registered <= ran, registered - ran
    assert len(ran - registered) == _inline_scripts()
    for name, script_keys in calls:
        assert len({client.keyslot(k) for k in script_keys}) == 1, (name, script_keys)


def test_an_older_log_s_personalizer_keys_move_under_their_hash_tag(redis_url: str) -> None:
    """Evaluations and feature importances kept under their names from before the hash tag
    move to the tagged names when the API starts (ModelStore.load_all), once."""
    from service.eventlog.personalizer import UNTAGGED

    client = redis.Redis.from_url(redis_url)
    for old in UNTAGGED:
        if old.endswith(":pending"):
            client.sadd(old, "x")
        else:
            client.hset(old, "x", '{"id": "x", "status": "pending"}')
    log = EventLog(client)
    ModelStore(log).load_all()
    assert [client.exists(old) for old in UNTAGGED] == [0] * 4
    assert [client.exists(new) for new in UNTAGGED.values()] == [1] * 4
    assert log.evaluation("x") == {"id": "x", "status": "pending"}
    assert log.move_untagged_keys() == 0  # nothing left to move


@pytest.mark.slow
@pytest.mark.parametrize("redis_async", ["off", "on"])
def test_a_write_no_replica_acknowledged_is_503_then_counts_with_one(private_redis, tmp_path,
                                                                     redis_async) -> None:
    """``redis_replica_acks=1``: without a replica a predict answers 503 "outcome unknown" (it
    may not survive a failover); once a replica follows the server, predict and feedback count."""
    settings = Settings(redis_url=private_redis.url, redis_cluster=False, redis_replica_acks=1,
                        redis_replica_ack_ms=100, **{**FAST, "redis_async": redis_async})
    with TestClient(create_app(settings)) as c:
        make_model(c)
        r = c.post("/v1/models/m1/predict", json={"context": {"x": 1.0}, "event_id": "e1"})
        assert r.status_code == 503, r.text
        assert "0 of 1 replicas acknowledged" in r.json()["detail"] and "Retry" in r.text
        port = free_port()
        replica = subprocess.Popen(
            [shutil.which("redis-server"), "--port", str(port), "--bind", "127.0.0.1", "--dir",
             str(tmp_path), "--save", "", "--replicaof", "127.0.0.1", str(private_redis.port)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            follower = redis.Redis(port=port, socket_timeout=2)
            wait_for(lambda: _in_sync(follower), 10)
            r = c.post("/v1/models/m1/predict", json={"context": {"x": 1.0}, "event_id": "e1"})
            assert r.status_code == 200, r.text  # the retry of the same event id is safe
            assert c.post("/v1/models/m1/feedback", json={"event_id": "e1", "reward": 1.0}
                          ).status_code == 200
            assert follower.xlen(keys("m1")["decisions"]) == 1  # on the replica, once
            wait_for(lambda: c.get("/v1/models/m1").json()["version"] == 1, 10)
        finally:
            replica.terminate()
            replica.wait(10)


def _in_sync(follower: redis.Redis) -> bool:
    try:
        return follower.info("replication").get("master_link_status") == "up"
    except redis.RedisError:
        return False


def test_the_replica_wait_must_end_before_the_client_gives_up() -> None:
    with pytest.raises(ValueError, match="redis_replica_ack_ms .* must be shorter"):
        Settings(redis_replica_acks=1, redis_replica_ack_ms=2000, redis_timeout_seconds=2.0)
    assert Settings(redis_replica_acks=0, redis_replica_ack_ms=2000).redis_replica_acks == 0
