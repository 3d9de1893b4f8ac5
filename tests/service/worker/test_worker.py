"""The offline worker, the featurizer, the policies/serving routes and policy-mode predict, against
a real redis-server (service/worker.py, service/training/__init__.py,
service/api/routes/policies.py)."""

from __future__ import annotations

import json
import math
import pickle
from collections.abc import Iterator

import numpy as np
import pytest
import redis
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from boosters.base import Decision
from service.api.app import create_app
from service.cli import app as cli_app
from service.eventlog.keys import keys
from service.events import decision_event, dumps, joined_event
from service.models.runtime import apply_joined
from service.settings import Settings
from service.training import Featurizer, TrainConfig, train_and_evaluate
from service.worker import Worker
from tests.service.api.test_service_api import wait_for

ACTIONS = ["a", "b", "c"]
API = dict(
    run_learner=True,
    learner_block_ms=20,
    learner_lease_seconds=2.0,
    snapshot_every_events=50,
    redis_timeout_seconds=0.5,
)
WORKER = dict(
    worker_window=2000,
    worker_min_events=300,
    worker_retrain_events=300,
    worker_retrain_seconds=3600.0,
    worker_n_rounds=15,
    worker_max_depth=4,
    worker_reward_model_rounds=30,
    worker_block_ms=20,
    worker_min_propensity=0.02,
)


def best_action(context: dict) -> int:
    """The synthetic environment: action a pays off for x > 0, action b otherwise, c never."""
    return 0 if context["x"] > 0 else 1


