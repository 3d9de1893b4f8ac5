"""Evaluations and feature importances have a cost bound: an evaluation whose
estimated cost (learners x events) is above ``evaluation_max_cost`` is a 400 at creation; a
running one renews its claim (a second worker never starts it again) and stops at
``evaluation_time_limit_seconds``; feature importances are computed by the worker, within the
same limit, and the route answers at once."""

from __future__ import annotations

import datetime as dt
import time

import pytest
import redis

from service.api.server import serve_in_thread as serve
from service.eventlog import EventLog
from service.models.store import ModelStore
from service.personalizer import evaluations, importances
from service.personalizer.evaluations import Budget, Stopped
from tests.service.personalizer.test_personalizer_evaluations import (
    contract,
    settings,
    simulated_log,
)

pytest.importorskip("azure.ai.personalizer")
from azure.ai.personalizer import PersonalizerAdministrationClient  # noqa: E402
from azure.core.credentials import AzureKeyCredential  # noqa: E402
from azure.core.exceptions import HttpResponseError  # noqa: E402

BIG = {"name": "big", "arguments": "--booster adabandit --n_learners 1000"}
SMALL = {"name": "small", "arguments": "--booster adabandit --n_learners 5"}


@pytest.mark.slow
def test_a_costly_evaluation_is_refused_at_creation(redis_url: str) -> None:
    with serve(settings(redis_url).model_copy(update={"evaluation_max_cost": 100_000})) as base:
        simulated_log(redis_url, base)  # 900 joined events
        admin = PersonalizerAdministrationClient(base, AzureKeyCredential("k"))
        with pytest.raises(HttpResponseError) as caught:
            admin.create_evaluation("costly", contract(policies=[BIG, SMALL]))
        assert caught.value.status_code == 400
        error = caught.value.response.json()["error"]
        assert error["code"] == "EvaluationTooCostly", error
        assert "904,500 learner-events" in error["message"] and "big: 1000" in error["message"]
        admin.create_evaluation("cheap", contract(policies=[SMALL]))  # 900 x 5: accepted
        doc = EventLog(redis.Redis.from_url(redis_url)).evaluation("cheap")
        assert doc["status"] == "pending" and doc["estimatedCost"] == 4_500


def test_a_running_evaluation_renews_its_claim(redis_url: str, monkeypatch) -> None:
    log = EventLog(redis.Redis.from_url(redis_url))
    assert log.claim_evaluation("e1", "w1", 1.0)
    now = [0.0]
    budget = Budget(log, "e1", "w1", 100.0, clock=lambda: now[0])
    now[0] = evaluations.RENEW_SECONDS + 1
    budget.tick()  # renewed: the claim now lasts CLAIM_SECONDS
    ttl = log.r.pttl("bb:personalizer:evaluation-claim:e1") / 1000
    assert evaluations.CLAIM_SECONDS - 5 < ttl <= evaluations.CLAIM_SECONDS
    assert not log.claim_evaluation("e1", "w2", 1.0)  # a second worker does not start it
    log.r.set("bb:personalizer:evaluation-claim:e1", "w2")  # the claim expired, w2 took it
    now[0] = 2 * evaluations.RENEW_SECONDS + 2
    with pytest.raises(Stopped) as stopped:
        budget.tick()
    assert stopped.value.status == "claim"
    limited = Budget(log, "e2", "w1", 100.0, clock=lambda: now[0])
    limited.tick()
    now[0] += 100.5
    with pytest.raises(Stopped) as stopped:
        limited.tick()
    assert stopped.value.status == "timeout"


@pytest.mark.slow
def test_an_evaluation_past_its_time_limit_ends_timeout(redis_url: str) -> None:
    with serve(settings(redis_url)) as base:
        simulated_log(redis_url, base)
        admin = PersonalizerAdministrationClient(base, AzureKeyCredential("k"))
        admin.create_evaluation("slow", contract(policies=[SMALL]))
    log = EventLog(redis.Redis.from_url(redis_url))
    limited = settings(redis_url).model_copy(update={"evaluation_time_limit_seconds": 1e-6})
    started = time.perf_counter()
    assert evaluations.run_pending(log, limited, "w1") == ["slow"]
    assert time.perf_counter() - started < 30
    doc = log.evaluation("slow")
    assert doc["status"] == "timeout" and "EvaluationTimedOut" in doc["description"], doc
    assert log.pending_evaluations() == []


@pytest.mark.slow
def test_feature_importances_are_computed_by_the_worker_within_the_limit(redis_url: str) -> None:
    from service.personalizer.schemas.model import FeatureImportanceRequest

    with serve(settings(redis_url)) as base:
        simulated_log(redis_url, base)
    log = EventLog(redis.Redis.from_url(redis_url))
    now = dt.datetime.now(dt.UTC)
    body = FeatureImportanceRequest(name="n",
                                    startTime=(now - dt.timedelta(hours=2)).isoformat(),
                                    endTime=(now + dt.timedelta(minutes=1)).isoformat())
    doc = importances.create(log, settings(redis_url), "fi", body)
    assert doc["status"] == "NotSubmitted" and "range" not in doc
    limited = settings(redis_url).model_copy(update={"evaluation_time_limit_seconds": 1e-6})
    assert importances.run_pending(log, ModelStore(log), limited, "w1") == ["fi"]
    assert log.feature_importance("fi")["status"] == "Timeout"
    importances.create(log, settings(redis_url), "fi2", body)
    assert importances.run_pending(log, ModelStore(log), settings(redis_url), "w1") == ["fi2"]
    done = importances.get(log, "fi2")
    assert done["status"] == "Succeeded" and done["featureScores"], done
    assert log.pending_feature_importances() == []
