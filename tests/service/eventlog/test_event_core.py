"""The event core under lag, faults and a second learner (issue: a trustworthy event core).

Each test reproduces one way the join -> apply -> snapshot path used to lose or replace a reward,
or an input that broke a model, against a real redis-server; the processes-level versions (real
API and learner processes, SIGSTOP, kill -9, a dropping proxy) are in
tests/service/eventlog/test_faults.py.
"""

from __future__ import annotations

import pickle
import threading
import time
from collections.abc import Iterator

import numpy as np
import pytest
import redis
from fastapi.testclient import TestClient

from service.api.app import create_app
from service.domain import ModelConfig
from service.eventlog import EventLog, LeaseLost, Limits, keys
from service.events import decision_event, loads
from service.learner import Learner
from service.models.runtime import ServedModel
from service.models.store import ModelStore, restore, save_snapshot
from service.settings import Settings
from tests.service.api.test_service_api import ACTIONS, FAST, make_model

PROBES = [{"x": float(i % 7), "y": "abc"[i % 3]} for i in range(40)]


def fold(log: EventLog, config: ModelConfig) -> ServedModel:
    """The model the joined stream defines: a fresh booster applying it from the start."""
    model = ServedModel(config, config.build())
    for sid, event in log.joined_after(config.name, "0-0"):
        model.apply(event, sid)
    return model


def same_decisions(a: ServedModel, b: ServedModel) -> bool:
    """Same probabilities on a probe set (the model state, seen through its decisions)."""
    return all(
        np.array_equal(a.decide(x, f"probe{i}")[0].probabilities,
                       b.decide(x, f"probe{i}")[0].probabilities)
        for i, x in enumerate(PROBES)
    )


@pytest.fixture
def log(redis_url: str) -> EventLog:
    return EventLog(redis.Redis.from_url(redis_url))


def new_model(log: EventLog, name: str = "m", wait: float = 0.5, **params) -> ServedModel:
    config = ModelConfig(name=name, booster="adabandit", actions=ACTIONS,
                         params={"n_learners": 3, "seed": 3, **params},
                         reward_wait_seconds=wait, default_reward=0.0)
    model = ServedModel(config, config.build())
    save_snapshot(log, model)
    assert log.add_config(config)
    return model


def decide_and_log(log: EventLog, model: ServedModel, i: int) -> str:
    event_id = f"e{i}"
    context = PROBES[i % len(PROBES)]
    decision, version = model.decide(context, event_id)
    event = decision_event(event_id, time.time(), version, ACTIONS, context, decision)
    assert log.append_decision(model.config, event_id, event).status == "logged"
    return event_id


def learner_for(log: EventLog, lease: float = 5.0, **extra) -> Learner:
    settings = Settings(redis_url="redis://unused", learner_block_ms=10,
                        learner_lease_seconds=lease, snapshot_every_events=1000, **extra)
    return Learner(ModelStore(log), settings, log.r)


def run_steps(learner: Learner, n: int = 5) -> None:
    for _ in range(n):
        learner.step()


def joined_sources(log: EventLog, name: str) -> dict[str, tuple[str, float]]:
    return {e["EventId"]: (e["bb"]["source"], e["bb"]["reward"])
            for _, e in log.joined_after(name, "0-0")}


# --- 1. a reward recorded within the window always wins over the default -------------------------


@pytest.mark.slow
def test_on_time_rewards_win_after_a_learner_pause(log: EventLog) -> None:
    model = new_model(log, wait=0.5)
    ids = [decide_and_log(log, model, i) for i in range(6)]
    for event_id in ids:  # on time; no learner is reading (paused)
        assert log.append_feedback("m", event_id, {"EventId": event_id, "ts": time.time(),
                                                   "reward": 1.0, "label": None})[0] == "new"
    time.sleep(0.7)  # the pause outlasts the window
    learner = learner_for(log, learner_batch=2)  # one small batch of feedback per step
    run_steps(learner, 2)
    sources = joined_sources(log, "m")
    assert sources == {e: ("feedback", 1.0) for e in ids}


