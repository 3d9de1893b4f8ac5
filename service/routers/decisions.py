"""``/v1/models/{name}/predict`` and ``/v1/models/{name}/feedback``.

Both routes are ``async``: what they do is short CPU work (validation, one decision of the
in-memory model, which waits at most for one weak learner's update, see
:meth:`~service.store.ServedModel.apply`), done on the event loop rather than with a hop to
FastAPI's thread pool and back (which under a busy learner thread costs a wait for the GIL each
way), and one Redis round trip, awaited on the async Redis client so the loop serves other
requests meanwhile (measured in benchmarks/RESULTS.md, "Service load"). A Redis server that is
down answers at once (connection refused: 503); one that hangs fails the request after
``redis_timeout_seconds``.
"""

from __future__ import annotations

import logging
import time
import uuid

from fastapi import APIRouter, Depends, HTTPException, status

from boosters.registry import booster_class
from service import metrics
from service.deps import (
    LogDep,
    ModelDep,
    SettingsDep,
    StoreDep,
    require_key,
)
from service.events import decision_event, iso_timestamp
from service.schemas import FeedbackRequest, FeedbackResponse, PredictRequest, PredictResponse

log_ = logging.getLogger("boostbandit.api")

router = APIRouter(prefix="/v1/models", tags=["decisions"], dependencies=[Depends(require_key)])


def _unprocessable(message: str) -> HTTPException:
    return HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, message)


@router.post("/{name}/predict", response_model=PredictResponse)
async def predict(
    body: PredictRequest,
    model: ModelDep,
    log: LogDep,
    store: StoreDep,
    settings: SettingsDep,
) -> PredictResponse:
    """Decide an action for a context and log the decision.

    The online model decides, or, when the model serves its offline policy
    (``PUT /v1/models/{name}/serving``), the latest published policy; the decision is logged the
    same way in both cases (``bb.policy`` names the policy).
    """
    config = model.config
    if len(body.context) > settings.max_features:
        raise _unprocessable(
            f"too many features: {len(body.context)} > {settings.max_features} (max_features)"
        )
    index = {a: i for i, a in enumerate(config.actions)}
    unknown = [a for a in body.excluded_actions if a not in index]
    if unknown:
        raise _unprocessable(f"unknown action id(s) in excluded_actions: {', '.join(unknown)}")
    excluded = sorted({index[a] for a in body.excluded_actions})
    if len(excluded) >= len(config.actions):
        raise _unprocessable("excluded_actions excludes every action")
    event_id = body.event_id or uuid.uuid4().hex
    # deciding does not change the model, so a repeated event id is caught by the atomic append
    serving, published = await log.serving_state_async(config.name)
    bundle = None
    if serving.mode == "policy" and published is not None:
        bundle = store.policy(config, published)
        if bundle is None:  # cannot happen through the API; the online model is the fallback
            log_.warning("%s: published policy %s unavailable; serving online", config.name,
                         published)
    policy = None
    if bundle is not None:
        temperature = bundle.temperature if serving.temperature is None else serving.temperature
        floor = bundle.min_propensity if serving.min_propensity is None else serving.min_propensity
        decision, version = model.decide_policy(
            body.context, event_id, excluded, bundle, temperature, floor
        )
        policy = {"version": published, "temperature": temperature, "min_propensity": floor}
    else:
        decision, version = model.decide(body.context, event_id, excluded)
    ts = time.time()
    event = decision_event(
        event_id, ts, version, config.actions, body.context, decision,
        excluded=excluded, policy=policy,
    )
    retention = settings.event_retention_seconds
    if await log.append_decision_async(config, event_id, event, ts, retention) is None:
        raise HTTPException(status.HTTP_409_CONFLICT, f"event id {event_id!r} was already used")
    metrics.DECISIONS.labels(config.name).inc()
    p = decision.probabilities.tolist()
    return PredictResponse(
        event_id=event_id,
        action=config.actions[decision.action],
        probability=p[decision.action],
        probabilities=dict(zip(config.actions, p)),
        model_version=version,
        policy_version=None if policy is None else published,
    )


@router.post("/{name}/feedback", response_model=FeedbackResponse)
async def feedback(
    body: FeedbackRequest,
    model: ModelDep,
    log: LogDep,
) -> FeedbackResponse:
    """Report the reward (or the true label) of a decision; the first feedback counts."""
    config = model.config
    label = None
    if body.label is not None:
        try:
            label = config.actions.index(body.label)
        except ValueError:
            raise _unprocessable(f"unknown action id in label: {body.label!r}") from None
    elif getattr(booster_class(config.booster), "full_information", False) and body.reward != 1:
        raise _unprocessable(
            f"booster {config.booster!r} is full-information: send the label "
            "(or a reward of 1 for the played action)"
        )
    now = time.time()
    payload = {
        "EventId": body.event_id,
        "Timestamp": iso_timestamp(now),
        "ts": now,
        "reward": None if body.reward is None else float(body.reward),
        "label": label,
        "label_id": body.label,
    }
    outcome, late = await log.append_feedback_async(config.name, body.event_id, payload, now)
    if outcome == "unknown":
        raise HTTPException(
            status.HTTP_404_NOT_FOUND,
            f"unknown or expired event id {body.event_id!r} for model {config.name!r}",
        )
    if outcome == "new":
        metrics.REWARDS.labels(config.name).inc()
    return FeedbackResponse(event_id=body.event_id, duplicate=outcome == "duplicate", late=late)
