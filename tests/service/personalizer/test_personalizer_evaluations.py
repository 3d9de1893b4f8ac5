"""Offline evaluations through the official SDK (``azure-ai-personalizer``'s
PersonalizerAdministrationClient: create_evaluation, get_evaluation, list_evaluations,
delete_evaluation, apply_from_evaluation) against the app under uvicorn on a free 127.0.0.1 port,
with the offline worker running in a thread (service/personalizer/evaluations.py,
evaluation.py, routes/evaluations.py, service/worker.py): a simulated log with a known best
policy is ranked right, and auto-optimization applies a clearly better candidate only."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

import httpx
import numpy as np
import pytest
import redis

from boosters.base import Decision
from service.api.server import serve_in_thread as serve
from service.eventlog import EventLog
from service.eventlog.keys import keys
from service.events import decision_event, dumps, joined_event
from service.personalizer.mapping import action_set_model_name
from service.settings import Settings
from service.worker import Worker

pytest.importorskip("azure.ai.personalizer")

from azure.ai.personalizer import (  # noqa: E402
    PersonalizerAdministrationClient,
    PersonalizerClient,
)
from azure.core.credentials import AzureKeyCredential  # noqa: E402
from azure.core.exceptions import HttpResponseError, ResourceNotFoundError  # noqa: E402

ACTIONS = ["a", "b", "c"]
EVENTS = 900
TREES = {"name": "trees", "arguments": "--booster egreedy_tree --epsilon 0.05"}


def settings(redis_url: str) -> Settings:
    return Settings(redis_url=redis_url, run_learner=True, redis_async="off",
                    learner_block_ms=20, personalizer_booster="uniform",
                    personalizer_params={}, personalizer_action_features="never")


@contextmanager
def running_worker(redis_url: str) -> Iterator[Worker]:
    """The offline worker in a thread (BOPL training effectively off: the window never fills)."""
    w = Worker(redis.Redis.from_url(redis_url),
               Settings(redis_url=redis_url, worker_block_ms=20, worker_min_events=10**7))
    w.EVALUATION_POLL_SECONDS = 0.05
    thread = threading.Thread(target=w.run, daemon=True)
    thread.start()
    try:
        yield w
    finally:
        w.stop_event.set()
        thread.join(30)
        w.stop()


def simulated_log(redis_url: str, base: str, informative: bool = True, seed: int = 0) -> str:
    """A model made by one rank, then ``EVENTS`` joined events of uniformly random decisions
    over the last hour: reward 1 iff the action is the user's segment (or a coin flip)."""
    PersonalizerClient(base, AzureKeyCredential("k")).rank(
        {"actions": [{"id": a, "features": [{"k": a}]} for a in ACTIONS],
         "contextFeatures": [{"segment": "s0"}]})
    name = action_set_model_name(ACTIONS)
    rng = np.random.default_rng(seed)
    now, pipe = time.time(), redis.Redis.from_url(redis_url).pipeline()
    for i in range(EVENTS):
        segment, action = int(rng.integers(3)), int(rng.integers(3))
        context = {"segment": f"s{segment}", "hour": int(rng.integers(24))}
        ts = now - 3600 + i * 3.0
        ev = decision_event(f"sim{seed}-{i}", ts, 0, ACTIONS, context,
                            Decision(action, np.full(3, 1 / 3)))
        ev["bb"]["personalizer"] = {"deferred": False, "baseline": "a"}
        reward = float(action == segment) if informative else float(rng.random() < 0.5)
        pipe.xadd(keys(name)["joined"], {"e": dumps(joined_event(
            ev, reward=reward, label=None, source="feedback", learn=True, ts=ts))})
    pipe.execute()
    return name


def wait_done(admin: PersonalizerAdministrationClient, evaluation_id: str,
              timeout: float = 60.0) -> dict:
    """The evaluation once the worker finished it."""
    deadline = time.monotonic() + timeout
    while True:
        doc = admin.get_evaluation(evaluation_id, start_time=datetime.now(UTC),
                                   end_time=datetime.now(UTC))
        if doc["status"] != "pending":
            return doc
        assert time.monotonic() < deadline, doc
        time.sleep(0.1)


def contract(**extra) -> dict:
    now = datetime.now(UTC)
    return {"name": "compare", "startTime": (now - timedelta(hours=2)).isoformat(),
            "endTime": now.isoformat(), "policies": [TREES], **extra}


