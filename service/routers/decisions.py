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
from service import contexts as runtime
from service import metrics
from service.deps import (
    LogDep,
    ModelDep,
    SettingsDep,
    StoreDep,
    require_key,
)
from service.eventlog import OutcomeUnknown
from service.events import decision_event, iso_timestamp
from service.schemas import (
    FeedbackRequest,
    FeedbackResponse,
    PredictRequest,
    PredictResponse,
    error_responses,
)

log_ = logging.getLogger("boostbandit.api")

router = APIRouter(prefix="/v1/models", tags=["decisions"], dependencies=[Depends(require_key)],
                   responses=error_responses(400, 401, 404, 413, 422, 503))


def _unprocessable(message: str) -> HTTPException:
    return HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, message)


@router.post(
    "/{name}/predict",
    response_model=PredictResponse,
    responses=error_responses(
        409, e409="The event id was used by a different request (or its decision is no longer "
        "kept)."
    ),
)
async def predict(
    body: PredictRequest,
    model: ModelDep,
    log: LogDep,
    store: StoreDep,
    settings: SettingsDep,
) -> PredictResponse:
    """Decide an action for a context and log the decision.

    The online model decides, or, when the model serves its offline policy
    (`PUT /v1/models/{name}/serving`), the latest published policy; the decision is logged the
    same way in both cases (`bb.policy` names the policy). Idempotent per `event_id`.
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
    try:
        runtime.check_context_sizes(body.context, settings)
        new_types = runtime.unconfirmed_types(model, log, runtime.context_types(body.context))
    except runtime.ContextError as exc:
        raise _unprocessable(str(exc)) from None
    event_id = body.event_id or uuid.uuid4().hex
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
    digest = runtime.request_digest(body.model_dump(exclude={"event_id"}))
    try:
        outcome = await log.append_decision_async(config, event_id, event, digest, new_types)
    except OutcomeUnknown as exc:
        raise HTTPException(
            status.HTTP_503_SERVICE_UNAVAILABLE,
            f"event log (Redis) did not answer ({exc}): the decision {event_id!r} may or may "
            "not have been logged. Retry with this event_id: predict is idempotent per event "
            "id (the same request gets the logged decision back).",
            headers={"Retry-After": "1"},
        ) from None
    if outcome.status == "replay":
        logged = outcome.event
        if logged is None and outcome.joined_id is not None:
            logged = log.joined_event(config.name, outcome.joined_id)
        if logged is None:
            raise HTTPException(status.HTTP_409_CONFLICT, f"event id {event_id!r} was used; its "
                                "decision is no longer kept")
        return _response_of(logged)
    if outcome.status == "conflict":
        raise HTTPException(status.HTTP_409_CONFLICT, f"event id {event_id!r} was already used "
                            "by a different request")
    if outcome.status in ("type", "full"):
        raise _unprocessable(str(runtime.outcome_error(outcome, new_types, settings)))
    runtime.confirm_types(model, new_types)
    metrics.DECISIONS.labels(config.name).inc()
    return _response_of(event)


def _response_of(event: dict) -> PredictResponse:
    """The answer to a predict, from its logged decision event."""
    bb = event["bb"]
    actions = bb["actions"]
    p = {actions[a - 1]: prob for a, prob in zip(event["a"], event["p"], strict=True)}
    return PredictResponse(
        event_id=event["EventId"],
        action=bb["action_id"],
        probability=bb["propensity"],
        probabilities={a: p[a] for a in actions},
        model_version=bb["model_version"],
        policy_version=(bb.get("policy") or {}).get("version"),
    )


@router.post(
    "/{name}/feedback",
    response_model=FeedbackResponse,
    responses=error_responses(404, e404="Unknown model, or unknown or expired event id."),
)
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
    outcome, late = await log.append_feedback_async(config.name, body.event_id, payload)
    if outcome == "unknown":
        raise HTTPException(
            status.HTTP_404_NOT_FOUND,
            f"unknown or expired event id {body.event_id!r} for model {config.name!r}",
        )
    if outcome == "new":
        metrics.REWARDS.labels(config.name).inc()
    return FeedbackResponse(event_id=body.event_id, duplicate=outcome == "duplicate", late=late)