def test_learner_clock_ahead_never_closes_a_window_early(log: EventLog, monkeypatch) -> None:
    model = new_model(log, wait=2.0)
    ids = [decide_and_log(log, model, i) for i in range(3)]
    import service.learner

    real = time.time
    monkeypatch.setattr(service.learner.time, "time", lambda: real() + 3600.0)  # skewed clock
    learner = learner_for(log)
    run_steps(learner, 2)
    assert joined_sources(log, "m") == {}  # Redis's clock decides: the windows are open
    for event_id in ids:
        log.append_feedback("m", event_id, {"EventId": event_id, "ts": real(), "reward": 1.0,
                                            "label": None})
    run_steps(learner, 3)
    assert joined_sources(log, "m") == {e: ("feedback", 1.0) for e in ids}


@pytest.mark.slow
def test_default_reward_only_after_the_window(log: EventLog) -> None:
    model = new_model(log, wait=0.3)
    event_id = decide_and_log(log, model, 0)
    learner = learner_for(log)
    run_steps(learner, 1)
    assert joined_sources(log, "m") == {}
    time.sleep(0.4)
    run_steps(learner, 1)
    assert joined_sources(log, "m") == {event_id: ("default", 0.0)}
    late = log.append_feedback("m", event_id, {"EventId": event_id, "ts": time.time(),
                                               "reward": 1.0, "label": None})
    assert late == ("new", True)  # recorded for the record, flagged late, never joined


# --- 2. anything joined is applied exactly once -----------------------------------------------


def test_failure_between_join_and_apply_loses_nothing(log: EventLog, monkeypatch) -> None:
    model = new_model(log, wait=60.0)
    learner = learner_for(log)
    run_steps(learner, 1)
    ids = [decide_and_log(log, model, i) for i in range(8)]
    for k, event_id in enumerate(ids):
        log.append_feedback("m", event_id, {"EventId": event_id, "ts": time.time(),
                                            "reward": float(k % 2), "label": None})
    real_catch_up = Learner.catch_up
    failures = iter([RuntimeError("injected"), None])

    def failing_catch_up(self, served, *args, **kwargs):
        exc = next(failures, None)
        if exc is not None:
            raise exc
        return real_catch_up(self, served, *args, **kwargs)

    monkeypatch.setattr(Learner, "catch_up", failing_catch_up)
    with pytest.raises(RuntimeError):
        learner.step()  # joined, then failed before applying
    assert len(joined_sources(log, "m")) == 8
    run_steps(learner, 2)
    served = learner.store.peek("m")
    assert served.version == 8
    assert same_decisions(served, fold(log, served.config))


@pytest.mark.slow
def test_lost_reply_of_a_join_is_applied_once(log: EventLog, monkeypatch) -> None:
    model = new_model(log, wait=60.0)
    learner = learner_for(log)
    run_steps(learner, 1)
    ids = [decide_and_log(log, model, i) for i in range(4)]
    for event_id in ids:
        log.append_feedback("m", event_id, {"EventId": event_id, "ts": time.time(),
                                            "reward": 1.0, "label": None})
    real_join = EventLog.join
    lost = {"count": 0}

    def join_then_lose_reply(self, *args, **kwargs):
        result = real_join(self, *args, **kwargs)
        if lost["count"] < 2:
            lost["count"] += 1
            raise redis.ConnectionError("reply lost (injected)")
        return result

    monkeypatch.setattr(EventLog, "join", join_then_lose_reply)
    for _ in range(6):
        try:
            learner.step()
        except redis.ConnectionError:
            learner.on_error()
    served = learner.store.peek("m")
    assert len(joined_sources(log, "m")) == 4 and served.version == 4
    assert same_decisions(served, fold(log, served.config))


