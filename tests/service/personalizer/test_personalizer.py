"""The Personalizer-compatible routes (service/personalizer/) against a real redis-server,
with the request bodies of Personalizer's documented v1.0 examples (Rank.json, Reward.json)."""

from __future__ import annotations

import copy
import io
import json
import math
import time
from collections.abc import Iterator

import pytest
import redis
from fastapi.testclient import TestClient

from service.api.app import create_app
from service.domain import ModelConfig
from service.eventlog.keys import MODELS_KEY, keys
from service.eventlog.transfer import ImportError_, export_events, import_events
from service.personalizer.mapping import action_set_model_name
from service.settings import Settings
from tests.service.api.test_service_api import FAST, wait_for

BASE = "/personalizer/v1.0"

# Personalizer's v1.0 example Rank.json request, verbatim
RANK_EXAMPLE = {
    "contextFeatures": [{"timeOfDay": "Morning"}],
    "actions": [
        {"id": "NewsArticle", "features": [{"type": "News"}]},
        {"id": "SportsArticle", "features": [{"type": "Sports"}]},
        {"id": "EntertainmentArticle", "features": [{"type": "Entertainment"}]},
    ],
    "excludedActions": ["SportsArticle"],
    "eventId": "75269AD0-BFEE-4598-8196-C57383D38E10",
    "deferActivation": False,
}
REWARD_EXAMPLE = {"value": 1.0}  # Reward.json
IDS = ["NewsArticle", "SportsArticle", "EntertainmentArticle"]
SETTINGS = dict(FAST, personalizer_params={"n_learners": 3, "seed": 5},
                personalizer_action_features="never",
                personalizer_reward_wait_seconds=1.0)


@pytest.fixture
def client(redis_url: str) -> Iterator[TestClient]:
    with TestClient(create_app(Settings(redis_url=redis_url, **SETTINGS))) as c:
        yield c


def _rank(c: TestClient, event_id: str, **over) -> dict:
    body = copy.deepcopy(RANK_EXAMPLE)
    body.update(eventId=event_id, **over)
    r = c.post(f"{BASE}/rank", json=body)
    assert r.status_code == 201, r.text
    return r.json()


def _joined(c: TestClient, name: str) -> list[dict]:
    r: redis.Redis = c.app.state.log.r
    return [json.loads(f[b"e"]) for _, f in r.xrange(keys(name)["joined"])]


@pytest.mark.slow
def test_documented_rank_and_reward_examples(client: TestClient) -> None:
    r = client.post(f"{BASE}/rank", json=RANK_EXAMPLE)
    assert r.status_code == 201, r.text
    body = r.json()
    assert set(body) == {"ranking", "eventId", "rewardActionId"}
    assert body["eventId"] == RANK_EXAMPLE["eventId"]
    ranking = body["ranking"]
    assert sorted(a["id"] for a in ranking) == sorted(IDS)
    assert all(set(a) == {"id", "probability"} for a in ranking)
    assert ranking[0]["id"] == body["rewardActionId"] != "SportsArticle"
    assert ranking[-1] == {"id": "SportsArticle", "probability": 0.0}
    assert math.isclose(sum(a["probability"] for a in ranking), 1.0)

    r = client.post(f"{BASE}/events/{body['eventId']}/reward", json=REWARD_EXAMPLE)
    assert r.status_code == 204 and r.content == b""

    name = action_set_model_name(IDS)
    config = client.app.state.log.config(name)
    assert config.actions == sorted(IDS)
    assert config.default_reward == 0.0 and config.negative_rewards == "clip"
    wait_for(lambda: len(_joined(client, name)) == 1)
    (event,) = _joined(client, name)
    assert event["EventId"] == RANK_EXAMPLE["eventId"]
    assert event["bb"]["reward"] == 1.0 and event["bb"]["source"] == "feedback"
    assert event["bb"]["client_reward"] == 1.0
    assert event["bb"]["action_id"] == body["rewardActionId"]
    assert event["c"] == {"timeOfDay": "Morning"}
    assert [event["bb"]["actions"][i] for i in event["bb"]["excluded"]] == ["SportsArticle"]
    assert event["_skipLearn"] is False