def by_name(doc: dict) -> dict[str, dict]:
    return {r["name"]: r for r in doc["policyResults"]}


def interval(result: dict) -> tuple[float, float]:
    total = result["totalSummary"]
    return (total["averageReward"] - total["confidenceInterval"],
            total["averageReward"] + total["confidenceInterval"])


@pytest.mark.slow
def test_an_evaluation_ranks_the_known_best_policy_first(redis_url: str) -> None:
    """THE test: uniformly random decisions, reward 1 iff action == segment; a policy that
    learns it is ranked first with an interval above the Random policy's."""
    with serve(settings(redis_url)) as base, running_worker(redis_url):
        simulated_log(redis_url, base)
        admin = PersonalizerAdministrationClient(base, AzureKeyCredential("k"))
        policies = [TREES, {"name": "coin", "arguments": "--booster uniform"}]
        admin.create_evaluation("known-best", contract(policies=policies))
        doc = wait_done(admin, "known-best")
        assert doc["status"] == "completed", doc.get("description")
        results = by_name(doc)
        assert set(results) == {"trees", "coin", "Baseline", "Random", "default"}
        assert doc["policyResults"][0]["name"] == "trees" == doc["optimalPolicy"]
        assert interval(results["trees"])[0] > interval(results["Random"])[1]
        assert interval(results["trees"])[0] > 0.7  # the best policy earns 1; chance 1/3
        for name in ("Random", "coin", "default", "Baseline"):  # all near 1/3
            low, high = interval(results[name])
            assert low < 1 / 3 + 0.02 and high > 1 / 3 - 0.02, (name, low, high)
        assert results["default"]["policySource"] == "Online"
        trees = results["trees"]
        assert trees["policySource"] == "Custom" and trees["arguments"] == TREES["arguments"]
        rows = trees["summary"]
        assert len(rows) >= 9 and all(r["aggregateTimeWindow"] == "PT5M" for r in rows)
        assert sum(r["ipsEstimatorDenominator"] for r in rows) == EVENTS
        total = trees["totalSummary"]
        assert total["ipsEstimatorDenominator"] == EVENTS
        assert total["averageReward"] == pytest.approx(
            total["ipsEstimatorNumerator"] / total["snipsEstimatorDenominator"])
        sdk = {v["name"]: v for v in doc["content"]["value"]}  # the SDK's shape too
        assert sdk["trees"]["summary"]["expectedReward"] == total["averageReward"]


@pytest.mark.slow
def test_evaluations_create_get_list_delete_and_apply(redis_url: str) -> None:
    with serve(settings(redis_url)) as base, running_worker(redis_url):
        name = simulated_log(redis_url, base, seed=1)
        admin = PersonalizerAdministrationClient(base, AzureKeyCredential("k"))
        admin.create_evaluation("first", contract())
        made = httpx.post(f"{base}/personalizer/v1.0/evaluations",
                          json=contract(name="second", policies=[]))
        assert made.status_code == 201 and made.json()["status"] == "pending"
        second = made.json()["id"]
        assert made.headers["location"].endswith(f"/evaluations/{second}")
        assert wait_done(admin, "first")["status"] == "completed"
        assert wait_done(admin, second)["status"] == "completed"
        listed = list(admin.list_evaluations())
        assert [e["id"] for e in listed] == ["first", second]
        v1 = httpx.get(f"{base}/personalizer/v1.0/evaluations").json()
        assert [e["id"] for e in v1] == ["first", second]  # v1.0: a JSON array

        with pytest.raises(HttpResponseError) as caught:
            admin.apply_from_evaluation({"evaluationId": "first", "policyName": "Random"})
        assert caught.value.status_code == 400
        assert "Random policy" in caught.value.response.json()["error"]["message"]
        with pytest.raises(ResourceNotFoundError):
            admin.apply_from_evaluation({"evaluationId": "nope", "policyName": "trees"})
        uid = EventLog(redis.Redis.from_url(redis_url)).config(name).uid
        admin.apply_from_evaluation({"evaluationId": "first", "policyName": "trees"})
        assert admin.get_policy() == TREES
        config = EventLog(redis.Redis.from_url(redis_url)).config(name)
        assert config.booster == "egreedy_tree" and config.uid != uid

        admin.delete_evaluation(second)
        with pytest.raises(ResourceNotFoundError):
            admin.get_evaluation(second, start_time=datetime.now(UTC),
                                 end_time=datetime.now(UTC))
        with pytest.raises(ResourceNotFoundError):
            admin.delete_evaluation(second)
        assert [e["id"] for e in admin.list_evaluations()] == ["first"]