def test_a_failing_learn_is_the_same_in_the_fold(log: EventLog, monkeypatch) -> None:
    """An exception inside learning (a bug) is handled the same way live and in a restore."""
    new_model(log, wait=60.0)
    learner = learner_for(log)
    run_steps(learner, 1)
    served = learner.store.peek("m")
    booster_class = type(served.booster)
    real_steps = booster_class.learn_steps

    def flaky(self, x, decision, **kw):
        steps = real_steps(self, x, decision, **kw)
        yield next(steps)  # the first tree learns...
        if x.get("y") == "b":
            raise KeyError("injected bug")  # ...then a bug (half an event, deterministically)
        yield from steps

    monkeypatch.setattr(booster_class, "learn_steps", flaky)
    for i in range(6):
        event_id = decide_and_log(log, served, i)
        log.append_feedback("m", event_id, {"EventId": event_id, "ts": time.time(),
                                            "reward": 1.0, "label": None})
    run_steps(learner, 3)
    assert served.version == 6
    assert same_decisions(served, fold(log, served.config))


def feedback_for(log: EventLog, model: ServedModel, n: int) -> None:
    for i in range(n):
        event_id = decide_and_log(log, model, i)
        log.append_feedback("m", event_id, {"EventId": event_id, "ts": time.time(),
                                            "reward": float(i % 2), "label": None})


def test_a_backlog_applies_while_the_next_batch_joins(log: EventLog) -> None:
    """Past a batch of feedback, a step applies what was joined before it began while the
    joiner thread joins the next batch, which the next step applies; less than a batch is
    applied in the step that joins it. Drained, the model is the fold of the joined stream."""
    model = new_model(log, wait=60.0)
    learner = learner_for(log, learner_batch=4)
    run_steps(learner, 1)
    feedback_for(log, model, 10)
    served = learner.store.peek("m")
    learner.step()
    assert (len(joined_sources(log, "m")), served.version) == (4, 0)
    learner.step()
    assert (len(joined_sources(log, "m")), served.version) == (8, 4)
    learner.step()
    assert (len(joined_sources(log, "m")), served.version) == (10, 10)
    assert same_decisions(served, fold(log, served.config))


def test_a_join_failing_in_the_joiner_fails_the_step(log: EventLog, monkeypatch) -> None:
    """The joiner thread's error is the step's (the consumer loop handles it as before); the
    feedback it read is delivered again, joined and applied once."""
    model = new_model(log, wait=60.0)
    learner = learner_for(log)
    run_steps(learner, 1)
    feedback_for(log, model, 3)
    real_join_many = EventLog.join_many
    threads = []

    def failing_once(self, name, joins, *args, **kwargs):
        if joins:
            threads.append(threading.current_thread().name)
        if len(threads) == 1 and joins:
            raise redis.ConnectionError("injected")
        return real_join_many(self, name, joins, *args, **kwargs)

    monkeypatch.setattr(EventLog, "join_many", failing_once)
    with pytest.raises(redis.ConnectionError):
        learner.step()
    assert joined_sources(log, "m") == {} and threads[0].startswith("joiner")
    learner.on_error()
    run_steps(learner, 2)
    served = learner.store.peek("m")
    assert served.version == 3 and len(joined_sources(log, "m")) == 3
    assert same_decisions(served, fold(log, served.config))


# --- 3. one writer: fenced leases --------------------------------------------------------------


@pytest.mark.slow
def test_a_learner_that_lost_its_lease_writes_nothing(log: EventLog) -> None:
    model = new_model(log, wait=60.0)
    first = learner_for(log, lease=0.3)
    run_steps(first, 1)
    assert first.store.peek("m").owned
    time.sleep(0.4)  # the first learner is paused past its lease
    second = learner_for(log, lease=5.0)
    run_steps(second, 1)
    assert second.store.peek("m").owned
    ids = [decide_and_log(log, model, i) for i in range(4)]
    for event_id in ids:
        log.append_feedback("m", event_id, {"EventId": event_id, "ts": time.time(),
                                            "reward": 1.0, "label": None})
    stale = first.leases["m"]
    with pytest.raises(LeaseLost):  # the resumed first learner tries to join: refused
        log.join("m", ids[0], {"bb": {"source": "default", "reward": 0.0}}, stale)
    with pytest.raises(LeaseLost):  # and to snapshot: refused
        save_snapshot(log, first.store.peek("m"), lease=stale)
    run_steps(first, 2)  # its loop notices at once and stops writing the model
    assert "m" not in first.leases and not first.store.peek("m").owned
    run_steps(second, 2)
    assert joined_sources(log, "m") == {e: ("feedback", 1.0) for e in ids}
    assert second.store.peek("m").version == 4


