"""The decision service API against a real redis-server (service/api/: the app and its routes)."""

from __future__ import annotations

import json
import math
import pickle
import time
from collections.abc import Callable, Iterator

import pytest
import redis
from fastapi.testclient import TestClient

from service.api.app import create_app
from service.eventlog.keys import keys
from service.settings import Settings

FAST = dict(
    run_learner=True,
    learner_block_ms=20,
    learner_lease_seconds=2.0,
    snapshot_every_events=5,
    snapshot_every_seconds=60.0,
    redis_timeout_seconds=0.5,
    max_body_bytes=4096,
    max_features=20,
)
ACTIONS = ["red", "green", "blue"]


def wait_for(condition: Callable[[], object], timeout: float = 5.0) -> None:
    """Poll ``condition`` until true or fail."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.01)


@pytest.fixture
def client(redis_url: str) -> Iterator[TestClient]:
    with TestClient(create_app(Settings(redis_url=redis_url, **FAST))) as c:
        yield c


def make_model(c: TestClient, name: str = "m1", booster: str = "banditbbm", **extra) -> dict:
    body = {
        "name": name,
        "booster": booster,
        "actions": ACTIONS,
        "params": {"n_learners": 3, "seed": 7},
        **extra,
    }
    r = c.post("/v1/models", json=body)
    assert r.status_code == 201, r.text
    wait_for(lambda: c.app.state.store.get(name).owned)  # the learner has taken the model over
    return r.json()


def stream_lengths(c: TestClient, name: str) -> tuple[int, int, int]:
    r: redis.Redis = c.app.state.log.r
    k = keys(name)
    return r.xlen(k["decisions"]), r.xlen(k["feedback"]), r.xlen(k["joined"])


def model_state(c: TestClient, name: str) -> bytes:
    model = c.app.state.store.get(name)
    return pickle.dumps((model.booster, model.version))


# --- models -------------------------------------------------------------------------------------


def test_model_lifecycle(client: TestClient) -> None:
    info = make_model(client)
    assert info["version"] == 0 and info["decisions"] == 0 and info["average_reward"] is None
    assert (
        client.post(
            "/v1/models", json={"name": "m1", "booster": "uniform", "actions": ACTIONS}
        ).status_code
        == 409
    )
    assert [m["name"] for m in client.get("/v1/models").json()] == ["m1"]
    assert client.get("/v1/models/m1").json()["params"]["seed"] == 7
    assert client.delete("/v1/models/m1").status_code == 204
    assert client.get("/v1/models/m1").status_code == 404
    assert client.delete("/v1/models/m1").status_code == 404
    assert not list(client.app.state.log.r.scan_iter("bb:{m1}:*"))


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ({"booster": "nope"}, "unknown booster"),
        ({"name": "bad name!"}, "name"),
        ({"actions": ["a"]}, "actions"),
        ({"actions": ["a", "a", "b"]}, "repeated: a"),
        ({"params": {"n_learners": 3, "bogus": 1, "other": 2}}, "bogus, other"),
        ({"params": {"rho": 2.0}}, "rho"),
        ({"params": {"seed": -1}}, "seed"),
        ({"reward_wait_seconds": 0}, "reward_wait_seconds"),
        ({"default_reward": 2}, "default_reward"),
        ({"surprise": 1}, "surprise"),
    ],
)
def test_create_rejects_bad_config(client: TestClient, body: dict, needle: str) -> None:
    full = {"name": "m2", "booster": "banditbbm", "actions": ACTIONS, **body}
    r = client.post("/v1/models", json=full)
    assert r.status_code == 422, r.text
    assert needle in r.text
    assert client.get("/v1/models").json() == []


def test_too_many_actions(redis_url: str) -> None:
    with TestClient(create_app(Settings(redis_url=redis_url, **{**FAST, "max_actions": 3}))) as c:
        r = c.post(
            "/v1/models", json={"name": "m", "booster": "uniform", "actions": ["a", "b", "c", "d"]}
        )
        assert r.status_code == 422 and "max_actions" in r.text


# --- predict / feedback -------------------------------------------------------------------------


@pytest.mark.slow
def test_predict_feedback_learns_and_logs_dsjson(client: TestClient) -> None:
    make_model(client)
    r = client.post("/v1/models/m1/predict", json={"context": {"x": 1.5, "colour": "a"}})
    assert r.status_code == 200, r.text
    d = r.json()
    assert len(d["event_id"]) == 32 and d["action"] in ACTIONS and d["model_version"] == 0
    assert math.isclose(sum(d["probabilities"].values()), 1.0)
    assert d["probability"] == d["probabilities"][d["action"]]
    fb = client.post("/v1/models/m1/feedback", json={"event_id": d["event_id"], "reward": 1})
    assert fb.status_code == 200 and fb.json() == {
        "event_id": d["event_id"],
        "duplicate": False,
        "late": False,
    }
    again = client.post("/v1/models/m1/feedback", json={"event_id": d["event_id"], "reward": 0})
    assert again.status_code == 200 and again.json()["duplicate"] is True
    wait_for(lambda: client.get("/v1/models/m1").json()["version"] == 1)
    info = client.get("/v1/models/m1").json()
    assert (info["decisions"], info["rewards"], info["joined"]) == (1, 1, 1)
    assert info["average_reward"] == 1.0
    assert stream_lengths(client, "m1") == (1, 1, 1)

    r_: redis.Redis = client.app.state.log.r
    ((_, fields),) = r_.xrange(keys("m1")["decisions"])
    ev = json.loads(fields[b"e"])
    chosen = ACTIONS.index(d["action"]) + 1
    assert ev["EventId"] == d["event_id"] and ev["Version"] == "1"
    assert ev["a"][0] == chosen and sorted(ev["a"]) == [1, 2, 3]
    assert ev["p"][0] == d["probability"] and ev["c"] == {"x": 1.5, "colour": "a"}
    assert ev["Timestamp"].endswith("Z") and "internals" in ev["bb"]["decision"]
    ((_, fields),) = r_.xrange(keys("m1")["joined"])
    j = json.loads(fields[b"e"])
    assert j["_label_cost"] == -1.0 and j["_label_Action"] == chosen
    assert j["_label_probability"] == d["probability"] and j["bb"]["source"] == "feedback"


@pytest.mark.slow
def test_label_feedback_and_full_information(client: TestClient) -> None:
    make_model(client, "full", booster="onlinembbm")
    d = client.post("/v1/models/full/predict", json={"context": {"x": 1}}).json()
    r = client.post("/v1/models/full/feedback", json={"event_id": d["event_id"], "reward": 0})
    assert r.status_code == 422 and "full-information" in r.text
    r = client.post("/v1/models/full/feedback", json={"event_id": d["event_id"], "label": "pink"})
    assert r.status_code == 422 and "pink" in r.text
    assert stream_lengths(client, "full") == (1, 0, 0)
    r = client.post("/v1/models/full/feedback", json={"event_id": d["event_id"], "label": "blue"})
    assert r.status_code == 200
    wait_for(lambda: client.get("/v1/models/full").json()["version"] == 1)
    ((_, fields),) = client.app.state.log.r.xrange(keys("full")["joined"])
    j = json.loads(fields[b"e"])
    assert j["bb"]["label_id"] == "blue" and j["_skipLearn"] is False


def test_excluded_actions_renormalise(client: TestClient) -> None:
    make_model(client)
    for i in range(10):
        r = client.post(
            "/v1/models/m1/predict", json={"context": {"x": i}, "excluded_actions": ["green"]}
        )
        d = r.json()
        assert d["probabilities"]["green"] == 0.0 and d["action"] != "green"
        assert math.isclose(sum(d["probabilities"].values()), 1.0)
    r = client.post(
        "/v1/models/m1/predict", json={"context": {"x": 1}, "excluded_actions": ACTIONS}
    )
    assert r.status_code == 422 and "every action" in r.text


@pytest.mark.slow
def test_default_reward_after_the_window_and_late_feedback(client: TestClient) -> None:
    make_model(client, reward_wait_seconds=0.2, default_reward=0.25)
    d = client.post("/v1/models/m1/predict", json={"context": {"x": 1}}).json()
    wait_for(lambda: client.get("/v1/models/m1").json()["joined"] == 1)
    ((_, fields),) = client.app.state.log.r.xrange(keys("m1")["joined"])
    j = json.loads(fields[b"e"])
    assert j["bb"]["source"] == "default" and j["_label_cost"] == -0.25
    late = client.post("/v1/models/m1/feedback", json={"event_id": d["event_id"], "reward": 1})
    assert late.status_code == 200 and late.json()["late"] is True
    time.sleep(0.2)
    info = client.get("/v1/models/m1").json()
    assert info["joined"] == 1 and info["version"] == 1 and info["rewards"] == 1


BAD_PREDICTS = [
    (b'{"context": {"x": 1', 422, "JSON"),
    (b'{"context": [1, 2]}', 422, "context"),
    (b'{"context": {"x": true}}', 422, "x"),
    (b'{"context": {"x": [1]}}', 422, "x"),
    (b'{"context": {"speed": NaN}}', 422, "feature 'speed' is not finite"),
    (b'{"context": {"speed": Infinity}}', 422, "feature 'speed' is not finite"),
    (b'{"context": {"speed": 1' + b"0" * 400 + b'}}', 422, "feature 'speed' is an integer of"),
    (b'{"context": {"x": 1}, "excluded_actions": ["pink"]}', 422, "pink"),
    (b'{"context": {"x": 1}, "event_id": "has space"}', 422, "event_id"),
    (b'{"context": {"x": 1}, "extra": 1}', 422, "extra"),
    (b'{"context": {"x": 2}, "event_id": "dup"}', 409, "dup"),  # another body, same id
    (json.dumps({"context": {f"f{i}": i for i in range(21)}}).encode(), 422, "max_features"),
    (json.dumps({"context": {"x": "y" * 5000}}).encode(), 413, "too large"),
]


def test_bad_predicts_write_nothing(client: TestClient) -> None:
    make_model(client)
    assert (
        client.post(
            "/v1/models/m1/predict", json={"context": {"x": 1}, "event_id": "dup"}
        ).status_code
        == 200
    )
    before, state = stream_lengths(client, "m1"), model_state(client, "m1")
    for body, code, needle in BAD_PREDICTS:
        r = client.post(
            "/v1/models/m1/predict", content=body, headers={"content-type": "application/json"}
        )
        assert r.status_code == code, (body, r.text)
        assert needle in r.text, (body, r.text)
    r = client.post("/v1/models/nope/predict", json={"context": {"x": 1}})
    assert r.status_code == 404 and "nope" in r.text
    assert stream_lengths(client, "m1") == before
    assert model_state(client, "m1") == state
    assert client.get("/v1/models/m1").json()["decisions"] == 1


def test_bad_feedback_writes_nothing(client: TestClient) -> None:
    make_model(client)
    d = client.post("/v1/models/m1/predict", json={"context": {"x": 1}}).json()
    before = stream_lengths(client, "m1")
    cases = [
        ({"event_id": d["event_id"], "reward": 1.5}, 422, "reward"),
        ({"event_id": d["event_id"], "reward": -0.1}, 422, "reward"),
        ({"event_id": d["event_id"], "reward": "1"}, 422, "reward"),
        ({"event_id": d["event_id"]}, 422, "exactly one of reward or label"),
        ({"event_id": d["event_id"], "reward": 1, "label": "red"}, 422, "exactly one"),
        ({"event_id": "never-seen", "reward": 1}, 404, "unknown or expired event id"),
    ]
    for body, code, needle in cases:
        r = client.post("/v1/models/m1/feedback", json=body)
        assert r.status_code == code and needle in r.text, (body, r.text)
    assert stream_lengths(client, "m1") == before
    assert client.get("/v1/models/m1").json()["rewards"] == 0


# --- auth, health, metrics ----------------------------------------------------------------------


@pytest.mark.slow
def test_auth(redis_url: str) -> None:
    settings = Settings(redis_url=redis_url, api_keys="user1", admin_keys="boss", **FAST)
    with TestClient(create_app(settings)) as c:
        assert c.get("/healthz").status_code == 200
        assert c.get("/readyz").status_code == 200
        assert c.get("/v1/models").status_code == 401
        assert c.get("/metrics").status_code == 401
        user = {"Authorization": "Bearer user1"}
        boss = {"Authorization": "Bearer boss"}
        assert c.get("/v1/models", headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert c.get("/v1/models", headers=user).status_code == 200
        body = {"name": "m", "booster": "uniform", "actions": ACTIONS}
        r = c.post("/v1/models", json=body, headers=user)
        assert r.status_code == 403 and "admin" in r.text
        assert c.post("/v1/models", json=body, headers=boss).status_code == 201
        assert c.post("/v1/models/m/predict", json={"context": {}}, headers=user).status_code == 200
        assert c.delete("/v1/models/m", headers=user).status_code == 403
        assert c.delete("/v1/models/m", headers=boss).status_code == 204
        # the docs stay open (docs_access; tests/service/api/test_openapi.py), /metrics needs a key
        assert "/v1/models/{name}/predict" in c.get("/openapi.json").json()["paths"]
        assert "swagger" in c.get("/docs").text.lower()
        assert c.get("/metrics", headers=user).status_code == 200


@pytest.mark.slow
def test_health_metrics_and_docs(client: TestClient) -> None:
    make_model(client)
    client.post("/v1/models/m1/predict", json={"context": {"x": 1}})
    assert client.get("/healthz").json() == {"status": "ok"}
    assert client.get("/readyz").json()["status"] == "ready"
    text = client.get("/metrics").text
    for name in (
        "boostbandit_decisions_total",
        "boostbandit_request_seconds_bucket",
        "boostbandit_snapshot_age_seconds",
        "boostbandit_requests_total",
    ):
        assert name in text
    assert 'route="/v1/models/{name}/predict"' in text
    assert client.get("/docs").status_code == 200
    assert "/v1/models/{name}/predict" in client.get("/openapi.json").json()["paths"]


@pytest.mark.slow
@pytest.mark.parametrize("redis_async", ["off", "on"])
def test_redis_outage_503_then_recovery(private_redis, redis_async: str) -> None:
    """Both ways predict and feedback reach Redis (blocking, and awaited on the async client)."""
    server = private_redis
    settings = Settings(redis_url=server.url, **{**FAST, "redis_async": redis_async})
    if True:
        with TestClient(create_app(settings)) as c:
            assert (c.app.state.log.ar is not None) == (redis_async == "on")
            make_model(c)
            assert c.post("/v1/models/m1/predict", json={"context": {"x": 1}}).status_code == 200
            server.stop()
            r = c.get("/readyz")
            assert r.status_code == 503 and "Redis unreachable" in r.text
            r = c.post("/v1/models/m1/predict", json={"context": {"x": 1}})
            assert r.status_code == 503 and "Redis" in r.json()["detail"]
            server.start()
            wait_for(lambda: c.get("/readyz").status_code == 200)
            d = c.post("/v1/models/m1/predict", json={"context": {"x": 1}}).json()
            assert (
                c.post(
                    "/v1/models/m1/feedback", json={"event_id": d["event_id"], "reward": 1}
                ).status_code
                == 200
            )
            wait_for(lambda: c.get("/v1/models/m1").json()["version"] == 1)
            assert c.get("/v1/models/m1").json()["decisions"] == 2


@pytest.mark.slow
def test_learner_recovers_unacked_feedback_and_unapplied_joins(redis_url: str) -> None:
    """The two crash windows: delivered-not-acknowledged, and joined-not-applied."""
    from service.eventlog import EventLog
    from service.events import joined_event

    replica = Settings(redis_url=redis_url, **{**FAST, "run_learner": False})
    with TestClient(create_app(replica)) as c:  # an API replica: logs, does not learn
        make_model_no_learner = {
            "name": "m1",
            "booster": "banditbbm",
            "actions": ACTIONS,
            "params": {"n_learners": 3, "seed": 7},
        }
        assert c.post("/v1/models", json=make_model_no_learner).status_code == 201
        for e in ("e1", "e2", "e3"):
            c.post("/v1/models/m1/predict", json={"context": {"x": 1}, "event_id": e})
            c.post("/v1/models/m1/feedback", json={"event_id": e, "reward": 1})
        log: EventLog = c.app.state.log
        log.ensure_group(keys("m1")["feedback"], EventLog.GROUP)
        _, held = log.lease("m1", "crashed-learner", 0.3)  # expires before the next learner
        delivered = log.r.xreadgroup(
            EventLog.GROUP, "learner", {keys("m1")["feedback"]: ">"}, count=2
        )
        assert len(delivered[0][1]) == 2  # e1, e2 delivered to the (then crashed) learner
        decision = log.decision_of("m1", "e2")
        assert log.join(
            "m1",
            "e2",
            joined_event(decision, reward=1.0, label=None, source="feedback", learn=True, ts=0.0),
            held,
        )[0] == "joined"
        assert c.get("/v1/models/m1").json()["version"] == 0
    with TestClient(create_app(Settings(redis_url=redis_url, **FAST))) as c:
        wait_for(lambda: c.get("/v1/models/m1").json()["version"] == 3)
        r: redis.Redis = c.app.state.log.r
        assert r.xlen(keys("m1")["joined"]) == 3
        wait_for(lambda: r.xpending(keys("m1")["feedback"], "learner")["pending"] == 0)
        order = [json.loads(f[b"e"])["EventId"] for _, f in r.xrange(keys("m1")["joined"])]
        assert order[0] == "e2" and sorted(order) == ["e1", "e2", "e3"]


@pytest.mark.slow
def test_delete_and_recreate_while_learning(client: TestClient) -> None:
    make_model(client)
    d = client.post("/v1/models/m1/predict", json={"context": {"x": 1}}).json()
    client.post("/v1/models/m1/feedback", json={"event_id": d["event_id"], "reward": 1})
    assert client.delete("/v1/models/m1").status_code == 204
    r = client.post("/v1/models/m1/feedback", json={"event_id": d["event_id"], "reward": 1})
    assert r.status_code == 404
    make_model(client)
    info = client.get("/v1/models/m1").json()
    assert (info["version"], info["decisions"], info["rewards"]) == (0, 0, 0)
    d = client.post("/v1/models/m1/predict", json={"context": {"x": 1}}).json()
    client.post("/v1/models/m1/feedback", json={"event_id": d["event_id"], "reward": 1})
    wait_for(lambda: client.get("/v1/models/m1").json()["version"] == 1)