@pytest.mark.parametrize("body, code, words", [
    (contract(endTime="2020-01-01T00:00:00Z"), "InvalidEvaluationContract", "endTime"),
    ({**contract(), "startTime": "2026-01-01T00:00:00Z", "endTime": "2025-01-01T00:00:00"},
     "InvalidEvaluationContract", "endTime must be after"),  # a time without a zone is UTC
    ({**contract(), "endTime": "9999-12-31T23:59:59-05:00"}, "InvalidEvaluationContract",
     "out of range"),
    ({**contract(), "startTime": 0}, "BadRequest", "ISO-8601"),
    (contract(policies=[TREES, TREES]), "DuplicateCustomPolicyNames", "trees"),
    (contract(policies=[{"name": "vw", "arguments": "--cb_explore_adf --epsilon 0.1"}]),
     "InvalidPolicyConfiguration", "Vowpal Wabbit"),
    (contract(policies=[{"name": "Random", "arguments": "--booster uniform"}]),
     "InvalidEvaluationContract", "built-in"),
    ({"name": "x"}, "BadRequest", "startTime"),
])
@pytest.mark.slow
def test_a_bad_evaluation_is_a_400(redis_url: str, body: dict, code: str, words: str) -> None:
    with serve(settings(redis_url)) as base:
        admin = PersonalizerAdministrationClient(base, AzureKeyCredential("k"))
        with pytest.raises(HttpResponseError) as caught:
            admin.create_evaluation("bad", body)
        assert caught.value.status_code == 400
        error = caught.value.response.json()["error"]
        assert error["code"] == code and words in error["message"], error


@pytest.mark.slow
def test_an_evaluation_without_logs_in_its_range_fails_saying_so(redis_url: str) -> None:
    with serve(settings(redis_url)) as base, running_worker(redis_url):
        admin = PersonalizerAdministrationClient(base, AzureKeyCredential("k"))
        admin.create_evaluation("empty", contract())
        doc = wait_done(admin, "empty")
        assert doc["status"] == "failed" and "NoLogsExistInDateRange" in doc["description"]


@pytest.mark.slow
def test_offline_experimentation_evaluates_the_workers_latest_policy(redis_url: str) -> None:
    with serve(settings(redis_url)) as base:
        name = simulated_log(redis_url, base, seed=3)
        trainer = Worker(redis.Redis.from_url(redis_url), Settings(
            redis_url=redis_url, worker_min_events=300, worker_n_rounds=15, worker_max_depth=4,
            worker_reward_model_rounds=30, worker_min_propensity=0.02))
        assert trainer.train_once([name])[0]["status"] == "published"
        admin = PersonalizerAdministrationClient(base, AzureKeyCredential("k"))
        with running_worker(redis_url):
            admin.create_evaluation("offline", contract(policies=[],
                                                        enablePolicyOptimization=True))
            doc = wait_done(admin, "offline")
        results = by_name(doc)
        offline = results["OfflineExperimentation"]
        assert offline["policySource"] == "OfflineExperimentation"
        assert f"{name}:1" in offline["arguments"]
        assert interval(offline)[0] > interval(results["Random"])[1]
        with pytest.raises(HttpResponseError) as caught:  # not a booster: cannot be applied
            admin.apply_from_evaluation({"evaluationId": "offline",
                                         "policyName": "OfflineExperimentation"})
        assert caught.value.status_code == 400


def auto_on(redis_url: str) -> None:
    """What the service configuration stores for auto-optimization (the lead's route)."""
    start = (datetime.now(UTC) - timedelta(days=1)).isoformat()
    EventLog(redis.Redis.from_url(redis_url)).set_personalizer_doc("service", {
        "auto_optimization": {"enabled": True, "frequency_seconds": 3600.0, "start": start}})


@pytest.mark.slow
@pytest.mark.parametrize("informative, seed, status", [
    (True, 0, "optimalPolicyApplied"), (False, 2, "onlinePolicyRetained")])