@pytest.mark.slow
def test_lease_is_renewed_inside_a_long_replay(log: EventLog) -> None:
    model = new_model(log, wait=60.0)
    writer = learner_for(log)
    run_steps(writer, 1)
    for i in range(30):
        event_id = decide_and_log(log, model, i)
        log.append_feedback("m", event_id, {"EventId": event_id, "ts": time.time(),
                                            "reward": 1.0, "label": None})
    run_steps(writer, 3)
    writer.release_all()
    taker = learner_for(log, lease=0.6)
    renewals = []
    real_lease = EventLog.lease

    def slow_lease(self, *args, **kwargs):
        renewals.append(kwargs.get("renew", False))
        return real_lease(self, *args, **kwargs)

    taker.log.lease = slow_lease.__get__(taker.log)  # type: ignore[method-assign]
    real_apply = ServedModel.apply

    def slow_apply(self, event, sid):
        time.sleep(0.05)  # 30 events x 50 ms = 1.5 s, longer than the 0.6 s lease
        return real_apply(self, event, sid)

    ServedModel.apply = slow_apply  # type: ignore[method-assign]
    try:
        run_steps(taker, 1)
    finally:
        ServedModel.apply = real_apply  # type: ignore[method-assign]
    assert sum(renewals) >= 2  # renewed during the replay
    assert log.r.get(keys("m")["lease"]).decode() == taker.leases["m"]
    assert taker.store.peek("m").version == 30


# --- 4. snapshots only between events -------------------------------------------------------


def test_snapshot_waits_for_the_event_being_applied(log: EventLog) -> None:
    model = new_model(log, wait=60.0)
    inside, release = threading.Event(), threading.Event()
    booster_class = type(model.booster)
    real_steps = booster_class.learn_steps

    def gated(self, x, decision, **kw):
        steps = real_steps(self, x, decision, **kw)
        yield next(steps)
        inside.set()
        assert release.wait(10)
        yield from steps

    event_id = decide_and_log(log, model, 0)
    event = loads(log.r.hget(keys("m")["event_prefix"] + event_id, "d"))
    joined = {**event, "bb": {**event["bb"], "reward": 1.0, "label": None}}
    booster_class.learn_steps = gated  # type: ignore[method-assign]
    try:
        applier = threading.Thread(target=model.apply, args=(joined, "1-0"))
        applier.start()
        assert inside.wait(10)
        snapshots = []
        dumper = threading.Thread(target=lambda: snapshots.append(model.dump(isolated=False)))
        dumper.start()
        time.sleep(0.2)
        assert not snapshots  # waits: half an event is never snapshotted
        release.set()
        applier.join(10)
        dumper.join(10)
    finally:
        booster_class.learn_steps = real_steps  # type: ignore[method-assign]
    assert snapshots[0].version == 1 and snapshots[0].joined_id == "1-0"


# --- 5. idempotent predict, no blind retries -----------------------------------------------------


@pytest.fixture
def client(redis_url: str) -> Iterator[TestClient]:
    settings = Settings(redis_url=redis_url, **{**FAST, "max_features": 100},
                        max_feature_names=30)
    with TestClient(create_app(settings)) as c:
        yield c


def test_predict_is_idempotent_per_event_id(client: TestClient) -> None:
    make_model(client)
    body = {"context": {"x": 1}, "event_id": "same"}
    first = client.post("/v1/models/m1/predict", json=body)
    again = client.post("/v1/models/m1/predict", json=body)
    assert first.status_code == again.status_code == 200 and first.json() == again.json()
    other = client.post("/v1/models/m1/predict", json={"context": {"x": 2}, "event_id": "same"})
    assert other.status_code == 409 and "different request" in other.json()["detail"]
    assert client.get("/v1/models/m1").json()["decisions"] == 1


