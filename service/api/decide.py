"""What the decision routes do: check a predict against the model and the settings, decide
(the online model, or the published policy the model serves), log the decision idempotently and
answer from the logged event; record a feedback.

Both are ``async``: what they do is short CPU work (validation, one decision of the in-memory
model) on the event loop rather than a hop to FastAPI's thread pool and back (which under a busy
learner thread costs a wait for the GIL each way), and one Redis round trip awaited on the async
client, so the loop serves other requests meanwhile. A Redis server that is down answers at once
(connection refused: 503); one that hangs fails the request after ``redis_timeout_seconds``.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, NamedTuple

import numpy as np
from fastapi import HTTPException, status

from boosters.base import Decision
from boosters.registry import full_information
from service import contexts, metrics
from service.api.schemas import FeedbackRequest, FeedbackResponse, PredictRequest, PredictResponse
from service.domain import ServingConfig
from service.eventlog import EventLog, OutcomeUnknown
from service.events import decision_event, iso_timestamp
from service.runtime import ServedModel
from service.settings import Settings
from service.store import ModelStore

__all__ = ["Decided", "decide", "feedback", "predict", "response_of", "unprocessable"]

def unprocessable(message: str) -> HTTPException:
    """A 422 naming the problem."""
    return HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, message)


class Decided(NamedTuple):
    """What :func:`decide` answers: the decision to log, the model version, the served policy
    (None: online) and, outside the Online learning mode, ``mode``: the mode and the action
    the model would have played (``model_action``), for the apprentice's agreement report."""

    decision: Decision
    version: int
    policy: dict[str, Any] | None
    mode: dict[str, Any] | None


def decide(model: ServedModel, store: ModelStore, context: dict[str, Any], event_id: str,
           excluded: list[int], serving: ServingConfig, published: int | None,
           baseline: int | None = None, candidates: list[dict[str, Any]] | None = None
           ) -> Decided:
    """The decision by the one decision path (:meth:`ServedModel.decide`): the published policy
    the model serves, else the online model.

    In the ``Apprentice`` and ``LoggingOnly`` learning modes (docs/personalizer.md) the
    baseline is played with probability 1, as logged: ``baseline`` (an action index), or the
    first action not excluded. An apprentice keeps its model's internals, so the learner trains
    the model on the baseline's outcome; in LoggingOnly the event is not learned.

    A model with action features decides by its booster among ``candidates`` (feature dicts;
    ``excluded`` and ``baseline`` index them; a candidate set the booster refuses is a 422)."""
    mode = model.config.learning_mode
    if candidates is not None:
        policy = None
        try:
            decision, version = model.decide(context, event_id, excluded, candidates=candidates)
        except ValueError as exc:
            raise unprocessable(str(exc)) from None
    else:
        policy = (None if mode != "Online"
                  else store.served_policy(model.config, serving, published))
        decision, version = model.decide(context, event_id, excluded, policy=policy)
    if mode != "Online":
        k = len(model.config.actions) if candidates is None else len(candidates)
        chosen = _baseline(k, excluded, baseline)
        p = np.zeros(k)
        p[chosen] = 1.0
        internals = decision.internals if mode == "Apprentice" else {}
        played = Decision(action=chosen, probabilities=p, internals=internals)
        return Decided(played, version, None, {"mode": mode, "model_action": decision.action})
    if policy is None:
        return Decided(decision, version, None, None)
    return Decided(decision, version, {"version": published, "temperature": policy.temperature,
                                       "min_propensity": policy.min_propensity}, None)


def _baseline(k: int, excluded: list[int], baseline: int | None) -> int:
    """``baseline``, or the first of ``k`` actions not excluded."""
    if baseline is not None:
        return baseline
    gone = set(excluded)
    return next(i for i in range(k) if i not in gone)