def _rewards_of(c: TestClient, values: dict[str, float | None]) -> dict[str, tuple]:
    """Rank one event per key of ``values`` (one action set), send its reward (None: none, so
    the default reward is joined when the 1 s wait ends); the joined (model reward, client
    reward, source) per event."""
    for i, (event_id, value) in enumerate(values.items()):
        actions = RANK_EXAMPLE["actions"]
        _rank(c, event_id, excludedActions=[], actions=actions[::-1] if i % 2 else actions)
        if value is not None:
            r = c.post(f"{BASE}/events/{event_id}/reward", json={"value": value})
            assert r.status_code == 204, r.text
    assert list(c.app.state.log.configs()) == [action_set_model_name(IDS)]  # one model
    name = action_set_model_name(IDS)
    wait_for(lambda: len(_joined(c, name)) == len(values))
    return {e["EventId"]: (e["bb"]["reward"], e["bb"]["client_reward"], e["bb"]["source"])
            for e in _joined(c, name)}


@pytest.mark.slow
def test_rewards_clip_by_default(client: TestClient) -> None:
    """0/1 rewards are learned as 0/1 (a miss is not 0.5), negative rewards count as 0, the
    default reward is 0; every joined event keeps the reward the client sent."""
    rewards = _rewards_of(client, {"a-1": -1, "a-2": 0.5, "a-3": 0, "a-4": 1, "a-5": None})
    assert rewards == {"a-1": (0.0, -1.0, "feedback"), "a-2": (0.5, 0.5, "feedback"),
                       "a-3": (0.0, 0.0, "feedback"), "a-4": (1.0, 1.0, "feedback"),
                       "a-5": (0.0, 0.0, "default")}
    # a second reward of the same event is ignored (Personalizer's "earliest" aggregation)
    assert client.post(f"{BASE}/events/a-2/reward", json={"value": 1.0}).status_code == 204
    time.sleep(0.2)
    joined = _joined(client, action_set_model_name(IDS))
    assert len(joined) == 5
    assert [e["bb"]["reward"] for e in joined if e["EventId"] == "a-2"] == [0.5]


@pytest.mark.slow
def test_export_writes_the_reward_the_client_sent(redis_url: str, tmp_path) -> None:
    """DSJSON export: the outcome is the client's reward (before the model's mapping), for
    rewarded and defaulted Personalizer events alike (all while the app runs: its clients are
    closed at shutdown)."""
    settings = Settings(redis_url=redis_url, personalizer_negative_rewards="rescale", **SETTINGS)
    with TestClient(create_app(settings)) as c:
        learned = _rewards_of(c, {"x-1": -1, "x-2": 0, "x-3": 0.5, "x-4": None})
        out = io.StringIO()
        log = c.app.state.log
        report = export_events(log, action_set_model_name(IDS), "dsjson", out, progress=False)
        assert report.exported == 4
        lines = {d["EventId"]: d for d in map(json.loads, out.getvalue().splitlines())}
        assert {e: (d["_label_cost"], d["o"][0]["v"]) for e, d in lines.items()} == {
            "x-1": (1.0, -1.0), "x-2": (-0.0, 0.0), "x-3": (-0.5, 0.5), "x-4": (-0.0, 0.0)}
        # the export re-imports into a model with the same rule as the rewards it learned
        path = tmp_path / "export.dsjson"
        path.write_text(out.getvalue())
        log.add_config(ModelConfig("copy", "uniform", sorted(IDS), {"seed": 0},
                                   negative_rewards="rescale"))
        with pytest.raises(ImportError_, match=r"in \[0, 1\], got -1.0 \(Personalizer"):
            import_events(log, "copy", path, "dsjson", progress=False)  # identity: a clear hint
        import_events(log, "copy", path, "dsjson", reward_map="personalizer", progress=False)
        copied = {e["EventId"]: e["bb"]["reward"] for e in _joined(c, "copy")}
        assert copied == {e: reward for e, (reward, _, _) in learned.items()}


@pytest.mark.slow
def test_rewards_rescale_setting(redis_url: str) -> None:
    """personalizer_negative_rewards = rescale: [-1, 1] -> (x + 1) / 2, the default reward
    (client scale 0) is 0.5 on the model."""
    settings = Settings(redis_url=redis_url, personalizer_negative_rewards="rescale", **SETTINGS)
    with TestClient(create_app(settings)) as c:
        rewards = _rewards_of(c, {"r-1": -1, "r-2": 0.5, "r-3": 0, "r-4": None})
        config = c.app.state.log.config(action_set_model_name(IDS))
    assert config.negative_rewards == "rescale" and config.default_reward == 0.5
    assert rewards == {"r-1": (0.0, -1.0, "feedback"), "r-2": (0.75, 0.5, "feedback"),
                       "r-3": (0.5, 0.0, "feedback"), "r-4": (0.5, 0.0, "default")}