def test_a_lost_reply_is_reported_as_unknown_and_a_retry_is_safe(client, monkeypatch) -> None:
    make_model(client)
    log: EventLog = client.app.state.log
    real = log._s["DECISION"]

    def lose_reply(**call):
        real(**call)  # the write happens...
        raise redis.ConnectionError("connection dropped (injected)")  # ...the reply is lost

    monkeypatch.setitem(log._s, "DECISION", lose_reply)
    monkeypatch.setattr(log, "ar", None)
    body = {"context": {"x": 1}, "event_id": "lost"}
    r = client.post("/v1/models/m1/predict", json=body)
    assert r.status_code == 503 and "may or may not" in r.json()["detail"]
    assert "lost" in r.json()["detail"]
    monkeypatch.setitem(log._s, "DECISION", real)
    retry = client.post("/v1/models/m1/predict", json=body)
    assert retry.status_code == 200
    assert client.get("/v1/models/m1").json()["decisions"] == 1


# --- 6. names are validated; delete touches one model -------------------------------------------


def test_delete_with_a_pattern_deletes_nothing(client: TestClient) -> None:
    for name in ("globa", "globb"):
        make_model(client, name)
    r = client.delete("/v1/models/glob*")
    assert r.status_code == 422
    assert client.delete("/v1/models/glob").status_code == 404
    log: EventLog = client.app.state.log
    for name in ("globa", "globb"):
        assert client.get(f"/v1/models/{name}").status_code == 200
        assert log.r.exists(keys(name)["snapshot"])
    assert client.delete("/v1/models/globa").status_code == 204
    assert log.r.exists(keys("globb")["snapshot"]) and not log.r.exists(keys("globa")["snapshot"])


# --- 8/9. a feature schema per model; bounded names and sizes -----------------------------------


@pytest.mark.slow
def test_a_feature_that_changes_type_is_kept_apart(client: TestClient) -> None:
    """As VW and Personalizer do: ``x`` sent as a number, then as a string, is two features
    (the string one under ``x:str``), never a 4xx; the schema records both."""
    make_model(client, booster="adabandit")
    for i in range(60):  # enough for the trees to split on x
        d = client.post("/v1/models/m1/predict", json={"context": {"x": float(i % 5)}}).json()
        client.post("/v1/models/m1/feedback",
                    json={"event_id": d["event_id"], "reward": float(d["action"] == "red")})
    r = client.post("/v1/models/m1/predict", json={"context": {"x": "3", "y": 1}})
    assert r.status_code == 200, r.text
    log = EventLog(redis.Redis.from_url(client.app.state.settings.redis_url))
    logged = log.event_state("m1", r.json()["event_id"])["decision"]
    assert logged["c"] == {"x:str": "3", "y": 1}  # the context the model decided on
    assert log.schema("m1", ["x", "x:str", "y"]) == {"x": "n", "x:str": "s", "y": "n"}
    assert client.post("/v1/models/m1/feedback", json={"event_id": r.json()["event_id"],
                                                       "reward": 1.0}).status_code in (200, 202)
    again = client.post("/v1/models/m1/predict", json={"context": {"x": "4"}})
    assert again.status_code == 200
    assert client.post("/v1/models/m1/predict", json={"context": {"x": 1.5}}).status_code == 200


def test_feature_names_and_sizes_are_bounded(client: TestClient) -> None:
    make_model(client)
    for i in range(3):
        ctx = {f"f{i}_{j}": 1 for j in range(10)}
        assert client.post("/v1/models/m1/predict", json={"context": ctx}).status_code == 200
    r = client.post("/v1/models/m1/predict", json={"context": {"brand_new": 1}})
    assert r.status_code == 422 and "max_feature_names" in r.json()["detail"]
    assert client.post("/v1/models/m1/predict", json={"context": {"f0_1": 2}}).status_code == 200
    long_key = client.post("/v1/models/m1/predict", json={"context": {"k" * 300: 1}})
    assert long_key.status_code == 422 and "max_key_length" in long_key.json()["detail"]
    info = client.get("/v1/models/m1").json()["retention"]
    assert info["feature_names"] == 30 and info["max_feature_names"] == 30


