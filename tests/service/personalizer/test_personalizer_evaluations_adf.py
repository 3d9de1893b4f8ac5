"""Offline evaluations with the model with action features: its log is read on each
event's own candidates; Online, Baseline and Random work per event; a Custom policy of booster
``adf`` is replayed through that model's log, the fixed-action ones through the others' (on the
logs a policy does not decide for, the logged decisions stand; one that decides for none has no
estimate); the learning policy refuses ``adf`` (docs/personalizer.md, "Policy and
evaluations")."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime

import numpy as np
import pytest
import redis
from fastapi.testclient import TestClient

from boosters.base import Decision
from service.api.app import create_app
from service.eventlog.keys import keys
from service.events import decision_event, dumps, joined_event
from service.personalizer import evaluations
from service.personalizer.evaluation import Candidate, ModelLog, evaluate
from service.personalizer.mapping import ACTION_FEATURES_MODEL, action_set_model_name
from service.personalizer.policy import parse_arguments
from service.personalizer.schemas import EvaluationContract
from service.settings import Settings
from tests.service.api.test_service_api import FAST

BASE = "/personalizer/v1.0"
TOPICS = ["news", "food", "sports"]
ACTIONS = ["a", "b", "c"]
ADF = {"name": "adf", "arguments": "--booster adf --grace_period 20"}
TREES = {"name": "trees", "arguments": "--booster egreedy_tree --epsilon 0.05"}


def custom(policy: dict) -> Candidate:
    booster, params = parse_arguments(policy["arguments"])
    return Candidate(policy["name"], "Custom", policy["arguments"], booster, params)


BUILT_IN = [Candidate("Online", "Online"), Candidate("Baseline", "Baseline"),
            Candidate("Random", "Random")]


def adf_joined(n: int, seed: int, start: float = 1000.0, step: float = 1.0) -> list[dict]:
    """Uniformly random decisions over 2 to 4 candidates of random topics; reward 1 iff the
    chosen candidate's topic is the context's ``pref`` (context x candidate features)."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        pref, k = TOPICS[rng.integers(3)], int(rng.integers(2, 5))
        items = [{"topic": TOPICS[rng.integers(3)], "words": int(rng.integers(50, 500))}
                 for _ in range(k)]
        a, ts = int(rng.integers(k)), start + i * step
        ev = decision_event(f"adf{seed}-{i}", ts, 0, [f"i{i}-{j}" for j in range(k)],
                            {"pref": pref}, Decision(a, np.full(k, 1 / k)), candidates=items)
        out.append(joined_event(ev, reward=float(items[a]["topic"] == pref), label=None,
                                source="feedback", learn=True, ts=ts))
    return out


