"""Feature importances of the Personalizer endpoint (``/featureImportances``): which context
features the models' choices depend on, by a permutation test on the log
(:func:`boosters.importance.permutation_importance`) over a bounded sample of each model's
joined events in a date range, computed when it is created (so its status is ``Succeeded``).
docs/personalizer.md, "Model, logs and feature importances".
"""

from __future__ import annotations

import time
from typing import Any

from boosters.importance import feature_names, permutation_importance
from service.domain import ModelConfig
from service.eventlog import EventLog
from service.events import iso_timestamp
from service.personalizer import loop
from service.personalizer.durations import unix_ms
from service.personalizer.errors import PersonalizerFailure, bad
from service.personalizer.schemas.model import FeatureImportanceRequest
from service.settings import Settings
from service.store import ModelStore

__all__ = ["MAX_FEATURES", "SAMPLE_EVENTS", "create", "delete", "get", "listing"]

#: the joined events sampled, over all the models (each model's share: the newest of the range)
SAMPLE_EVENTS = 1000
#: the most frequent features of each model's sample scored (the others are not reported);
#: with SAMPLE_EVENTS, at most 1000 x 21 decisions per feature importance
MAX_FEATURES = 20


def _iso(ms: int | float) -> str:
    return iso_timestamp(ms / 1000)[:-2] + "Z"


def _model_scores(log: EventLog, store: ModelStore, config: ModelConfig, start: int, end: int,
                  count: int) -> tuple[dict[str, float], int]:
    """The permutation scores on one model's sample (at most ``count`` events), and the
    sample's size."""
    events = log.joined_between(config.name, start, end, count)
    model = store.get(config.name)
    if not events or model is None:
        return {}, 0
    contexts = [e["c"] for e in events]

    def greedy(x: dict[str, Any], i: int) -> int:
        decision, _ = model.decide(x, events[i]["EventId"], events[i]["bb"].get("excluded"))
        return int(decision.probabilities.argmax())

    names = feature_names(contexts, MAX_FEATURES)
    return permutation_importance(greedy, contexts, names, seed=config.seed), len(events)


def _scores(log: EventLog, store: ModelStore, settings: Settings, start: int, end: int
            ) -> tuple[list[dict[str, Any]], int]:
    """The endpoint's scores (each model's weighted by its sample size), highest first."""
    total: dict[str, float] = {}
    sampled = 0
    configs = loop.models(log, settings)
    for config in configs:
        share = max(1, SAMPLE_EVENTS // len(configs))
        scores, n = _model_scores(log, store, config, start, end, share)
        sampled += n
        for name, score in scores.items():
            total[name] = total.get(name, 0.0) + score * n
    out = []
    for name, weighted in sorted(total.items(), key=lambda kv: (-kv[1], kv[0])):
        namespace, _, rest = name.partition(".")
        out.append({"featureName": rest or namespace, "namespace": namespace if rest else None,
                    "score": weighted / sampled})
    return out, sampled


def create(log: EventLog, store: ModelStore, settings: Settings, importance_id: str,
           body: FeatureImportanceRequest) -> dict[str, Any]:
    """Compute and store the feature importance ``importance_id`` (409 if the id is taken)."""
    start, end = unix_ms(body.startTime), unix_ms(body.endTime)
    if end <= start:
        raise bad("InvalidFeatureImportance", "endTime must be after startTime")
    if log.feature_importance(importance_id) is not None:
        raise _exists(importance_id)
    scores, sampled = _scores(log, store, settings, start, end)
    how = (f"permutation test on {sampled} joined events (at most {SAMPLE_EVENTS} shared by "
           f"the models, the newest of the range; each model's {MAX_FEATURES} most frequent "
           "features)")
    doc = {"id": importance_id, "name": body.name,
           "description": f"{body.description}; {how}" if body.description else how,
           "startTime": _iso(start), "endTime": _iso(end),
           "creationTime": _iso(time.time() * 1000), "status": "Succeeded",
           "featureScores": scores}
    if not log.add_feature_importance(importance_id, doc):
        raise _exists(importance_id)
    return doc


def _exists(importance_id: str) -> PersonalizerFailure:
    return PersonalizerFailure(409, "Conflict",
                               f"feature importance {importance_id!r} already exists")


def get(log: EventLog, importance_id: str) -> dict[str, Any]:
    """The stored feature importance, or 404."""
    doc = log.feature_importance(importance_id)
    if doc is None:
        raise PersonalizerFailure(404, "NotFound",
                                  f"no feature importance {importance_id!r}")
    return doc


def listing(log: EventLog, top: int | None, skip: int) -> list[dict[str, Any]]:
    """One page of the feature importances, oldest first."""
    docs = log.feature_importances()[skip:]
    return docs if top is None else docs[:top]


def delete(log: EventLog, importance_id: str) -> None:
    """Remove a feature importance, or 404."""
    if not log.delete_feature_importance(importance_id):
        raise PersonalizerFailure(404, "NotFound",
                                  f"no feature importance {importance_id!r}")
