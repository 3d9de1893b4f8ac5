"""The Personalizer routes with action features: ranks whose actions carry features go
to the endpoint's one model with action features (``pz-action-features``, booster ``adf``),
whatever set of ids they offer; the decision logs the candidates' features and the learner
learns from them; multi-slot, deferred activation, the learning modes, the exploration setting
and the model file work on it; ``personalizer_action_features`` chooses (auto, always, never)."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator

import pytest
import redis
from fastapi.testclient import TestClient

from service.api.app import create_app
from service.eventlog.keys import keys
from service.personalizer.mapping import ACTION_FEATURES_MODEL, action_set_model_name
from service.settings import Settings
from tests.service.api.test_service_api import FAST, wait_for
from tests.service.personalizer.test_personalizer import RANK_EXAMPLE, REWARD_EXAMPLE

BASE = "/personalizer/v1.0"
SETTINGS = dict(FAST, personalizer_reward_wait_seconds=1.0, learner_durable_lag_seconds=0.0,
                personalizer_action_features_params={"seed": 3})


def _app(redis_url: str, **over) -> TestClient:
    return TestClient(create_app(Settings(redis_url=redis_url, **{**SETTINGS, **over})))


@pytest.fixture
def client(redis_url: str) -> Iterator[TestClient]:
    with _app(redis_url) as c:
        yield c


def _rank(c: TestClient, event_id: str, actions: list[dict], **over) -> dict:
    body = {"contextFeatures": [{"user": {"pref": "news"}}], "actions": actions,
            "eventId": event_id, **over}
    r = c.post(f"{BASE}/rank", json=body)
    assert r.status_code == 201, r.text
    return r.json()


def _article(i: int, topic: str) -> dict:
    return {"id": f"art{i}", "features": [{"topic": topic, "words": 100 + i}]}


def _names(c: TestClient) -> list[str]:
    return sorted(c.app.state.log.configs())


def _logged(c: TestClient, name: str, stream: str = "decisions") -> list[dict]:
    r: redis.Redis = c.app.state.log.r
    return [json.loads(f[b"e"]) for _, f in r.xrange(keys(name)[stream])]


@pytest.mark.slow
def test_the_documented_example_goes_to_one_model_with_action_features(client) -> None:
    r = client.post(f"{BASE}/rank", json=RANK_EXAMPLE)
    assert r.status_code == 201, r.text
    ranking = r.json()["ranking"]
    assert ranking[0]["id"] == r.json()["rewardActionId"] != "SportsArticle"
    assert ranking[-1] == {"id": "SportsArticle", "probability": 0.0}
    assert math.isclose(sum(a["probability"] for a in ranking), 1.0)
    assert client.post(f"{BASE}/events/{RANK_EXAMPLE['eventId']}/reward",
                       json=REWARD_EXAMPLE).status_code == 204
    config = client.app.state.log.config(ACTION_FEATURES_MODEL)
    assert config.action_features and config.actions == [] and config.booster == "adf"
    (event,) = _logged(client, ACTION_FEATURES_MODEL)
    assert event["bb"]["actions"] == [a["id"] for a in RANK_EXAMPLE["actions"]]
    assert event["bb"]["candidates"] == [{"type": "News"}, {"type": "Sports"},
                                         {"type": "Entertainment"}]
    assert event["bb"]["excluded"] == [1]
    wait_for(lambda: client.get(f"/v1/models/{ACTION_FEATURES_MODEL}").json()["version"] == 1)


@pytest.mark.slow
def test_changing_action_sets_share_one_model_that_learns_by_features(client) -> None:
    """Every rank offers other articles, most never seen before; the news article is the one
    rewarded. One model; after learning it ranks an unseen news article first."""
    for i in range(120):
        topics = ["news", "sports", "food"][i % 3:] + ["news", "sports", "food"][:i % 3]
        actions = [_article(3 * i + j, t) for j, t in enumerate(topics)]
        answer = _rank(client, f"e{i}", actions)
        chosen = next(a for a in actions if a["id"] == answer["rewardActionId"])
        value = 1.0 if chosen["features"][0]["topic"] == "news" else 0.0
        assert client.post(f"{BASE}/events/e{i}/reward", json={"value": value}).status_code == 204
    assert _names(client) == [ACTION_FEATURES_MODEL]
    wait_for(lambda: client.get(f"/v1/models/{ACTION_FEATURES_MODEL}").json()["version"]
             == 120, timeout=20)
    fresh = [_article(1000, "sports"), _article(1001, "food"), _article(1002, "news")]
    answer = _rank(client, "unseen", fresh)
    assert answer["rewardActionId"] == "art1002"
    assert answer["ranking"][0]["probability"] > 0.5


@pytest.mark.slow
def test_actions_without_features_keep_the_model_of_their_set(client) -> None:
    """``auto``: a rank whose actions have no features goes to the model of its action set."""
    _rank(client, "plain", [{"id": "x"}, {"id": "y"}])
    _rank(client, "featured", [{"id": "x", "features": [{"k": 1}]}, {"id": "y"}])
    assert _names(client) == sorted([ACTION_FEATURES_MODEL, action_set_model_name(["x", "y"])])
    (event,) = _logged(client, ACTION_FEATURES_MODEL)
    assert event["bb"]["candidates"] == [{"k": 1}, {"id": "y"}]  # no features: its id


@pytest.mark.slow
def test_always_and_never(redis_url: str) -> None:
    with _app(redis_url, personalizer_action_features="always") as c:
        _rank(c, "a1", [{"id": "x"}, {"id": "y"}])
        _rank(c, "a2", [{"id": "z"}, {"id": "w"}, {"id": "x"}])
        assert _names(c) == [ACTION_FEATURES_MODEL]
        assert _logged(c, ACTION_FEATURES_MODEL)[1]["bb"]["candidates"] == [
            {"id": "z"}, {"id": "w"}, {"id": "x"}]
    redis.Redis.from_url(redis_url).flushdb()
    with _app(redis_url, personalizer_action_features="never") as c:
        _rank(c, "n1", [_article(1, "news"), _article(2, "food")])
        _rank(c, "n2", [_article(3, "news"), _article(4, "food")])
        assert _names(c) == sorted([action_set_model_name(["art1", "art2"]),
                                    action_set_model_name(["art3", "art4"])])


def test_bad_action_features_are_a_400_naming_the_action(redis_url: str) -> None:
    with _app(redis_url, max_features=2) as c:
        body = {"actions": [{"id": "a", "features": [{"n": 1, "m": 2, "o": 3}]}, {"id": "b"}]}
        r = c.post(f"{BASE}/rank", json=body)
        assert r.status_code == 400, r.text
        assert r.json()["error"]["code"] == "InvalidRankRequest"
        assert r.json()["error"]["message"] == ("action 'a' features: too many features: 3 > 2")
        assert c.post(f"{BASE}/rank", json={"actions": [{"id": "only", "features": [
            {"k": 1}]}]}).status_code == 201  # one candidate is enough for this model
        assert c.app.state.log.configs().keys() == {ACTION_FEATURES_MODEL}


def _configure(c: TestClient, **changes) -> None:
    """PATCH the service configuration with ``changes`` over what it answers now."""
    body = {**c.get(f"{BASE}/configurations/service").json(), **changes}
    r = c.put(f"{BASE}/configurations/service", json=body)
    assert r.status_code == 200, r.text


@pytest.mark.slow
def test_deferred_activation_and_the_apprentice(redis_url: str) -> None:
    with _app(redis_url, personalizer_reward_wait_seconds=5.0) as c:
        _defer_then_apprentice(c)


def _defer_then_apprentice(client: TestClient) -> None:
    actions = [_article(1, "news"), _article(2, "food"), _article(3, "sports")]
    _rank(client, "d1", actions, deferActivation=True)
    assert client.post(f"{BASE}/events/d1/reward", json={"value": 1}).status_code == 204
    assert _logged(client, ACTION_FEATURES_MODEL) == []
    assert client.post(f"{BASE}/events/d1/activate").status_code == 204
    wait_for(lambda: len(_logged(client, ACTION_FEATURES_MODEL, "joined")) == 1)
    _configure(client, learningMode="Apprentice")
    for i in range(5):
        answer = _rank(client, f"ap{i}", actions, excludedActions=["art1"])
        assert answer["rewardActionId"] == "art2"  # the baseline: the first allowed action
        assert answer["ranking"][0]["probability"] == 1.0


@pytest.mark.slow
def test_exploration_setting_is_epsilon_greedy(redis_url: str) -> None:
    with _app(redis_url, personalizer_reward_wait_seconds=5.0) as c:
        _rank(c, "x1", [_article(1, "news"), _article(2, "food")])
        _configure(c, explorationPercentage=0.3)
        config = c.app.state.log.config(ACTION_FEATURES_MODEL)
        assert config.params["exploration"] == "egreedy" and config.params["epsilon"] == 0.3
        wait_for(lambda: c.app.state.store.get(ACTION_FEATURES_MODEL).config.uid == config.uid)
        assert c.app.state.store.get(ACTION_FEATURES_MODEL).booster.epsilon == 0.3


def test_multislot_with_action_features_fills_each_slot_from_one_model(client) -> None:
    body = {"contextFeatures": [{"user": {"pref": "news"}}],
            "actions": [_article(i, t) for i, t in enumerate(["news", "food", "sports"])],
            "slots": [{"id": "main", "baselineAction": "art0"},
                      {"id": "side", "baselineAction": "art1", "features": [{"size": "s"}]}],
            "eventId": "ms1"}
    r = client.post(f"{BASE}/multislot/rank", json=body)
    assert r.status_code == 201, r.text
    chosen = [s["rewardActionId"] for s in r.json()["slots"]]
    assert len(set(chosen)) == 2
    assert _names(client) == [ACTION_FEATURES_MODEL]
    events = _logged(client, ACTION_FEATURES_MODEL)
    assert [e["EventId"] for e in events] == ["ms1/main", "ms1/side"]
    assert all(len(e["bb"]["candidates"]) == 3 for e in events)
    taken = events[1]["bb"]["actions"].index(chosen[0])
    assert taken in events[1]["bb"]["excluded"] and events[1]["p"][taken] == 0.0
    assert events[1]["c"]["slot.size"] == "s"


@pytest.mark.slow
def test_the_model_file_exports_and_imports_the_model_with_action_features(redis_url) -> None:
    key = "k" * 20
    with _app(redis_url, personalizer_model_signing_key=key) as c:
        for i in range(10):
            _rank(c, f"m{i}", [_article(2 * i, "news"), _article(2 * i + 1, "food")])
        wait_for(lambda: c.get(f"/v1/models/{ACTION_FEATURES_MODEL}").status_code == 200)
        exported = c.get(f"{BASE}/model", params={"signed": "true"})
        assert exported.status_code == 200, exported.text
        probe = {"contextFeatures": [{"user": {"pref": "news"}}], "eventId": "probe",
                 "actions": [_article(99, "news"), _article(98, "food")]}
        before = c.post(f"{BASE}/rank", json=probe).json()["ranking"]
    redis.Redis.from_url(redis_url).flushdb()
    with _app(redis_url, personalizer_model_signing_key=key) as c:
        r = c.put(f"{BASE}/model", content=exported.content,
                  headers={"content-type": "application/octet-stream"})
        assert r.status_code == 204, r.text
        assert c.post(f"{BASE}/rank", json=probe).json()["ranking"] == before


@pytest.mark.slow
def test_rotating_catalogue_through_the_sdk_learns_with_one_model(redis_url: str) -> None:
    """``benchmarks/paper/personalizer_catalogue.py``, short: the azure-ai-personalizer SDK,
    4 of 30 articles per rank, new ones arriving; measured at 1,000 rounds: 1.000 on the last
    200 (seed 0). The first 50 ranks come before any tree may split (grace period 50): chance."""
    pytest.importorskip("azure.ai.personalizer")
    from benchmarks.paper.personalizer_catalogue import run_catalogue

    hits, names = run_catalogue(redis_url, 600, seed=0)
    assert names == [ACTION_FEATURES_MODEL]
    assert sum(hits[:50]) / 50 < 0.6 < sum(hits[-200:]) / 200, (hits[:50], hits[-200:])


@pytest.mark.slow
def test_feature_importances_score_the_model_with_action_features(client) -> None:
    """The permutation scores decide among each logged event's own candidates; the evaluations
    read the model's events over their own candidates."""
    from service.personalizer import evaluations, importances

    for i in range(60):
        pref = ["news", "food"][i % 2]
        actions = [_article(2 * i, "news"), _article(2 * i + 1, "food")]
        body = {"contextFeatures": [{"user": {"pref": pref, "noise": i % 7}}], "eventId": f"f{i}",
                "actions": actions}
        answer = client.post(f"{BASE}/rank", json=body).json()
        chosen = next(a for a in actions if a["id"] == answer["rewardActionId"])
        value = float(chosen["features"][0]["topic"] == pref)
        assert client.post(f"{BASE}/events/f{i}/reward", json={"value": value}).status_code == 204
    wait_for(lambda: client.get(f"/v1/models/{ACTION_FEATURES_MODEL}").json()["version"] == 60,
             timeout=20)
    app = client.app.state
    scores, sampled = importances._scores(app.log, app.store, app.settings, 0, 2**62,
                                          lambda: None)
    assert sampled == 60
    assert {s["featureName"] for s in scores} == {"pref", "noise"}
    assert [m.name for m in evaluations._logs(app.log, app.settings, 0.0, 1e12)] == [
        ACTION_FEATURES_MODEL]