def test_old_stored_config_keeps_its_mapping(client: TestClient) -> None:
    """A config stored before negative_rewards existed was made with (x + 1) / 2 (its default
    reward too): it keeps that mapping."""
    name = action_set_model_name(IDS)
    stored = {"name": name, "booster": "adabandit", "actions": sorted(IDS),
              "params": {"n_learners": 3, "seed": 5}, "reward_wait_seconds": 1.0,
              "default_reward": 0.5, "uid": "0" * 32, "created": 1.0}
    log = client.app.state.log
    log.r.hset(MODELS_KEY, name, json.dumps(stored))
    assert log.config(name).negative_rewards == "rescale"
    client.app.state.store.load_all()
    assert _rewards_of(client, {"o-1": 0, "o-2": 1}) == {"o-1": (0.5, 0.0, "feedback"),
                                                          "o-2": (1.0, 1.0, "feedback")}


@pytest.mark.slow
def test_native_model_chooses_its_mapping(redis_url: str) -> None:
    """POST /v1/models takes negative_rewards (validated), and the Personalizer routes of a
    configured model use it."""
    settings = Settings(redis_url=redis_url, personalizer_model="news", **SETTINGS)
    with TestClient(create_app(settings)) as c:
        body = {"name": "news", "booster": "adabandit", "params": {"n_learners": 3, "seed": 1},
                "actions": IDS, "negative_rewards": "sometimes"}
        r = c.post("/v1/models", json=body)
        assert r.status_code == 422 and "negative_rewards" in r.text, r.text
        body["negative_rewards"] = "rescale"
        r = c.post("/v1/models", json=body)
        assert r.status_code == 201 and r.json()["negative_rewards"] == "rescale", r.text
        _rank(c, "n-1")
        assert c.post(f"{BASE}/events/n-1/reward", json={"value": 0}).status_code == 204
        wait_for(lambda: len(_joined(c, "news")) == 1)
        (event,) = _joined(c, "news")
        assert (event["bb"]["reward"], event["bb"]["client_reward"]) == (0.5, 0.0)


def test_errors_use_personalizer_envelope(client: TestClient) -> None:
    def error(r, status: int, code: str) -> str:
        assert r.status_code == status, r.text
        assert set(r.json()) == {"error"} and r.json()["error"]["code"] == code
        return r.json()["error"]["message"]

    error(client.post(f"{BASE}/rank", json={"contextFeatures": []}), 400, "InvalidRankRequest")
    body = copy.deepcopy(RANK_EXAMPLE)
    body["excludedActions"] = ["Nope"]
    assert "Nope" in error(client.post(f"{BASE}/rank", json=body), 400, "InvalidRankRequest")
    body["excludedActions"] = IDS
    error(client.post(f"{BASE}/rank", json=body), 400, "InvalidRankRequest")
    body = copy.deepcopy(RANK_EXAMPLE)
    body["actions"].append({"id": "NewsArticle"})
    error(client.post(f"{BASE}/rank", json=body), 400, "InvalidRankRequest")

    _rank(client, "dup")
    error(client.post(f"{BASE}/rank", json={**RANK_EXAMPLE, "eventId": "dup"}), 409, "Conflict")
    for value in (1.5, -2, "high"):
        error(client.post(f"{BASE}/events/dup/reward", json={"value": value}), 400,
              "InvalidRewardRequest")
    error(client.post(f"{BASE}/events/dup/reward", json={}), 400, "InvalidRewardRequest")
    error(client.post(f"{BASE}/events/nope/reward", json={"value": 1}), 404, "NotFound")
    error(client.post(f"{BASE}/events/nope/activate"), 404, "InvalidEventIdToActivate")
    # JSON too deep for the parser (FastAPI's "error parsing the body"), and not JSON at all
    deep = '{"actions": [{"id": "a"}, {"id": "b"}], "contextFeatures": [{"a": '
    deep += "[" * 1500 + "1" + "]" * 1500 + "}]}"
    for content in (deep, "{not json"):
        r = client.post(f"{BASE}/rank", content=content,
                        headers={"content-type": "application/json"})
        error(r, 400, "InvalidRankRequest")
    assert client.post(f"{BASE}/events/dup/activate").status_code == 204  # not deferred: no-op


