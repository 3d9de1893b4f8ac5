"""The decision path of the service: check a request against the model and the settings, decide
(the online model, the published policy the model serves, or the baseline of the Apprentice and
LoggingOnly learning modes), log the decision idempotently and return the logged event; record a
feedback. ``POST /v1/models/{name}/predict`` and ``/feedback`` (:mod:`service.api.decide` maps
their schemas) and the Personalizer ``rank`` (:func:`decide`) go through it.

It raises the domain errors of :mod:`service.models.errors`; each HTTP surface answers them.
:func:`predict` and :func:`feedback` are ``async``: what they do is short CPU work (validation,
one decision of the in-memory model) on the event loop rather than a hop to a thread pool and
back (which under a busy learner thread costs a wait for the GIL each way), and one Redis round
trip awaited on the async client, so the loop serves other requests meanwhile. A Redis server
that is down answers at once (connection refused); one that hangs fails the request after
``redis_timeout_seconds``.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, NamedTuple

import numpy as np

from boosters.base import Decision
from boosters.registry import full_information
from service import metrics
from service.domain import ServingConfig
from service.eventlog import EventLog, OutcomeUnknown
from service.events import decision_event, iso_timestamp
from service.models import contexts
from service.models.errors import (
    ContextError,
    DecisionUnknown,
    EventIdConflict,
    EventNotFound,
    InvalidRequest,
)
from service.models.runtime import ServedModel
from service.models.store import ModelStore
from service.settings import Settings

__all__ = ["Candidates", "Decided", "decide", "feedback", "predict"]

#: a request's candidates for a model with action features: (action id, features) each
Candidates = list[tuple[str, dict[str, Any]]]


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
    ``excluded`` and ``baseline`` index them; a candidate set the booster refuses is an
    :class:`~service.models.errors.InvalidRequest`)."""
    mode = model.config.learning_mode
    if candidates is not None:
        policy = None
        try:
            decision, version = model.decide(context, event_id, excluded, candidates=candidates)
        except ValueError as exc:
            raise InvalidRequest(str(exc)) from None
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


def _candidates(candidates: Candidates | None, model: ServedModel, settings: Settings
                ) -> tuple[list[str], list[dict[str, Any]] | None]:
    """The action ids of this request and, for a model with action features, its candidates'
    features (checked like a context's), or an InvalidRequest."""
    if not model.config.action_features:
        if candidates is not None:
            raise InvalidRequest(f"model {model.name!r} has fixed actions: actions (candidates "
                                 "with features) is for a model with action_features")
        return model.config.actions, None
    if candidates is None:
        raise InvalidRequest(f"model {model.name!r} has action_features: send its candidates "
                             "in actions ([{\"id\": ..., \"features\": {...}}, ...])")
    if len(candidates) > settings.max_actions:
        raise InvalidRequest(f"too many candidates: {len(candidates)} > "
                             f"{settings.max_actions} (max_actions)")
    for action_id, features in candidates:
        _check_size(features, settings, f"candidate {action_id!r}: ")
        try:
            contexts.check_context_sizes(features, settings)
        except ContextError as exc:
            raise ContextError(f"candidate {action_id!r}: {exc}") from None
    return [a for a, _ in candidates], [dict(f) for _, f in candidates]


def _check_size(features: dict[str, Any], settings: Settings, what: str = "") -> None:
    if len(features) > settings.max_features:
        raise InvalidRequest(
            f"{what}too many features: {len(features)} > {settings.max_features} (max_features)"
        )


def _checked(context: dict[str, Any], excluded_ids: list[str], candidates: Candidates | None,
             model: ServedModel, log: EventLog, settings: Settings
             ) -> tuple[list[int], dict[str, Any], dict[str, str], list[str],
                        list[dict[str, Any]] | None]:
    """The excluded action indices, the context as the model takes it
    (:func:`~service.models.contexts.typed_context`), the feature types new to the log, the
    action ids and the candidates' features (:func:`_candidates`), or an InvalidRequest."""
    _check_size(context, settings)
    actions, features = _candidates(candidates, model, settings)
    index = {a: i for i, a in enumerate(actions)}
    unknown = [a for a in excluded_ids if a not in index]
    if unknown:
        raise InvalidRequest(f"unknown action id(s) in excluded_actions: {', '.join(unknown)}")
    excluded = sorted({index[a] for a in excluded_ids})
    if len(excluded) >= len(actions):
        raise InvalidRequest("excluded_actions excludes every action")
    contexts.check_context_sizes(context, settings)
    typed, new_types = contexts.typed_context(model, log, context)
    return excluded, typed, new_types, actions, features