def fixed_joined(n: int, seed: int, start: float = 1000.0, step: float = 1.0) -> list[dict]:
    """Uniformly random decisions over ``ACTIONS``; reward 1 iff the action is the segment."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        segment, a, ts = int(rng.integers(3)), int(rng.integers(3)), start + i * step
        ev = decision_event(f"fix{seed}-{i}", ts, 0, ACTIONS, {"segment": f"s{segment}"},
                            Decision(a, np.full(3, 1 / 3)))
        ev["bb"]["personalizer"] = {"deferred": False, "baseline": "a"}
        out.append(joined_event(ev, reward=float(a == segment), label=None, source="feedback",
                                learn=True, ts=ts))
    return out


def by_name(results: list[dict]) -> dict[str, dict]:
    return {r["name"]: r for r in results}


def interval(result: dict) -> tuple[float, float]:
    total = result["totalSummary"]
    return (total["averageReward"] - total["confidenceInterval"],
            total["averageReward"] + total["confidenceInterval"])


def _known(i: int, k: int, p: list[float], chosen: int, reward: float,
           baseline: str | None = None, excluded: list[int] | None = None) -> dict:
    ids = [f"id{i}-{j}" for j in range(k)]
    ev = decision_event(f"k{i}", 10.0 + i, 0, ids, {"u": i}, Decision(chosen, np.array(p)),
                        excluded=excluded, candidates=[{"n": j} for j in range(k)])
    if baseline is not None:
        ev["bb"]["personalizer"] = {"deferred": False, "baseline": baseline}
    return joined_event(ev, reward=reward, label=None, source="feedback", learn=True,
                        ts=10.0 + i)


def test_online_baseline_and_random_on_a_known_log() -> None:
    """Four events of 3, 2, 3 (one excluded) and 4 candidates: every estimate by hand."""
    joined = [_known(0, 3, [1 / 3] * 3, 0, 1.0, baseline="id0-1"),
              _known(1, 2, [0.8, 0.2], 1, 0.5, baseline="id1-1"),
              _known(2, 3, [0.5, 0.5, 0.0], 0, 0.0, excluded=[2]),  # no baseline: the first
              _known(3, 4, [0.25] * 4, 3, 1.0, baseline="id3-3")]
    log = ModelLog.of(joined, [], 0.0, 1e10, ACTION_FEATURES_MODEL)
    assert log.action_features and len(log.events) == 4
    assert log.baseline.tolist() == [1, 1, 0, 3]  # looked up in each event's own actions
    results = by_name(evaluate([log], BUILT_IN))
    total = {n: r["totalSummary"] for n, r in results.items()}
    assert total["Online"]["averageReward"] == pytest.approx(2.5 / 4)  # the logged mean
    # Baseline: w = 0, 1 / 0.2, 1 / 0.5, 1 / 0.25 on rewards 1, 0.5, 0, 1
    assert total["Baseline"]["snipsEstimatorDenominator"] == pytest.approx(11.0)
    assert total["Baseline"]["ipsEstimatorNumerator"] == pytest.approx(6.5)
    assert total["Baseline"]["averageReward"] == pytest.approx(6.5 / 11)
    assert total["Baseline"]["nonZeroProbability"] == 3
    # Random: 1 / (allowed candidates) over the propensity: w = 1, 2.5, 1, 1
    assert total["Random"]["averageReward"] == pytest.approx(3.25 / 5.5)
    assert all(t["ipsEstimatorDenominator"] == 4 for t in total.values())


@pytest.mark.slow
def test_an_adf_custom_policy_beats_random() -> None:
    """Reward by context x candidate features: an adf policy replayed through the log learns
    it; a fixed-action policy decides for no model here: no estimate, sorted last."""
    log = ModelLog.of(adf_joined(1200, 0), [], 0.0, 1e10, ACTION_FEATURES_MODEL)
    results = evaluate([log], [*BUILT_IN, custom(ADF), custom(TREES)])
    named = by_name(results)
    assert results[0]["name"] == "adf" and "description" not in named["adf"]
    assert interval(named["adf"])[0] > interval(named["Random"])[1]
    # measured (deterministic): 0.642 +- 0.036 against Random's 0.333 +- 0.027
    assert named["adf"]["totalSummary"]["averageReward"] > 0.55
    assert results[-1]["name"] == "trees"
    assert named["trees"]["totalSummary"]["averageReward"] is None
    assert named["trees"]["description"].startswith("NotApplicable: booster 'egreedy_tree'")
    assert named["trees"]["summary"] and all(
        row["averageReward"] is None for row in named["trees"]["summary"])


@pytest.mark.slow
def test_a_mixed_endpoint_evaluates_both_models() -> None:
    """A fixed-action model and the model with action features: each Custom policy decides for
    its own kind of model, the logged decisions stand for the other; all over the same
    events."""
    fixed = ModelLog.of(fixed_joined(600, 1), ACTIONS, 0.0, 1e10, "fixed")
    adf = ModelLog.of(adf_joined(600, 2, start=1000.5), [], 0.0, 1e10, ACTION_FEATURES_MODEL)
    named = by_name(evaluate([fixed, adf], [*BUILT_IN, custom(ADF), custom(TREES)]))
    assert all(r["totalSummary"]["ipsEstimatorDenominator"] == 1200 for r in named.values())
    assert named["adf"]["description"].endswith("the others (fixed)")
    assert named["trees"]["description"].endswith(f"the others ({ACTION_FEATURES_MODEL})")
    for name in ("adf", "trees"):  # each learns its model's rule; the other's events at w = 1
        assert interval(named[name])[0] > interval(named["Random"])[1], name
        assert named[name]["totalSummary"]["nonZeroProbability"] >= 600
    # alone on its own model each does at least as well as over both models
    own = by_name(evaluate([adf], [custom(ADF)]))["adf"]["totalSummary"]["averageReward"]
    assert own > named["adf"]["totalSummary"]["averageReward"]


# --- through the service -------------------------------------------------------------------------


@pytest.fixture
def client(redis_url: str) -> Iterator[TestClient]:
    settings = Settings(redis_url=redis_url, **{**FAST, "run_learner": False},
                        personalizer_booster="uniform", personalizer_params={},
                        personalizer_action_features="auto",
                        personalizer_action_features_params={"seed": 3})
    with TestClient(create_app(settings)) as c:
        yield c


def _mixed_endpoint(c: TestClient, redis_url: str, n: int = 300) -> tuple[str, float]:
    """Both models made by a rank each, then ``n`` joined events of each over the last hour."""
    for actions in ([{"id": a} for a in ACTIONS],
                    [{"id": a, "features": [{"topic": t}]} for a, t in zip(ACTIONS, TOPICS)]):
        r = c.post(f"{BASE}/rank", json={"contextFeatures": [{"x": 1}], "actions": actions})
        assert r.status_code == 201, r.text
    fixed, now = action_set_model_name(ACTIONS), time.time()
    pipe = redis.Redis.from_url(redis_url).pipeline()
    for name, events in ((fixed, fixed_joined(n, 3, now - 3600, 3.0)),
                         (ACTION_FEATURES_MODEL, adf_joined(n, 4, now - 3599, 3.0))):
        for ev in events:
            pipe.xadd(keys(name)["joined"], {"e": dumps(ev)})
    pipe.execute()
    return fixed, now


def _contract(now: float, policies: list[dict]) -> dict:
    return {"name": "compare", "startTime": datetime.fromtimestamp(now - 7200, UTC).isoformat(),
            "endTime": datetime.fromtimestamp(now + 60, UTC).isoformat(), "policies": policies}


@pytest.mark.slow
def test_an_endpoint_with_action_features_is_evaluated(client, redis_url: str) -> None:
    fixed, now = _mixed_endpoint(client, redis_url)
    state = client.app.state
    cost, events = evaluations.estimate_cost(state.log, state.settings, [
        {"name": "adf", "booster": "adf", "params": {"n_trees": 3}},
        {"name": "t", "booster": "adabandit", "params": {"n_learners": 4}}])
    assert (cost, events) == (3 * 300 + 4 * 300, 600)  # each replays its own model's events
    r = client.post(f"{BASE}/evaluations", json=_contract(now, [ADF, TREES]))
    assert r.status_code == 201, r.text
    evaluation_id = r.json()["id"]
    assert evaluations.run_pending(state.log, state.settings, "w1") == [evaluation_id]
    doc = client.get(f"{BASE}/evaluations/{evaluation_id}").json()
    assert doc["status"] == "completed", doc["description"]
    named = by_name(doc["policyResults"])
    assert set(named) == {"adf", "trees", "default", "Baseline", "Random"}
    assert named["default"]["policySource"] == "Online"
    assert named["adf"]["policySource"] == "Custom"
    assert named["adf"]["arguments"] == ADF["arguments"]
    assert all(r["totalSummary"]["ipsEstimatorDenominator"] == 600 for r in named.values())
    assert named["adf"]["description"].endswith(f"({fixed})")
    assert {v["name"] for v in doc["content"]["value"]} == set(named)


@pytest.mark.slow
def test_the_learning_policy_refuses_adf(client, redis_url: str) -> None:
    """``adf`` is no learning policy (the model with action features takes its parameters from
    ``personalizer_action_features_params``): a 400 on PUT and on applying an evaluation's."""
    _, now = _mixed_endpoint(client, redis_url, n=60)
    r = client.put(f"{BASE}/configurations/policy", json={"name": "x", "arguments":
                                                           "--booster adf --n_trees 2"})
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["code"] == "InvalidPolicyConfiguration"
    assert "personalizer_action_features_params" in error["message"]
    bad = client.post(f"{BASE}/evaluations", json=_contract(now, [
        {"name": "bad", "arguments": "--booster adf --n_learners 3"}]))
    assert bad.status_code == 400 and "n_learners" in bad.json()["error"]["message"]
    r = client.put(f"{BASE}/evaluations/e1", json=_contract(now, [ADF]))
    assert r.status_code == 200, r.text
    state = client.app.state
    assert evaluations.run_pending(state.log, state.settings, "w1") == ["e1"]
    r = client.post(f"{BASE}/configurations/applyFromEvaluation",
                    json={"evaluationId": "e1", "policyName": "adf"})
    assert r.status_code == 400 and "personalizer_action_features_params" in r.text
    assert client.get(f"{BASE}/configurations/policy").json()["name"] == "default"
    assert state.log.config(ACTION_FEATURES_MODEL).params.get("n_trees") is None


@pytest.mark.slow
def test_an_auto_evaluation_reads_the_fixed_action_models(client, redis_url: str) -> None:
    """Its candidates are fixed-action boosters: only those models' events are compared."""
    fixed, now = _mixed_endpoint(client, redis_url, n=90)
    state = client.app.state
    body = EvaluationContract.model_validate(_contract(now, [TREES]))
    doc = evaluations.submit(state.log, state.settings, body, "auto~1", kind="Auto")
    done = evaluations.run(state.log, state.settings, doc)
    assert done["status"] == "completed", done["description"]
    assert all(r["totalSummary"]["ipsEstimatorDenominator"] == 90
               and "description" not in r for r in done["policyResults"])
    redis.Redis.from_url(redis_url).delete(keys(fixed)["joined"])
    failed = evaluations.run(state.log, state.settings, doc)
    assert failed["status"] == "failed"
    assert failed["description"].startswith(
        "NoLogsExistInDateRange: no joined event of a fixed-action model")
    manual = evaluations.run(state.log, state.settings, {**doc, "evaluationType": "Manual"})
    assert manual["status"] == "completed"  # the model with action features' events
    assert by_name(manual["policyResults"])["trees"]["totalSummary"]["averageReward"] is None