def synthetic_events(
    n: int, seed: int, start: int = 0, informative: bool = True, epsilon: float | None = None
) -> list[dict]:
    """Joined events in the exact logged format: uniform logging (or epsilon-greedy around a
    fixed action c), rewards 1 for the best action (or coin flips when not ``informative``)."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(start, start + n):
        context = {"x": round(float(rng.uniform(-1, 1)), 4), "colour": str(rng.choice(["r", "g"]))}
        if epsilon is None:
            p = np.full(3, 1 / 3)
        else:
            p = np.full(3, epsilon / 3)
            p[2] += 1 - epsilon
        action = int(rng.choice(3, p=p))
        decision = Decision(action, p)
        ev = decision_event(f"ev{i}", 1000.0 + i, 0, ACTIONS, context, decision)
        if informative:
            reward = float(action == best_action(context))
        else:
            reward = float(rng.random() < 0.5)
        out.append(
            joined_event(ev, reward=reward, label=None, source="feedback", learn=True, ts=1.0 + i)
        )
    return out


def write_joined(r: redis.Redis, name: str, events: list[dict]) -> None:
    pipe = r.pipeline()
    for ev in events:
        pipe.xadd(keys(name)["joined"], {"e": dumps(ev)})
    pipe.execute()


@pytest.fixture
def client(redis_url: str) -> Iterator[TestClient]:
    with TestClient(create_app(Settings(redis_url=redis_url, **API))) as c:
        yield c


def make_model(c: TestClient, name: str = "shop", booster: str = "uniform") -> None:
    body = {"name": name, "booster": booster, "actions": ACTIONS, "params": {"seed": 3}}
    assert c.post("/v1/models", json=body).status_code == 201


def worker(redis_url: str, **extra) -> Worker:
    settings = Settings(redis_url=redis_url, **{**WORKER, **extra})
    return Worker(redis.Redis.from_url(redis_url), settings)


# --- featurizer and the pure training run ---------------------------------------------------------


def test_featurizer_is_deterministic_and_maps_unknowns_to_zero() -> None:
    window = [{"x": 1, "d": "m"}, {"x": 2.5, "d": "t", "y": -1.0}, {"d": "m", "z": "q"}]
    f = Featurizer().fit(window)
    assert f.columns == ["d=m", "d=t", "x", "y", "z=q"]
    assert Featurizer().fit(list(reversed(window))).columns == f.columns
    X = f.transform([{"x": 3, "d": "unseen", "new": 5.0, "y": "str-for-numeric"}, {}])
    assert X.tolist() == [[0, 0, 3, 0, 0], [0, 0, 0, 0, 0]]
    again = pickle.loads(pickle.dumps(f))
    assert np.array_equal(again.transform(window), f.transform(window))
    top = Featurizer(max_categories=1).fit([{"d": "x"}, {"d": "y"}, {"d": "y"}])
    assert top.columns == ["d=y"]
    with pytest.raises(ValueError, match="max_categories"):
        Featurizer(max_categories=0)
    with pytest.raises(RuntimeError, match="not fitted"):
        Featurizer().transform([{}])


def test_training_run_uses_only_the_past_and_rejects_noise() -> None:
    config = TrainConfig(n_rounds=10, max_depth=3, reward_model_rounds=20)
    good = train_and_evaluate(synthetic_events(600, seed=1), ACTIONS, config)
    meta = good.meta
    assert good.published and (meta["n_train"], meta["n_holdout"]) == (420, 180)
    assert meta["training"]["last_train_event"] == "ev419" and meta["training"]["last_event"] == (
        "ev599"
    )
    assert meta["params"]["reward_translation"] == pytest.approx(-meta_mean_reward(600, 1, 420))
    assert meta["estimates"]["policy"]["dr"]["low"] > meta["baseline"]
    # the publish rule: the paired DR difference's one-sided 95% lower bound is above 0
    diff = meta["difference"]
    assert diff["estimator"] == "dr" and diff["level"] == 0.95 and diff["n"] == 180
    assert diff["low"] > 0 and diff["high"] is None and diff["p_value"] < 0.05
    assert diff["value"] == pytest.approx(diff["policy_value"] - diff["logging_value"])
    assert diff["policy_value"] == meta["estimates"]["policy"]["dr"]["value"]
    assert diff["logging_value"] == meta["estimates"]["logging"]["dr"]["value"]
    assert meta["estimates"]["difference"]["dr"] == {
        k: diff[k] for k in ("value", "stderr", "low", "high", "level", "n")
    }
    snips_diff = meta["estimates"]["difference"]["snips"]
    est = meta["estimates"]
    assert snips_diff["value"] == pytest.approx(
        est["policy"]["snips"]["value"] - est["logging"]["snips"]["value"]
    )
    assert "paired dr difference" in meta["publish_rule"]
    # a policy trained on coin flips does not beat the logging policy
    noise = train_and_evaluate(synthetic_events(600, seed=2, informative=False), ACTIONS, config)
    assert not noise.published
    est = noise.meta["estimates"]
    assert est["policy"]["dr"]["low"] <= noise.meta["baseline"]
    assert noise.meta["difference"]["low"] <= 0 and est["difference"]["dr"]["low"] <= 0
    snips_rule = TrainConfig(
        n_rounds=10, max_depth=3, reward_model_rounds=20, publish_estimator="snips"
    )
    by_snips = train_and_evaluate(synthetic_events(600, seed=1), ACTIONS, snips_rule)
    assert by_snips.published and by_snips.meta["difference"]["estimator"] == "snips"
    assert by_snips.meta["difference"]["logging_value"] == pytest.approx(by_snips.meta["baseline"])
    assert est["logging"]["snips"]["value"] == noise.meta["baseline"]
    with pytest.raises(ValueError, match="too few usable events"):
        train_and_evaluate(synthetic_events(1, seed=3), ACTIONS, config)
    with pytest.raises(ValueError, match="variant"):
        TrainConfig(variant="bopl-svm")


def meta_mean_reward(n: int, seed: int, n_train: int) -> float:
    return float(np.mean([e["bb"]["reward"] for e in synthetic_events(n, seed)[:n_train]]))


# --- worker + API ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_worker_publishes_and_the_model_serves_the_policy(client: TestClient, redis_url) -> None:
    make_model(client)
    r: redis.Redis = client.app.state.log.r
    write_joined(r, "shop", synthetic_events(900, seed=4))
    w = worker(redis_url)
    w.step()  # takes the lease, rebuilds the window (900 events, all new), trains, publishes

    listing = client.get("/v1/models/shop/policies").json()
    assert listing["published_version"] == 1 and listing["serving"]["mode"] == "online"
    (p,) = listing["policies"]
    assert p["published"] and p["variant"] == "bopl-regr" and p["version"] == 1
    assert (p["n_train"], p["n_holdout"]) == (630, 270)
    dr, snips_ = p["estimates"]["policy"]["dr"], p["estimates"]["policy"]["snips"]
    assert dr["low"] > p["baseline"] and snips_["low"] < snips_["value"] < snips_["high"]
    assert dr["value"] > 0.8 and 0.2 < p["baseline"] < 0.45
    # what the publish rule decided on: the paired difference, its one-sided bound, the level
    diff = p["estimates"]["difference"]["dr"]
    assert diff["low"] > 0.3 and diff["high"] is None and diff["level"] == 0.95
    assert diff["value"] == pytest.approx(dr["value"] - p["estimates"]["logging"]["dr"]["value"])
    assert "one-sided 95% lower bound of the paired dr difference" in p["publish_rule"]
    (stored,) = client.app.state.log.policies("shop")
    assert stored["difference"]["low"] == diff["low"] and stored["difference"]["p_value"] < 1e-6
    assert stored["difference"]["estimator"] == "dr"
    assert p["params"]["n_rounds"] == 15 and p["training"]["last_stream_id"]
    assert listing["worker"]["window"] == 900 and listing["worker"]["new_events"] == 0
    assert listing["worker"]["last_policy"]["status"] == "published"
    assert listing["worker"]["last_policy"]["difference"]["low"] == diff["low"]
    assert client.get("/v1/models/shop/policies/1").json() == p
    assert client.get("/v1/models/shop").json()["published_policy"] == 1

    # switch to the policy: valid propensities, above the floor, favouring the best action
    r_put = client.put("/v1/models/shop/serving", json={"mode": "policy"})
    assert r_put.status_code == 200, r_put.text
    serving = r_put.json()
    assert serving["mode"] == "policy" and serving["policy_version"] == 1
    assert serving["effective_min_propensity"] == 0.02 and serving["effective_temperature"] == 1.0
    assert client.get("/v1/models/shop").json()["serving"] == "policy"
    rng = np.random.default_rng(5)
    best_mass = []
    for i in range(60):
        context = {"x": float(rng.uniform(-1, 1)), "colour": "g"}
        d = client.post("/v1/models/shop/predict", json={"context": context, "event_id": f"p{i}"})
        assert d.status_code == 200, d.text
        d = d.json()
        probs = d["probabilities"]
        assert d["policy_version"] == 1 and math.isclose(sum(probs.values()), 1.0)
        assert min(probs.values()) >= 0.02 - 1e-12
        assert d["probability"] == probs[d["action"]]
        best_mass.append(probs[ACTIONS[best_action(context)]])
    assert np.mean(best_mass) > 0.8

    # logged exactly like an online decision, plus the policy that made it
    (_, fields), = r.xrevrange(keys("shop")["decisions"], count=1)
    ev = json.loads(fields[b"e"])
    assert ev["EventId"] == "p59" and ev["p"][0] == d["probability"]
    assert ev["bb"]["propensity"] == d["probability"]
    assert ev["bb"]["model_version"] == d["model_version"]
    assert ev["bb"]["policy"] == {"version": 1, "temperature": 1.0, "min_propensity": 0.02}
    assert ev["bb"]["decision"]["internals"] == {"policy_version": 1}
    # ... joined, but not learned by the online booster (its internals are not the booster's)
    fb = client.post("/v1/models/shop/feedback", json={"event_id": "p59", "reward": 1})
    assert fb.status_code == 200
    wait_for(lambda: r.xlen(keys("shop")["joined"]) == 901)
    (_, fields), = r.xrevrange(keys("shop")["joined"], count=1)
    j = json.loads(fields[b"e"])
    assert j["EventId"] == "p59" and j["_skipLearn"] is True and j["bb"]["learn"] is False
    assert j["bb"]["policy"]["version"] == 1
    assert apply_joined(client.app.state.store.get("shop").booster, j) is False

    # excluded actions: renormalised, logged, the floor still holds
    d = client.post(
        "/v1/models/shop/predict",
        json={"context": {"x": 0.9}, "excluded_actions": ["a"], "event_id": "x1"},
    ).json()
    assert d["probabilities"]["a"] == 0.0 and d["action"] != "a"
    assert min(d["probabilities"]["b"], d["probabilities"]["c"]) >= 0.02
    assert math.isclose(sum(d["probabilities"].values()), 1.0)
    assert json.loads(r.hget(keys("shop")["event_prefix"] + "x1", "d"))["bb"]["excluded"] == [0]

    # argmax + a floor of 0.2: exactly 0.6 / 0.2 / 0.2
    body = {"mode": "policy", "temperature": 0, "min_propensity": 0.2}
    assert client.put("/v1/models/shop/serving", json=body).status_code == 200
    d = client.post("/v1/models/shop/predict", json={"context": {"x": 0.8}}).json()
    assert d["probabilities"] == pytest.approx({"a": 0.6, "b": 0.2, "c": 0.2})

    # back online: the booster decides again
    assert client.put("/v1/models/shop/serving", json={"mode": "online"}).json()["mode"] == "online"
    d = client.post("/v1/models/shop/predict", json={"context": {"x": 0.8}}).json()
    assert d["policy_version"] is None and d["probabilities"] == pytest.approx(
        {a: 1 / 3 for a in ACTIONS}
    )

    # new events arrive through the consumer group; after M of them the worker retrains
    write_joined(r, "shop", synthetic_events(299, seed=6, start=900))
    w.step()  # 299 + the joined policy-served decision = 300 new: due
    newest = client.get("/v1/models/shop/policies").json()["policies"][0]
    assert newest["version"] == 2 and newest["training"]["window"] == 1200
    assert w.states["shop"].new_events == 0
    w.stop()


@pytest.mark.slow
def test_a_policy_that_does_not_beat_logging_is_not_published(
    client: TestClient, redis_url: str
) -> None:
    make_model(client)
    write_joined(client.app.state.log.r, "shop", synthetic_events(600, seed=7, informative=False))
    w = worker(redis_url)
    w.step()
    listing = client.get("/v1/models/shop/policies").json()
    (p,) = listing["policies"]
    assert p["published"] is False and listing["published_version"] is None
    assert p["estimates"]["policy"]["dr"]["low"] <= p["baseline"]
    assert p["estimates"]["difference"]["dr"]["low"] <= 0
    assert client.get("/v1/models/shop/policies?published_only=true").json()["policies"] == []
    assert not client.app.state.log.r.hlen(keys("shop")["policy_blobs"])  # no pickle kept
    r = client.put("/v1/models/shop/serving", json={"mode": "policy"})
    assert r.status_code == 409 and "no published policy" in r.text
    assert client.get("/v1/models/shop/serving").json()["mode"] == "online"
    w.stop()


@pytest.mark.slow
def test_epsilon_logging_with_known_propensities(client: TestClient, redis_url: str) -> None:
    """Logged by an epsilon-greedy policy around the worst action: the policy still wins."""
    make_model(client)
    write_joined(client.app.state.log.r, "shop", synthetic_events(1200, seed=8, epsilon=0.5))
    w = worker(redis_url, worker_variant="bopls-regr")
    w.step()
    (p,) = client.get("/v1/models/shop/policies").json()["policies"]
    assert p["variant"] == "bopls-regr" and p["published"], p["estimates"]
    assert p["baseline"] < 0.25 < p["estimates"]["policy"]["dr"]["low"]
    assert p["estimates"]["difference"]["dr"]["low"] > 0
    w.stop()


BAD_SERVING = [
    ({"mode": "bogus"}, 422, "mode"),
    ({}, 422, "mode"),
    ({"mode": "policy", "temperature": -1}, 422, "temperature"),
    ({"mode": "policy", "temperature": "hot"}, 422, "temperature"),
    ({"mode": "policy", "min_propensity": 0}, 422, "min_propensity"),
    ({"mode": "policy", "min_propensity": 0.4}, 422, "at most 1/number of actions"),
    ({"mode": "online", "temperature": 1.0}, 422, "mode 'policy' only"),
    ({"mode": "policy", "extra": 1}, 422, "extra"),
    ({"mode": "policy"}, 409, "no published policy"),
]


def test_bad_inputs_to_the_new_routes(client: TestClient) -> None:
    make_model(client)
    for body, code, needle in BAD_SERVING:
        r = client.put("/v1/models/shop/serving", json=body)
        assert r.status_code == code and needle in r.text, (body, r.text)
    r = client.put(
        "/v1/models/shop/serving",
        content=b'{"mode": "policy", "temperature": NaN}',
        headers={"content-type": "application/json"},
    )
    assert r.status_code == 422 and "temperature" in r.text
    assert client.get("/v1/models/shop/serving").json()["mode"] == "online"
    assert client.put("/v1/models/nope/serving", json={"mode": "online"}).status_code == 404
    assert client.get("/v1/models/nope/policies").status_code == 404
    r = client.get("/v1/models/shop/policies/7")
    assert r.status_code == 404 and "no policy version 7" in r.text
    assert client.get("/v1/models/shop/policies/seven").status_code == 422
    assert client.get("/v1/models/shop/policies?limit=0").status_code == 422
    listing = client.get("/v1/models/shop/policies").json()
    assert listing["policies"] == [] and listing["worker"] is None


@pytest.mark.slow
def test_serving_needs_an_admin_key(redis_url: str) -> None:
    settings = Settings(redis_url=redis_url, api_keys="user1", admin_keys="boss", **API)
    with TestClient(create_app(settings)) as c:
        boss, user = {"Authorization": "Bearer boss"}, {"Authorization": "Bearer user1"}
        body = {"name": "m", "booster": "uniform", "actions": ACTIONS}
        assert c.post("/v1/models", json=body, headers=boss).status_code == 201
        assert c.get("/v1/models/m/policies").status_code == 401
        assert c.get("/v1/models/m/policies", headers=user).status_code == 200
        r = c.put("/v1/models/m/serving", json={"mode": "online"}, headers=user)
        assert r.status_code == 403 and "admin" in r.text
        r = c.put("/v1/models/m/serving", json={"mode": "online"}, headers=boss)
        assert r.status_code == 200


@pytest.mark.slow
def test_worker_reads_api_events_and_survives_a_restart(client: TestClient, redis_url) -> None:
    """Events logged through predict + feedback reach the worker; a restarted worker rebuilds
    the same window from the stream and recounts what is new."""
    make_model(client)
    rng = np.random.default_rng(9)
    for _ in range(40):
        context = {"x": float(rng.uniform(-1, 1))}
        d = client.post("/v1/models/shop/predict", json={"context": context}).json()
        reward = float(d["action"] == ACTIONS[best_action(context)])
        client.post("/v1/models/shop/feedback", json={"event_id": d["event_id"], "reward": reward})
    r: redis.Redis = client.app.state.log.r
    wait_for(lambda: r.xlen(keys("shop")["joined"]) == 40)
    first = worker(redis_url, worker_min_events=30, worker_retrain_events=1000)
    first.step()  # never trained + enough events: trains at once, then every M events / S s
    assert len(first.states["shop"].window) == 40 and first.states["shop"].new_events == 0
    (p,) = client.get("/v1/models/shop/policies").json()["policies"]
    assert p["n_train"] + p["n_holdout"] == 40 and p["training"]["window"] == 40
    (only,) = first.train_once()  # the one-shot path trains the same window regardless
    assert only["model"] == "shop" and only["version"] == 2
    write_joined(r, "shop", synthetic_events(5, seed=10, start=100))
    first.step()
    assert len(first.states["shop"].window) == 45
    first.stop()

    second = worker(redis_url, worker_min_events=30, worker_retrain_events=1000)
    second.step()
    state = second.states["shop"]
    assert [sid for sid, _ in state.window] == [sid for sid, _ in first_window(r)]
    assert state.new_events == 5  # after the stored policy's last event
    assert r.xpending(keys("shop")["joined"], "worker")["pending"] == 0
    second.stop()
    # a deleted model is dropped from the worker
    assert client.delete("/v1/models/shop").status_code == 204
    second.step()
    assert "shop" not in second.states


def first_window(r: redis.Redis) -> list[tuple[str, bytes]]:
    return [(sid.decode(), fields) for sid, fields in r.xrange(keys("shop")["joined"])]


@pytest.mark.slow
def test_cli_worker_once(client: TestClient, redis_url: str) -> None:
    make_model(client)
    write_joined(client.app.state.log.r, "shop", synthetic_events(400, seed=11))
    env = {
        "REDIS_URL": redis_url,
        **{f"BOOSTBANDIT_{k.upper()}": str(v) for k, v in WORKER.items()},
    }
    runner = CliRunner()
    result = runner.invoke(cli_app, ["worker", "--once", "--model", "shop"], env=env)
    assert result.exit_code == 0, result.output
    (line,) = result.stdout.strip().splitlines()
    summary = json.loads(line)
    assert summary["model"] == "shop" and summary["status"] == "published"
    assert summary["version"] == 1 and summary["policy"]["low"] > summary["logging"]
    assert summary["difference"]["low"] > 0 and summary["difference"]["level"] == 0.95
    result = runner.invoke(cli_app, ["worker", "--once", "--model", "nope"], env=env)
    assert result.exit_code == 2 and "unknown model(s): nope" in result.stderr
    result = runner.invoke(
        cli_app, ["worker", "--once"], env={**env, "BOOSTBANDIT_WORKER_MIN_EVENTS": "1000"}
    )
    assert result.exit_code == 0 and json.loads(result.stdout)["status"] == "skipped"
    result = runner.invoke(
        cli_app, ["worker", "--once"], env={**env, "BOOSTBANDIT_WORKER_VARIANT": "svm"}
    )
    assert result.exit_code == 2 and "invalid settings" in result.stderr


@pytest.mark.slow
def test_worker_loop_in_a_thread(client: TestClient, redis_url: str) -> None:
    """``run()``: the loop the CLI runs picks up a model and publishes, then stops cleanly."""
    import threading

    make_model(client)
    w = worker(redis_url)
    thread = threading.Thread(target=w.run, daemon=True)
    thread.start()
    try:
        wait_for(lambda: "shop" in w.states)
        write_joined(client.app.state.log.r, "shop", synthetic_events(400, seed=12))
        wait_for(lambda: client.get("/v1/models/shop").json()["published_policy"] == 1, 20.0)
    finally:
        w.stop_event.set()
        thread.join(5)
    w.stop()
    assert not thread.is_alive()
    assert client.app.state.log.r.get(keys("shop")["worker_lease"]) is None  # released


@pytest.mark.slow
def test_unusable_events_are_reported_not_published(client: TestClient, redis_url: str) -> None:
    """Events of another action list are skipped; too few usable ones: an error in the status."""
    make_model(client)
    events = synthetic_events(400, seed=13)
    for ev in events:
        ev["bb"]["actions"] = ["x", "y", "z"]
    write_joined(client.app.state.log.r, "shop", events)
    w = worker(redis_url)
    w.step()
    listing = client.get("/v1/models/shop/policies").json()
    assert listing["policies"] == []
    assert "too few usable events" in listing["worker"]["last_error"]
    w.stop()


def test_summary_of_a_policy_stored_before_the_paired_rule() -> None:
    """Policies stored by an older worker (no ``difference``) still summarise (worker restart)."""
    from service.worker import _summary

    config = TrainConfig(n_rounds=5, max_depth=2, reward_model_rounds=5)
    meta = train_and_evaluate(synthetic_events(300, seed=14), ACTIONS, config).meta
    meta = {**meta, "version": 3, "published": False}
    assert _summary("shop", meta)["difference"]["level"] == 0.95
    legacy = {k: v for k, v in meta.items() if k != "difference"}
    legacy["estimates"] = {k: v for k, v in meta["estimates"].items() if k != "difference"}
    s = _summary("shop", legacy)
    assert s["difference"] is None and s["status"] == "rejected" and s["version"] == 3