def test_auto_optimization_applies_only_a_clearly_better_policy(
        redis_url: str, informative: bool, seed: int, status: str) -> None:
    """docs/personalizer.md, "Policy and evaluations": the measured figures of these logs."""
    with serve(settings(redis_url)) as base:
        name = simulated_log(redis_url, base, informative=informative, seed=seed)
        admin = PersonalizerAdministrationClient(base, AzureKeyCredential("k"))
        auto_on(redis_url)
        with running_worker(redis_url):
            deadline = time.monotonic() + 90
            while not (done := [e for e in admin.list_evaluations()
                                if e["status"] != "pending"]):
                assert time.monotonic() < deadline
                time.sleep(0.2)
        doc = admin.get_evaluation(done[0]["id"], start_time=datetime.now(UTC),
                                   end_time=datetime.now(UTC))
        assert doc["evaluationType"] == "Auto" and doc["status"] == status, doc["description"]
        online = next(r for r in doc["policyResults"] if r["policySource"] == "Online")
        best = next(r for r in doc["policyResults"] if r["policySource"] == "Custom")
        if informative:
            assert interval(best)[0] > interval(online)[1]
            assert admin.get_policy() == {"name": best["name"], "arguments": best["arguments"]}
            assert best["name"] == "adabandit-5"  # measured: 0.934 +- 0.016 vs 0.344 +- 0.031
            config = EventLog(redis.Redis.from_url(redis_url)).config(name)
            assert (config.booster, config.params["n_learners"]) == ("adabandit", 5)
            assert doc["optimalPolicy"] == best["name"]
        else:
            assert interval(best)[0] <= interval(online)[1]
            assert admin.get_policy()["name"] == "default"
            assert EventLog(redis.Redis.from_url(redis_url)).config(name).booster == "uniform"
        assert len(list(admin.list_evaluations())) == 1  # not again before frequency_seconds


def test_two_schedulers_at_once_run_the_auto_evaluation_once(
        redis_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The Auto evaluation is run by the worker that claimed the schedule only: another
    worker's scheduling step finds nothing due, its run_pending never picks it up mid-run."""
    from service.models.store import ModelStore
    from service.personalizer import evaluations
    auto_on(redis_url)
    runs, seen_pending, real_run = [], [], evaluations.run
    barrier = threading.Barrier(2)

    def counted(log, settings_, doc, budget=None):
        runs.append(doc["id"])
        other = EventLog(redis.Redis.from_url(redis_url))
        seen_pending.append(evaluations.run_pending(other, settings_, "other"))
        return real_run(log, settings_, doc, budget)

    monkeypatch.setattr(evaluations, "run", counted)
    results = []

    def step(owner: str) -> None:
        log = EventLog(redis.Redis.from_url(redis_url))
        barrier.wait()
        results.append(evaluations.auto_optimize(log, ModelStore(log), Settings(
            redis_url=redis_url), owner))

    threads = [threading.Thread(target=step, args=(o,)) for o in ("w1", "w2")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    done = [r for r in results if r is not None]
    assert len(results) == 2 and len(done) == 1 and len(runs) == 1
    assert seen_pending == [[]]  # not run by run_pending meanwhile
    assert done[0]["id"].startswith(evaluations.AUTO_ID_PREFIX)
    stored = EventLog(redis.Redis.from_url(redis_url)).evaluations()
    assert [(d["id"], d["status"]) for d in stored] == [(done[0]["id"], "failed")]  # no logs
    assert "NoLogsExistInDateRange" in stored[0]["description"]


def test_an_auto_evaluation_that_raises_ends_failed(
        redis_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from service.models.store import ModelStore
    from service.personalizer import evaluations

    def broken(log, settings_, doc, budget=None):
        raise RuntimeError("booster exploded")

    monkeypatch.setattr(evaluations, "run", broken)
    auto_on(redis_url)
    log = EventLog(redis.Redis.from_url(redis_url))
    doc = evaluations.auto_optimize(log, ModelStore(log), Settings(redis_url=redis_url), "w1")
    stored = log.evaluation(doc["id"])
    assert stored["status"] == "failed"
    assert stored["description"] == "RuntimeError: booster exploded"
    assert log.pending_evaluations() == []


def test_a_user_cannot_take_the_auto_evaluation_namespace(redis_url: str) -> None:
    with serve(settings(redis_url)) as base:
        response = httpx.put(f"{base}/personalizer/v1.1-preview.1/evaluations/auto~1",
                             json=contract())
        assert response.status_code == 400, response.text
        assert "evaluationId" in response.text
        ok = httpx.put(f"{base}/personalizer/v1.1-preview.1/evaluations/auto-schedule",
                       json=contract())
        assert ok.status_code == 200, ok.text