@pytest.mark.slow
def test_defer_activation(client: TestClient) -> None:
    name = action_set_model_name(IDS)
    log_r: redis.Redis = client.app.state.log.r
    _rank(client, "d-on", deferActivation=True)
    _rank(client, "d-off", deferActivation=True)
    # a reward before activation is kept aside; nothing is in the log yet
    assert client.post(f"{BASE}/events/d-on/reward", json={"value": 1}).status_code == 204
    assert client.post(f"{BASE}/events/d-off/reward", json={"value": 1}).status_code == 204
    assert log_r.xlen(keys(name)["decisions"]) == 0 and log_r.xlen(keys(name)["feedback"]) == 0
    assert client.post(f"{BASE}/events/d-on/activate").status_code == 204
    assert client.post(f"{BASE}/events/d-on/activate").status_code == 204  # idempotent
    assert log_r.xlen(keys(name)["decisions"]) == 1 and log_r.xlen(keys(name)["feedback"]) == 1
    wait_for(lambda: len(_joined(client, name)) == 1)
    time.sleep(1.3)  # past the 1 s reward window: d-off was never activated
    assert [e["EventId"] for e in _joined(client, name)] == ["d-on"]
    (event,) = _joined(client, name)
    assert event["bb"]["reward"] == 1.0 and event["bb"]["source"] == "feedback"
    assert event["bb"]["personalizer"]["deferred"] is True
    assert client.post(f"{BASE}/events/d-off/activate").status_code == 204  # too late: dropped
    time.sleep(0.2)
    assert [e["EventId"] for e in _joined(client, name)] == ["d-on"]


@pytest.mark.slow
def test_configured_model_and_keys(redis_url: str) -> None:
    settings = Settings(redis_url=redis_url, personalizer_model="news", api_keys="k1",
                        admin_keys="adm", **SETTINGS)
    with TestClient(create_app(settings)) as c:
        admin = {"Authorization": "Bearer adm"}
        body = {"name": "news", "booster": "banditbbm", "params": {"n_learners": 3, "seed": 1},
                "actions": IDS + ["WeatherArticle"]}
        assert c.post("/v1/models", json=body, headers=admin).status_code == 201
        r = c.post(f"{BASE}/rank", json=RANK_EXAMPLE)
        assert r.status_code == 401 and r.json()["error"]["code"] == "Unauthorized"
        for wrong in ({"Ocp-Apim-Subscription-Key": "k2"}, {"Authorization": "Bearer k2"}):
            for path, body in [("rank", RANK_EXAMPLE), ("events/e/reward", REWARD_EXAMPLE),
                               ("events/e/activate", None)]:
                r = c.post(f"{BASE}/{path}", json=body, headers=wrong)
                assert r.status_code == 401, (path, wrong, r.text)
        key = {"Ocp-Apim-Subscription-Key": "k1"}
        r = c.post(f"{BASE}/rank", json=RANK_EXAMPLE, headers=key)
        assert r.status_code == 201, r.text
        ranking = r.json()["ranking"]
        assert sorted(a["id"] for a in ranking) == sorted(IDS)  # WeatherArticle not offered
        event = json.loads(c.app.state.log.r.xrange(keys("news")["decisions"])[0][1][b"e"])
        excluded = [event["bb"]["actions"][i] for i in event["bb"]["excluded"]]
        assert sorted(excluded) == ["SportsArticle", "WeatherArticle"]
        bad = copy.deepcopy(RANK_EXAMPLE)
        bad["actions"].append({"id": "Podcast"})
        bad["eventId"] = "x2"
        r = c.post(f"{BASE}/rank", json=bad, headers=key)
        assert r.status_code == 400 and "Podcast" in r.json()["error"]["message"]
        r = c.post(f"{BASE}/events/{RANK_EXAMPLE['eventId']}/reward", json=REWARD_EXAMPLE,
                   headers={"Authorization": "Bearer k1"})
        assert r.status_code == 204