# --- 13. bounded streams, trimmed only below what was consumed ------------------------------------


def test_streams_are_trimmed_below_what_was_consumed(log: EventLog) -> None:
    log.limits = Limits(stream_max_events=20)
    model = new_model(log, wait=60.0)
    learner = learner_for(log, stream_max_events=20)
    learner.log.limits = log.limits
    run_steps(learner, 1)
    for i in range(60):
        event_id = decide_and_log(log, model, i)
        log.append_feedback("m", event_id, {"EventId": event_id, "ts": time.time(),
                                            "reward": 1.0, "label": None})
    run_steps(learner, 3)
    served = learner.store.peek("m")
    assert served.version == 60
    assert log.r.xlen(keys("m")["joined"]) == 60  # no snapshot yet: nothing may go
    save_snapshot(log, served, lease=learner.leases["m"])
    removed = log.trim("m", served.joined_id)
    assert removed["joined"] == 40 and log.r.xlen(keys("m")["joined"]) == 20
    assert log.r.xlen(keys("m")["decisions"]) <= 20 + 100  # MAXLEN ~ (approximate)
    rebuilt = restore(log, served.config)
    assert same_decisions(rebuilt, served)


# --- 11. excluded actions: the booster decides among the allowed ones -------------------------


@pytest.mark.slow
def test_predict_with_exclusions_restricts_the_booster(client: TestClient) -> None:
    make_model(client, booster="adabandit")
    log: EventLog = client.app.state.log
    for i in range(30):
        body = {"context": {"x": float(i % 3)}, "excluded_actions": ["red"], "event_id": f"x{i}"}
        d = client.post("/v1/models/m1/predict", json=body).json()
        assert d["action"] != "red" and d["probabilities"]["red"] == 0.0
        logged = log.decision_of("m1", f"x{i}")["bb"]["decision"]
        internals = logged["internals"]
        assert 0 not in internals["allowed"] and internals["yhat"] != 0  # predicted among allowed


def test_an_initial_snapshot_never_replaces_a_stored_one(log: EventLog) -> None:
    """A creation that lost a race must not overwrite the winner's snapshot."""
    winner = new_model(log, wait=60.0)
    loser_config = ModelConfig(name="m", booster="uniform", actions=ACTIONS, params={"seed": 1})
    save_snapshot(log, ServedModel(loser_config, loser_config.build()))
    assert log.snapshot_meta("m") == (0, winner.config.uid)


def test_a_snapshot_this_version_cannot_load_is_rebuilt_from_the_log(log: EventLog, caplog):
    """A stored snapshot whose class changed meaning (here an egreedy_tree pickled with the one
    classifier tree of earlier versions) does not stop a restore: the model is rebuilt from the
    joined events the log still holds, with a warning naming the model."""
    from boosters.online.baselines import EpsilonGreedyTree

    config = ModelConfig(name="old", booster="egreedy_tree", actions=ACTIONS,
                         params={"seed": 1}, reward_wait_seconds=0.5, default_reward=0.0)
    model = ServedModel(config, config.build())
    old = EpsilonGreedyTree.__new__(EpsilonGreedyTree)
    old.__dict__.update({k: v for k, v in vars(model.booster).items() if k != "trees"})
    with pytest.raises(TypeError):
        pickle.loads(pickle.dumps(old))
    log.save_snapshot(config, pickle.dumps(old), b"", 0, "0-0", None)
    assert log.add_config(config)
    learner = learner_for(log)
    run_steps(learner, 1)
    for i in range(30):
        event_id = decide_and_log(log, model, i)
        log.append_feedback("old", event_id, {"EventId": event_id, "ts": time.time(),
                                              "reward": float(i % 3 == 0), "label": None})
    with caplog.at_level("WARNING", logger="boostbandit.store"):
        run_steps(learner, 3)
        rebuilt = restore(log, config)
    assert "old: snapshot v0 cannot be loaded" in caplog.text
    assert rebuilt.version == 30 and rebuilt.booster.trees
    assert same_decisions(rebuilt, fold(log, config))
