"""Feature importances of the Personalizer endpoint (``/featureImportances``): which context
features the models' choices depend on, by a permutation test on the log
(:func:`boosters.importance.permutation_importance`) over a bounded sample of each model's
joined events in a date range. A request stores it ``NotSubmitted`` (:func:`create`); the offline
worker computes it (:func:`run_pending`: ``Running``, then ``Succeeded``, ``Failed`` or, past
``evaluation_time_limit_seconds``, ``Timeout``), as it runs evaluations.
docs/personalizer.md, "Model, logs and feature importances".
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from boosters.importance import feature_names, permutation_importance
from service.domain import ModelConfig
from service.eventlog import EventLog, RedisError
from service.events import iso_timestamp
from service.models.store import ModelStore
from service.personalizer import loop
from service.personalizer.durations import unix_ms
from service.personalizer.evaluations import CLAIM_SECONDS, Budget, Stopped
from service.personalizer.failures import PersonalizerFailure, bad
from service.personalizer.schemas.model import FeatureImportanceRequest
from service.settings import Settings

__all__ = ["CLAIM_PREFIX", "MAX_FEATURES", "SAMPLE_EVENTS", "compute", "create", "delete", "get",
           "listing", "public", "run_pending"]

log_ = logging.getLogger("boostbandit.personalizer")

#: the start of a feature importance's claim id (``~`` is outside the ids a user may give, so
#: it never meets an evaluation's claim)
CLAIM_PREFIX = "importance~"

#: the joined events sampled, over all the models (each model's share: the newest of the range)
SAMPLE_EVENTS = 1000
#: the most frequent features of each model's sample scored (the others are not reported);
#: with SAMPLE_EVENTS, at most 1000 x 21 decisions per feature importance
MAX_FEATURES = 20


def _iso(ms: int | float) -> str:
    return iso_timestamp(ms / 1000)[:-2] + "Z"


def _model_scores(log: EventLog, store: ModelStore, config: ModelConfig, start: int, end: int,
                  count: int, tick: Callable[[], None]) -> tuple[dict[str, float], int]:
    """The permutation scores on one model's sample (at most ``count`` events), and the
    sample's size; ``tick`` is called every 64 decisions (it may raise to stop)."""
    events = log.joined_between(config.name, start, end, count)
    model = store.get(config.name)
    if not events or model is None:
        return {}, 0
    contexts = [e["c"] for e in events]
    calls = [0]

    def greedy(x: dict[str, Any], i: int) -> int:
        calls[0] += 1
        if calls[0] % 64 == 0:
            tick()
        bb = events[i]["bb"]  # a model with action features decides among the logged candidates
        decision, _ = model.decide(x, events[i]["EventId"], bb.get("excluded"),
                                   candidates=bb.get("candidates"))
        return int(decision.probabilities.argmax())

    names = feature_names(contexts, MAX_FEATURES)
    return permutation_importance(greedy, contexts, names, seed=config.seed), len(events)