@pytest.mark.slow
def test_model_creation_needs_an_admin_key(redis_url: str) -> None:
    """A rank that would create a model (a new action set) needs an admin key (403 in
    Personalizer's envelope with a user key); ranks of existing models work with any key."""
    settings = Settings(redis_url=redis_url, api_keys="k1", admin_keys="adm", **SETTINGS)
    with TestClient(create_app(settings)) as c:
        log = c.app.state.log
        user = {"Ocp-Apim-Subscription-Key": "k1"}
        for headers in (user, {"Authorization": "Bearer k1"}):
            r = c.post(f"{BASE}/rank", json=RANK_EXAMPLE, headers=headers)
            assert r.status_code == 403, r.text
            assert set(r.json()) == {"error"} and r.json()["error"]["code"] == "Forbidden"
            message = r.json()["error"]["message"]
            assert "admin key" in message and "personalizer_auto_create" in message
            assert action_set_model_name(IDS) in message
        assert log.configs() == {}  # nothing created, and the event id is still free
        assert c.post(f"{BASE}/rank", json=RANK_EXAMPLE).status_code == 401  # no key: 401 first

        r = c.post(f"{BASE}/rank", json=RANK_EXAMPLE, headers={"Ocp-Apim-Subscription-Key": "adm"})
        assert r.status_code == 201, r.text  # the admin key creates the model (same event id)
        assert list(log.configs()) == [action_set_model_name(IDS)]

        # the same action set (any order) with the user key: the existing model serves it
        body = copy.deepcopy(RANK_EXAMPLE)
        body.update(eventId="u-1", actions=list(reversed(body["actions"])))
        r = c.post(f"{BASE}/rank", json=body, headers=user)
        assert r.status_code == 201, r.text
        assert c.post(f"{BASE}/events/u-1/reward", json=REWARD_EXAMPLE,
                      headers=user).status_code == 204
        # another action set with the user key: refused again, still one model
        body = copy.deepcopy(RANK_EXAMPLE)
        body.update(eventId="u-2", excludedActions=[])
        body["actions"] = body["actions"][:2]
        r = c.post(f"{BASE}/rank", json=body, headers=user)
        assert r.status_code == 403 and r.json()["error"]["code"] == "Forbidden"
        assert list(log.configs()) == [action_set_model_name(IDS)]
        spec = c.get("/openapi.json", headers={"Authorization": "Bearer k1"}).json()
        assert "403" in spec["paths"][f"{BASE}/rank"]["post"]["responses"]


def test_model_creation_with_any_key_when_allowed(redis_url: str) -> None:
    settings = Settings(redis_url=redis_url, api_keys="k1", admin_keys="adm",
                        personalizer_auto_create="any-key", **SETTINGS)
    with TestClient(create_app(settings)) as c:
        r = c.post(f"{BASE}/rank", json=RANK_EXAMPLE, headers={"Ocp-Apim-Subscription-Key": "k1"})
        assert r.status_code == 201, r.text
        assert list(c.app.state.log.configs()) == [action_set_model_name(IDS)]


@pytest.mark.slow
def test_action_set_model_made_elsewhere_with_other_actions(client: TestClient) -> None:
    """A model named like an action set's (``pz-<hash>``) but made by POST /v1/models with other
    actions: 409 in the envelope (was a 500: the ranking looked the ids up in its actions)."""
    name = action_set_model_name(["x", "y"])
    body = {"name": name, "booster": "adabandit", "actions": ["p", "q"],
            "params": {"n_learners": 3, "seed": 1}}
    assert client.post("/v1/models", json=body).status_code == 201
    r = client.post(f"{BASE}/rank", json={"actions": [{"id": "x"}, {"id": "y"}]})
    assert r.status_code == 409 and r.json()["error"]["code"] == "Conflict", r.text
    assert name in r.json()["error"]["message"] and "x, y" in r.json()["error"]["message"]
    # with the action set among its actions, it serves the rank (the others excluded)
    superset = action_set_model_name(["x", "y", "z"])
    body.update(name=superset, actions=["w", "x", "y", "z"])
    assert client.post("/v1/models", json=body).status_code == 201
    r = client.post(f"{BASE}/rank", json={"actions": [{"id": a} for a in "xyz"]})
    assert r.status_code == 201 and {a["id"] for a in r.json()["ranking"]} == set("xyz"), r.text


@pytest.mark.slow
def test_every_path_form_answers_and_is_labelled_in_the_metrics(client: TestClient) -> None:
    """``/personalizer/v1.0`` (v1.0 and the older SDK), ``/personalizer`` (azure-ai-personalizer,
    with its api-version) and ``/personalizer/v1.1-preview.1`` serve the same routes."""
    for i, (prefix, query) in enumerate([
            (BASE, ""), ("/personalizer", "?api-version=2022-09-01-preview"),
            ("/personalizer/v1.1-preview.1", "")]):
        r = client.post(f"{prefix}/rank{query}", json={**RANK_EXAMPLE, "eventId": f"form{i}"})
        assert r.status_code == 201, r.text
        r = client.post(f"{prefix}/events/form{i}/reward{query}", json={"value": 1})
        assert r.status_code == 204, r.text
    assert client.post("/personalizer/v2/rank", json=RANK_EXAMPLE).status_code == 404
    scrape = client.get("/metrics").text
    for path in (f"{BASE}/rank", "/personalizer/rank", "/personalizer/v1.1-preview.1/rank",
                 "/personalizer/events/{eventId}/reward"):
        assert f'route="{path}"' in scrape, path


