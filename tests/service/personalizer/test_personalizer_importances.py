"""Feature importances through the official ``azure-ai-personalizer`` SDK against the real app
under uvicorn with its learner, computed by the offline worker: on a log where the reward
depends on the user's segment only and the hour is noise, the segment scores far above the
hour; create (answered at once, ``NotSubmitted``), get, list, delete, a duplicate id (409) and
unknown ids (404); the time limit."""

from __future__ import annotations

import datetime as dt
import time

import pytest

from service.api.server import serve_in_thread as serve
from tests.service.personalizer.test_personalizer_evaluations import running_worker
from tests.service.personalizer.test_personalizer_model import TRAIN, clients, settings, train

pytest.importorskip("azure.ai.personalizer")
from azure.core.exceptions import (  # noqa: E402
    HttpResponseError,
    ResourceExistsError,
    ResourceNotFoundError,
)

pytestmark = pytest.mark.slow  # real processes or long runs: the full suite only


def window(minutes: float) -> dict:
    now = dt.datetime.now(dt.UTC)
    return {"startTime": (now - dt.timedelta(minutes=minutes)).isoformat(),
            "endTime": (now + dt.timedelta(minutes=1)).isoformat()}


def computed(admin, importance_id: str, timeout: float = 60.0) -> dict:
    """The feature importance once the worker is done with it."""
    deadline = time.monotonic() + timeout
    while True:
        doc = admin.get_feature_importance(importance_id)
        if doc["status"] not in ("NotSubmitted", "Running") or time.monotonic() > deadline:
            return doc
        time.sleep(0.1)


def test_the_feature_the_reward_depends_on_scores_highest(redis_url: str) -> None:
    with serve(settings(redis_url)) as base:
        client, admin = clients(base)
        assert train(client, base, TRAIN, "t") >= 0.8
        started = time.perf_counter()
        admin.create_feature_importance("week", {"name": "last hour", **window(60)})
        created = admin.get_feature_importance("week")  # answered at once; no worker yet
        assert created["status"] == "NotSubmitted" and created["featureScores"] == []
        with running_worker(redis_url):
            doc = computed(admin, "week")
            seconds = time.perf_counter() - started
            assert doc["status"] == "Succeeded" and doc["name"] == "last hour", doc
            scores = {(s["namespace"], s["featureName"]): s["score"]
                      for s in doc["featureScores"]}
            print(f"scores {scores}, computed in {seconds:.2f} s")
            segment, hour = scores[("user", "segment")], scores[("visit", "hour")]
            assert segment > 0.5 and hour < 0.1 and segment > 5 * hour, scores
            assert doc["featureScores"][0]["featureName"] == "segment"  # highest first
            assert f"on {TRAIN} joined events" in doc["description"]

            # a range without events: no scores, still computed
            admin.create_feature_importance("empty", {
                "name": "before", "startTime": "2001-01-01T00:00:00Z",
                "endTime": "2001-01-02T00:00:00Z"})
            empty = computed(admin, "empty")
            assert empty["status"] == "Succeeded" and empty["featureScores"] == []

        listed = list(admin.list_feature_importances())
        assert [d["id"] for d in listed] == ["week", "empty"]
        assert [d["id"] for d in admin.list_feature_importances(top=1, skip=1)] == ["empty"]

        with pytest.raises(ResourceExistsError):
            admin.create_feature_importance("week", {"name": "again", **window(60)})
        with pytest.raises(HttpResponseError) as bad:
            admin.create_feature_importance("backwards", {
                "name": "x", "startTime": "2026-01-02T00:00:00Z",
                "endTime": "2026-01-01T00:00:00Z"})
        assert bad.value.status_code == 400
        admin.delete_feature_importance("week")
        with pytest.raises(ResourceNotFoundError):
            admin.get_feature_importance("week")
        with pytest.raises(ResourceNotFoundError):
            admin.delete_feature_importance("week")
        assert [d["id"] for d in admin.list_feature_importances()] == ["empty"]