def _scores(log: EventLog, store: ModelStore, settings: Settings, start: int, end: int,
            tick: Callable[[], None]) -> tuple[list[dict[str, Any]], int]:
    """The endpoint's scores (each model's weighted by its sample size), highest first."""
    total: dict[str, float] = {}
    sampled = 0
    configs = loop.models(log, settings)
    for config in configs:
        share = max(1, SAMPLE_EVENTS // len(configs))
        scores, n = _model_scores(log, store, config, start, end, share, tick)
        sampled += n
        for name, score in scores.items():
            total[name] = total.get(name, 0.0) + score * n
    out = []
    for name, weighted in sorted(total.items(), key=lambda kv: (-kv[1], kv[0])):
        namespace, _, rest = name.partition(".")
        out.append({"featureName": rest or namespace, "namespace": namespace if rest else None,
                    "score": weighted / sampled})
    return out, sampled


def create(log: EventLog, settings: Settings, importance_id: str,
           body: FeatureImportanceRequest) -> dict[str, Any]:
    """Store the feature importance ``importance_id`` for the worker to compute, status
    ``NotSubmitted`` (409 if the id is taken)."""
    start, end = unix_ms(body.startTime), unix_ms(body.endTime)
    if end <= start:
        raise bad("InvalidFeatureImportance", "endTime must be after startTime")
    if log.feature_importance(importance_id) is not None:
        raise _exists(importance_id)
    doc = {"id": importance_id, "name": body.name, "description": body.description,
           "startTime": _iso(start), "endTime": _iso(end),
           "creationTime": _iso(time.time() * 1000), "status": "NotSubmitted",
           "featureScores": [], "range": [start, end]}
    if not log.add_feature_importance(importance_id, doc):
        raise _exists(importance_id)
    return public(doc)


def compute(log: EventLog, store: ModelStore, settings: Settings, doc: dict[str, Any],
            budget: Budget) -> dict[str, Any]:
    """The feature importance ``doc`` computed: ``Succeeded`` with its scores, or ``Timeout``
    past the budget's time limit."""
    start, end = doc["range"]
    try:
        scores, sampled = _scores(log, store, settings, start, end, budget.tick)
    except Stopped as stop:
        if stop.status != "timeout":
            raise
        return {**doc, "status": "Timeout", "description": str(stop)}
    how = (f"permutation test on {sampled} joined events (at most {SAMPLE_EVENTS} shared by "
           f"the models, the newest of the range; each model's {MAX_FEATURES} most frequent "
           "features)")
    given = doc.get("description")
    return {**doc, "status": "Succeeded", "featureScores": scores,
            "description": f"{given}; {how}" if given else how}


def run_pending(log: EventLog, store: ModelStore, settings: Settings, owner: str) -> list[str]:
    """Compute every feature importance not computed yet that nobody else computes (the
    worker; ``store`` gives the models' serving copies); the ids computed."""
    done = []
    for doc in log.pending_feature_importances():
        claim = f"{CLAIM_PREFIX}{doc['id']}"
        if not log.claim_evaluation(claim, owner, CLAIM_SECONDS):
            continue
        log.set_feature_importance(doc["id"], {**doc, "status": "Running"})
        budget = Budget(log, claim, owner, settings.evaluation_time_limit_seconds)
        try:
            doc = compute(log, store, settings, doc, budget)
        except RedisError:
            raise
        except Stopped:  # the claim went to another worker: it stores the result
            continue
        except Exception as exc:  # a bug or a model failure: the document says so
            log_.exception("feature importance %s failed", doc["id"])
            doc = {**doc, "status": "Failed", "description": f"{type(exc).__name__}: {exc}"}
        log.set_feature_importance(doc["id"], doc)
        done.append(doc["id"])
    return done


def public(doc: dict[str, Any]) -> dict[str, Any]:
    """A feature importance as answered (without its internal fields)."""
    return {k: v for k, v in doc.items() if k != "range"}


def _exists(importance_id: str) -> PersonalizerFailure:
    return PersonalizerFailure(409, "Conflict",
                               f"feature importance {importance_id!r} already exists")


def get(log: EventLog, importance_id: str) -> dict[str, Any]:
    """The stored feature importance, or 404."""
    doc = log.feature_importance(importance_id)
    if doc is None:
        raise PersonalizerFailure(404, "NotFound",
                                  f"no feature importance {importance_id!r}")
    return public(doc)


def listing(log: EventLog, top: int | None, skip: int) -> list[dict[str, Any]]:
    """One page of the feature importances, oldest first."""
    docs = [public(d) for d in log.feature_importances()[skip:]]
    return docs if top is None else docs[:top]


def delete(log: EventLog, importance_id: str) -> None:
    """Remove a feature importance, or 404."""
    if not log.delete_feature_importance(importance_id):
        raise PersonalizerFailure(404, "NotFound",
                                  f"no feature importance {importance_id!r}")
