"""Models with action features in the service: each predict brings its candidates,
each described by features; the ``adf`` booster (:class:`boosters.online.adf.ActionFeatureBooster`)
decides among them, the decision event logs them, and the learner applies the joined event."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from fastapi.testclient import TestClient

from service.api.app import create_app
from service.models.store import restore
from service.settings import Settings
from tests.service.api.test_service_api import FAST, wait_for

SETTINGS = {**FAST, "max_body_bytes": 65536}
CATS = ["x", "y", "z"]


@pytest.fixture
def client(redis_url: str) -> Iterator[TestClient]:
    with TestClient(create_app(Settings(redis_url=redis_url, **SETTINGS))) as c:
        yield c


def make_adf_model(c: TestClient, name: str = "adf", **params) -> dict:
    body = {"name": name, "action_features": True,
            "params": {"seed": 3, "grace_period": 20, **params}}
    r = c.post("/v1/models", json=body)
    assert r.status_code == 201, r.text
    wait_for(lambda: c.app.state.store.get(name).owned)
    return r.json()


def candidates(rng: np.random.Generator, k: int, tag: str) -> list[dict]:
    return [{"id": f"{tag}-{i}", "features": {"cat": CATS[rng.integers(3)],
                                               "price": round(float(rng.random()), 3)}}
            for i in range(k)]


@pytest.mark.slow
def test_create_an_action_feature_model(client: TestClient) -> None:
    info = make_adf_model(client)
    assert info["booster"] == "adf" and info["actions"] == [] and info["params"]["seed"] == 3
    # booster "adf" says the same; either without the other, or fixed actions with it, is a 422
    r = client.post("/v1/models", json={"name": "adf2", "booster": "adf", "action_features": True})
    assert r.status_code == 201, r.text
    for body, words in [
        ({"name": "b1", "booster": "adf"}, "action_features"),
        ({"name": "b2", "booster": "uniform", "action_features": True}, "action_features"),
        ({"name": "b3", "action_features": True, "actions": ["a", "b"]}, "no fixed actions"),
        ({"name": "b4", "actions": ["a", "b"]}, "give the booster"),
        ({"name": "b5", "booster": "uniform", "actions": ["a"]}, "at least 2"),
        ({"name": "b6", "action_features": True, "params": {"n_learners": 3}}, "n_learners"),
        ({"name": "b7", "action_features": True, "params": {"n_trees": 0}}, "n_trees"),
    ]:
        r = client.post("/v1/models", json=body)
        assert r.status_code == 422 and words in r.text, (body, r.text)


def test_predict_over_candidate_sets(client: TestClient) -> None:
    make_adf_model(client)
    rng = np.random.default_rng(0)
    for k in (1, 2, 5, 9):  # sizes vary, ids are new every request
        items = candidates(rng, k, f"r{k}")
        excluded = [items[0]["id"]] if k > 1 else []
        r = client.post("/v1/models/adf/predict", json={
            "context": {"pref": "x", "age": 30}, "actions": items, "excluded_actions": excluded,
            "event_id": f"e-{k}"})
        assert r.status_code == 200, r.text
        out = r.json()
        assert set(out["probabilities"]) == {c["id"] for c in items}
        assert sum(out["probabilities"].values()) == pytest.approx(1.0)
        assert all(out["probabilities"][i] == 0.0 for i in excluded)
        assert out["action"] not in excluded
        assert out["probability"] == out["probabilities"][out["action"]] > 0
        # idempotent: the same request again gets the logged decision
        again = client.post("/v1/models/adf/predict", json={
            "context": {"pref": "x", "age": 30}, "actions": items, "excluded_actions": excluded,
            "event_id": f"e-{k}"})
        assert again.json() == out


@pytest.mark.parametrize(("body", "words"), [
    ({}, "send its candidates"),
    ({"actions": []}, "at least 1"),
    ({"actions": [{"id": "a", "features": {}}, {"id": "a", "features": {}}]}, "repeated: a"),
    ({"actions": [{"id": "a", "features": {"f": [1]}}]}, "features"),
    ({"actions": [{"id": "a", "features": {"f": True}}]}, "features"),
    ({"actions": [{"id": "a", "feats": {}}]}, "feats"),
    ({"actions": [{"features": {}}]}, "id"),
    ({"actions": [{"id": "a", "features": {f"f{i}": i for i in range(21)}}]},
     "candidate 'a': too many features"),
    ({"actions": [{"id": "a", "features": {"f": "s" * 5000}}]}, "candidate 'a'"),
    ({"actions": [{"id": "a", "features": {}}], "excluded_actions": ["b"]}, "unknown action id"),
    ({"actions": [{"id": "a", "features": {}}], "excluded_actions": ["a"]}, "excludes every"),
    ({"actions": [{"id": "a", "features": {}}], "context": {"a.x": 1}}, "action prefix"),
])
@pytest.mark.slow
def test_a_bad_candidate_list_is_a_422_naming_the_problem(
    client: TestClient, body: dict, words: str
) -> None:
    make_adf_model(client)
    r = client.post("/v1/models/adf/predict", json={"context": {"pref": "x"}, **body})
    assert r.status_code == 422 and words in r.text, r.text


@pytest.mark.slow
def test_fixed_action_models_refuse_candidates_and_adf_models_labels(client: TestClient) -> None:
    make_adf_model(client)
    r = client.post("/v1/models", json={"name": "fixed", "booster": "uniform",
                                        "actions": ["a", "b"]})
    assert r.status_code == 201, r.text
    r = client.post("/v1/models/fixed/predict", json={
        "context": {}, "actions": [{"id": "a", "features": {}}]})
    assert r.status_code == 422 and "fixed actions" in r.text, r.text
    r = client.post("/v1/models/adf/predict", json={
        "context": {}, "actions": [{"id": "a", "features": {}}], "event_id": "l1"})
    assert r.status_code == 200, r.text
    r = client.post("/v1/models/adf/feedback", json={"event_id": "l1", "label": "a"})
    assert r.status_code == 422 and "send a reward" in r.text, r.text
    r = client.put("/v1/models/adf/serving", json={"mode": "policy"})
    assert r.status_code == 422 and "online booster only" in r.text, r.text


def play(c: TestClient, rounds: int, seed: int = 1, tag: str = "t") -> list[tuple[bool, float]]:
    """``rounds`` decisions of the rule "reward 1 iff the candidate's cat is the context's
    pref", each with its feedback; per round, whether the greedy candidate (the most probable)
    hits, and the share of candidates that hit (a random choice's hit rate)."""
    rng = np.random.default_rng(seed)
    out = []
    for t in range(rounds):
        pref = CATS[rng.integers(3)]
        items = candidates(rng, int(rng.integers(2, 6)), f"{tag}{t}")
        cats = {item["id"]: item["features"]["cat"] for item in items}
        r = c.post("/v1/models/adf/predict", json={
            "context": {"pref": pref, "age": round(float(rng.random()), 3)}, "actions": items,
            "event_id": f"{tag}{t}"})
        assert r.status_code == 200, r.text
        decided = r.json()
        reward = 1.0 if cats[decided["action"]] == pref else 0.0
        r = c.post("/v1/models/adf/feedback", json={"event_id": f"{tag}{t}", "reward": reward})
        assert r.status_code == 200, r.text
        p = decided["probabilities"]
        greedy = max(p, key=p.get)
        out.append((cats[greedy] == pref, float(np.mean([v == pref for v in cats.values()]))))
        # the learner applies each round before the next decision (else it trails by its lag
        # and the decisions, hence the hit rate, would depend on timing)
        wait_for(lambda n=t + 1: c.app.state.store.get("adf").version >= n, timeout=20)
    return out


@pytest.mark.slow
def test_learns_the_rule_and_a_restart_decides_the_same(client: TestClient) -> None:
    make_adf_model(client)
    rounds = play(client, 300)
    wait_for(lambda: client.app.state.store.get("adf").version >= 300, timeout=60)
    last = rounds[-100:]
    hit = np.mean([h for h, _ in last])
    chance = np.mean([b for _, b in last])
    # measured (deterministic: the learner applies every round before the next decision):
    # seed 1, the one here, 0.73 against chance 0.38; seeds 2, 3, 4: 0.49/0.32, 0.75/0.35,
    # 0.63/0.28, so the margin asked is below the smallest one seen (0.17)
    assert hit >= chance + 0.15, (hit, chance)

    model = client.app.state.store.get("adf")
    assert model.booster.n_learned == 300
    # a restart: the latest snapshot plus the joined events after it
    log = client.app.state.log
    assert log.load_snapshot("adf")["version"] > 0  # snapshot_every_events=5
    restored = restore(log, log.config("adf"))
    assert restored.version == model.version and restored.joined_id == model.joined_id
    rng = np.random.default_rng(9)
    for i in range(20):
        items = [c["features"] for c in candidates(rng, 4, "q")]
        context = {"pref": CATS[i % 3], "age": 0.5}
        a, _ = model.decide(context, f"q{i}", [1], candidates=items)
        b, _ = restored.decide(context, f"q{i}", [1], candidates=items)
        assert a.action == b.action and a.probabilities.tolist() == b.probabilities.tolist()
    # a replica's serving copy of the latest snapshot decides as that snapshot does
    whole, serving = _from_one_snapshot(log)
    assert serving.serving_copy and serving.version == whole.version
    a, _ = whole.decide({"pref": "y"}, "s", candidates=items)
    b, _ = serving.decide({"pref": "y"}, "s", candidates=items)
    assert a.probabilities.tolist() == b.probabilities.tolist()


def _from_one_snapshot(log):
    """The model restored whole and as a serving copy from the same latest snapshot: the
    learner may still write a newer one between two reads (every 5 events, behind its model),
    so the pair is read again until both carry one version."""
    pair = []

    def same_version() -> bool:
        pair[:] = [restore(log, log.config("adf"), replay=False),
                   restore(log, log.config("adf"), replay=False, serving=True)]
        return pair[0].version == pair[1].version

    wait_for(same_version, timeout=10)
    return pair[0], pair[1]


@pytest.mark.slow
def test_joined_events_carry_the_candidates(client: TestClient) -> None:
    make_adf_model(client)
    items = [{"id": "a", "features": {"cat": "x"}}, {"id": "b", "features": {"cat": "y"}}]
    r = client.post("/v1/models/adf/predict", json={
        "context": {"pref": "y"}, "actions": items, "event_id": "j1"})
    assert r.status_code == 200, r.text
    assert client.post("/v1/models/adf/feedback",
                       json={"event_id": "j1", "reward": 1}).status_code == 200
    wait_for(lambda: client.app.state.store.get("adf").version >= 1, timeout=20)
    (_, event), = client.app.state.log.joined_after("adf", "0-0")
    assert event["bb"]["actions"] == ["a", "b"]
    assert event["bb"]["candidates"] == [{"cat": "x"}, {"cat": "y"}]
    assert event["bb"]["reward"] == 1.0 and event["bb"]["action_id"] == r.json()["action"]
    assert client.app.state.store.get("adf").booster.n_learned == 1