async def predict(model: ServedModel, log: EventLog, store: ModelStore, settings: Settings,
                  context: dict[str, Any], excluded_ids: list[str], event_id: str | None,
                  digest: str, candidates: Candidates | None = None) -> dict[str, Any]:
    """Decide for ``context`` and log the decision (idempotent per event id: ``digest`` tells a
    retry of the same request from another one); the logged decision event (for a retry, the
    one logged first)."""
    config = model.config
    excluded, context, new_types, actions, features = _checked(
        context, excluded_ids, candidates, model, log, settings)
    event_id = event_id or uuid.uuid4().hex
    serving, published = await log.serving_state_async(config.name)
    decided = decide(model, store, context, event_id, excluded, serving, published,
                     candidates=features)
    event = decision_event(
        event_id, time.time(), decided.version, actions, context, decided.decision,
        excluded=excluded, policy=decided.policy, mode=decided.mode, candidates=features,
    )
    try:
        outcome = await log.append_decision_async(config, event_id, event, digest, new_types)
    except OutcomeUnknown as exc:
        raise DecisionUnknown(event_id, exc) from None
    if outcome.status == "replay":
        logged = outcome.event
        if logged is None and outcome.joined_id is not None:
            logged = log.joined_event(config.name, outcome.joined_id)
        if logged is None:
            raise EventIdConflict(f"event id {event_id!r} was used; its decision is no longer "
                                  "kept")
        return logged
    if outcome.status == "conflict":
        raise EventIdConflict(f"event id {event_id!r} was already used by a different request")
    if outcome.status in ("type", "full"):
        raise contexts.outcome_error(outcome, new_types, settings)
    contexts.confirm_types(model, new_types)
    metrics.DECISIONS.labels(config.name).inc()
    return event


def _label(label_id: str | None, reward: float | None, model: ServedModel) -> int | None:
    """The index of the feedback's label (None for a reward), or an InvalidRequest."""
    config = model.config
    if config.action_features:
        if label_id is not None:
            raise InvalidRequest(f"model {config.name!r} has action_features: send a reward "
                                 "(labels name fixed actions)")
        return None
    if label_id is not None:
        try:
            return config.actions.index(label_id)
        except ValueError:
            raise InvalidRequest(f"unknown action id in label: {label_id!r}") from None
    if full_information(config.booster) and reward != 1:
        raise InvalidRequest(
            f"booster {config.booster!r} is full-information: send the label "
            "(or a reward of 1 for the played action)"
        )
    return None


async def feedback(model: ServedModel, log: EventLog, event_id: str, reward: float | None,
                   label_id: str | None) -> tuple[bool, bool]:
    """Record the reward (or the label) of a decision; the first feedback counts (under the
    ``sum`` aggregation, every one within the reward wait). Whether it was a duplicate, and
    whether it came late; an :class:`~service.models.errors.EventNotFound` for an unknown or
    expired event id."""
    config = model.config
    label = _label(label_id, reward, model)
    now = time.time()
    payload = {
        "EventId": event_id,
        "Timestamp": iso_timestamp(now),
        "ts": now,
        "reward": None if reward is None else float(reward),
        "label": label,
        "label_id": label_id,
    }
    outcome, late = await log.append_feedback_async(config.name, event_id, payload)
    if outcome == "unknown":
        raise EventNotFound(f"unknown or expired event id {event_id!r} for model "
                            f"{config.name!r}")
    if outcome == "new":
        metrics.REWARDS.labels(config.name).inc()
    return outcome == "duplicate", late