def _candidates(body: PredictRequest, model: ServedModel,
                settings: Settings) -> tuple[list[str], list[dict[str, Any]] | None]:
    """The action ids of this request and, for a model with action features, its candidates'
    features (checked like a context's), or a 422."""
    if not model.config.action_features:
        if body.actions is not None:
            raise unprocessable(f"model {model.name!r} has fixed actions: actions (candidates "
                                "with features) is for a model with action_features")
        return model.config.actions, None
    if body.actions is None:
        raise unprocessable(f"model {model.name!r} has action_features: send its candidates "
                            "in actions ([{\"id\": ..., \"features\": {...}}, ...])")
    if len(body.actions) > settings.max_actions:
        raise unprocessable(f"too many candidates: {len(body.actions)} > "
                            f"{settings.max_actions} (max_actions)")
    for candidate in body.actions:
        _check_size(candidate.features, settings, f"candidate {candidate.id!r}: ")
        try:
            contexts.check_context_sizes(candidate.features, settings)
        except contexts.ContextError as exc:
            raise unprocessable(f"candidate {candidate.id!r}: {exc}") from None
    return [c.id for c in body.actions], [dict(c.features) for c in body.actions]


def _check_size(features: dict[str, Any], settings: Settings, what: str = "") -> None:
    if len(features) > settings.max_features:
        raise unprocessable(
            f"{what}too many features: {len(features)} > {settings.max_features} (max_features)"
        )


def _checked(body: PredictRequest, model: ServedModel, log: EventLog, settings: Settings
             ) -> tuple[list[int], dict[str, Any], dict[str, str], list[str],
                        list[dict[str, Any]] | None]:
    """The excluded action indices, the context as the model takes it
    (:func:`~service.contexts.typed_context`), the feature types new to the log, the action
    ids and the candidates' features (:func:`_candidates`), or a 422."""
    _check_size(body.context, settings)
    actions, candidates = _candidates(body, model, settings)
    index = {a: i for i, a in enumerate(actions)}
    unknown = [a for a in body.excluded_actions if a not in index]
    if unknown:
        raise unprocessable(f"unknown action id(s) in excluded_actions: {', '.join(unknown)}")
    excluded = sorted({index[a] for a in body.excluded_actions})
    if len(excluded) >= len(actions):
        raise unprocessable("excluded_actions excludes every action")
    try:
        contexts.check_context_sizes(body.context, settings)
        context, new_types = contexts.typed_context(model, log, body.context)
    except contexts.ContextError as exc:
        raise unprocessable(str(exc)) from None
    return excluded, context, new_types, actions, candidates


async def predict(body: PredictRequest, model: ServedModel, log: EventLog, store: ModelStore,
                  settings: Settings) -> PredictResponse:
    """Decide for ``body`` and log the decision (idempotent per event id)."""
    config = model.config
    excluded, context, new_types, actions, candidates = _checked(body, model, log, settings)
    event_id = body.event_id or uuid.uuid4().hex
    serving, published = await log.serving_state_async(config.name)
    decided = decide(model, store, context, event_id, excluded, serving, published,
                     candidates=candidates)
    event = decision_event(
        event_id, time.time(), decided.version, actions, context, decided.decision,
        excluded=excluded, policy=decided.policy, mode=decided.mode, candidates=candidates,
    )
    digest = contexts.request_digest(
        body.model_dump(exclude={"event_id"} | ({"actions"} if candidates is None else set())))
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
        return response_of(logged)
    if outcome.status == "conflict":
        raise HTTPException(status.HTTP_409_CONFLICT, f"event id {event_id!r} was already used "
                            "by a different request")
    if outcome.status in ("type", "full"):
        raise unprocessable(str(contexts.outcome_error(outcome, new_types, settings)))
    contexts.confirm_types(model, new_types)
    metrics.DECISIONS.labels(config.name).inc()
    return response_of(event)


def response_of(event: dict) -> PredictResponse:
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


def _label(body: FeedbackRequest, model: ServedModel) -> int | None:
    """The index of the feedback's label (None for a reward), or a 422."""
    config = model.config
    if config.action_features:
        if body.label is not None:
            raise unprocessable(f"model {config.name!r} has action_features: send a reward "
                                "(labels name fixed actions)")
        return None
    if body.label is not None:
        try:
            return config.actions.index(body.label)
        except ValueError:
            raise unprocessable(f"unknown action id in label: {body.label!r}") from None
    if full_information(config.booster) and body.reward != 1:
        raise unprocessable(
            f"booster {config.booster!r} is full-information: send the label "
            "(or a reward of 1 for the played action)"
        )
    return None


async def feedback(body: FeedbackRequest, model: ServedModel, log: EventLog) -> FeedbackResponse:
    """Record the reward (or the label) of a decision; the first feedback counts (under the
    ``sum`` aggregation, every one within the reward wait)."""
    config = model.config
    label = _label(body, model)
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