def test_a_model_file_has_its_own_body_limit(redis_url: str) -> None:
    """``PUT /model`` takes files up to ``max_model_file_bytes``, other bodies
    ``max_body_bytes`` (4096 here)."""
    settings = Settings(redis_url=redis_url, **{**SETTINGS, "max_model_file_bytes": 65536})
    with TestClient(create_app(settings)) as c:
        blob = bytes(20000)
        for prefix in (BASE, "/personalizer"):
            r = c.put(f"{prefix}/model", content=blob,
                      headers={"content-type": "application/octet-stream"})
            assert r.status_code == 400, r.text  # read, and refused as no model file of ours
        r = c.post(f"{BASE}/rank", content=blob, headers={"content-type": "application/json"})
        assert r.status_code == 413
        r = c.put(f"{BASE}/model", content=bytes(70000),
                  headers={"content-type": "application/octet-stream"})
        assert r.status_code == 413 and "65536" in r.json()["error"]["message"]
        r = c.put(f"{BASE}/model/x", content=blob)  # only the model route itself
        assert r.status_code == 413
    # with keys: only an admin key may send a large body (none is held before the key check)
    keyed = Settings(redis_url=redis_url, **{**SETTINGS, "max_model_file_bytes": 65536,
                                             "api_keys": "user-key-1", "admin_keys": "admin-1"})
    with TestClient(create_app(keyed)) as c:
        for key, status in (("user-key-1", 413), ("admin-1", 400), ("wrong", 413)):
            r = c.put(f"{BASE}/model", content=blob,
                      headers={"content-type": "application/octet-stream",
                               "Ocp-Apim-Subscription-Key": key})
            assert r.status_code == status, (key, r.text)
        r = c.put(f"{BASE}/model", content=blob, headers={"Authorization": "Bearer admin-1"})
        assert r.status_code == 400, r.text


def test_both_credentials_are_checked_when_both_are_sent(redis_url: str) -> None:
    """A valid subscription key does not carry an invalid bearer token, and a user key beside
    an admin key gets a user's rights."""
    settings = Settings(redis_url=redis_url, api_keys="k1", admin_keys="adm", **SETTINGS)
    with TestClient(create_app(settings)) as c:
        both = {"Ocp-Apim-Subscription-Key": "adm", "Authorization": "Bearer nope"}
        r = c.post(f"{BASE}/rank", json=RANK_EXAMPLE, headers=both)
        assert r.status_code == 401 and "both must be valid" in r.json()["error"]["message"]
        mixed = {"Ocp-Apim-Subscription-Key": "adm", "Authorization": "Bearer k1"}
        r = c.post(f"{BASE}/rank", json=RANK_EXAMPLE, headers=mixed)
        assert r.status_code == 403 and r.json()["error"]["code"] == "Forbidden"
        admin = {"Ocp-Apim-Subscription-Key": "adm", "Authorization": "Bearer adm"}
        assert c.post(f"{BASE}/rank", json=RANK_EXAMPLE, headers=admin).status_code == 201


def test_a_feature_sent_as_a_number_then_a_string_is_accepted(client: TestClient) -> None:
    """Personalizer (and VW) take ``3`` and ``"3"`` as a numeric and a categorical feature:
    both ranks answer 201 and the second decides on ``age:str``."""
    body = {**RANK_EXAMPLE, "excludedActions": []}
    first = client.post(f"{BASE}/rank", json={**body, "eventId": "t1",
                                              "contextFeatures": [{"age": 3}]})
    second = client.post(f"{BASE}/rank", json={**body, "eventId": "t2",
                                               "contextFeatures": [{"age": "3"}]})
    assert (first.status_code, second.status_code) == (201, 201), second.text
    slots = client.post(f"{BASE}/multislot/rank", json={
        "contextFeatures": [{"age": "4"}], "actions": body["actions"],
        "slots": [{"id": "s1", "baselineAction": "NewsArticle"}], "eventId": "t3"})
    assert slots.status_code == 201, slots.text
