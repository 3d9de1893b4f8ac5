"""The Personalizer <-> boostbandit mapping: which model serves an action set (created on first
use), a Personalizer context as our features, the ranking, rewards on [-1, 1] and deferred
activation. docs/personalizer.md describes it; the routes are in
:mod:`service.personalizer.routes`."""

from __future__ import annotations

import hashlib
import logging
import time
import uuid
from typing import Any

from boosters.base import Decision, check_context
from boosters.registry import full_information, names
from service import metrics
from service.api.deps import key_matches
from service.api.errors import EVENT_LOG_ERROR
from service.domain import ModelConfig
from service.eventlog import EventLog
from service.events import decision_event, iso_timestamp
from service.formats import flatten_context
from service.models import contexts, creation
from service.models.decide import decide
from service.models.errors import ContextError, InvalidModel, ModelError, ModelExists
from service.models.runtime import ServedModel
from service.models.store import ModelStore
from service.personalizer import loop
from service.personalizer.failures import PersonalizerFailure, bad
from service.personalizer.schemas import (
    RankableAction,
    RankedAction,
    RankRequest,
    RankResponse,
    RewardRequest,
)
from service.settings import Settings

__all__ = ["ACTION_FEATURES_MODEL", "action_candidates", "action_set_model_name", "activate",
           "excluded_ids", "may_create_models", "rank", "rank_candidates", "rank_event",
           "request_context", "resolve_model", "reward", "typed_context",
           "wants_action_features"]

log_ = logging.getLogger("boostbandit.personalizer")

#: The endpoint's one model with action features (``personalizer_action_features``)
ACTION_FEATURES_MODEL = "pz-action-features"

#: A rank's candidates for a model with action features: the action ids and their features
Candidates = tuple[list[str], list[dict[str, Any]]]


def may_create_models(token: str | None, settings: Settings) -> bool:
    """Whether the caller holding ``token`` may have a rank create a model: always without auth,
    with an admin key, or with any valid key when ``personalizer_auto_create`` is ``any-key``."""
    if not settings.auth_enabled or settings.personalizer_auto_create == "any-key":
        return True
    return token is not None and key_matches(token, settings.admins)


def action_set_model_name(ids: list[str]) -> str:
    """The model of an action set (order does not matter).

    >>> action_set_model_name(["b", "a"]) == action_set_model_name(["a", "b"])
    True
    """
    digest = hashlib.sha256("\x1f".join(sorted(ids)).encode()).hexdigest()
    return f"pz-{digest[:16]}"


def _create(name: str, ids: list[str], log: EventLog, store: ModelStore,
            settings: Settings) -> ServedModel:
    """Create the model of an action set, or with no ``ids`` the model with action features
    (a concurrent creator may win: then use theirs)."""
    fields = loop.desired(log, settings, action_features=not ids)
    if ids and fields["booster"] not in names():
        raise PersonalizerFailure(500, "InternalServerError",
                                  f"booster {fields['booster']!r} (personalizer_booster or the "
                                  "policy) is not a registered booster")
    made = sum(1 for n in log.configs() if n.startswith("pz-"))
    if made >= settings.personalizer_max_models:
        raise bad("InvalidRankRequest",
                   f"too many distinct action sets (personalizer_max_models = "
                   f"{settings.personalizer_max_models}); configure personalizer_model")
    config = ModelConfig(name=name, actions=sorted(ids), **fields)
    try:
        model = creation.create_model(log, store, config, settings.max_actions)
    except InvalidModel as exc:
        raise PersonalizerFailure(500, "InternalServerError",
                                  f"cannot build booster: {exc.reason}") from None
    except ModelExists:  # a concurrent creator won: use theirs
        existing = store.get(name)
        if existing is None:  # pragma: no cover - deleted right after a concurrent creation
            raise PersonalizerFailure(503, "ServiceUnavailable",
                                      "model creation raced; retry") from None
        return existing
    log_.info("created model %s for actions %s", name,
              ", ".join(config.actions) or "described by their features")
    return model


def wants_action_features(actions: list[RankableAction], settings: Settings) -> bool:
    """Whether a rank of ``actions`` goes to the endpoint's model with action features
    (``personalizer_action_features``; unused with ``personalizer_model``)."""
    mode = settings.personalizer_action_features
    return mode == "always" or (mode == "auto" and any(any(a.features or []) for a in actions))


def _configured(ids: list[str], settings: Settings, store: ModelStore) -> ServedModel:
    """The ``personalizer_model``, which must know every one of ``ids`` unless it has action
    features."""
    model = store.get(settings.personalizer_model or "")
    if model is None:
        raise PersonalizerFailure(500, "InternalServerError",
                                  f"personalizer_model {settings.personalizer_model!r} "
                                  "does not exist; create it with POST /v1/models")
    unknown = [a for a in ids if a not in set(model.config.actions)]
    if unknown and not model.config.action_features:
        raise bad("InvalidRankRequest",
                  f"unknown action id(s) for model {model.name!r}: {', '.join(unknown)}")
    return model


def _found_or_created(name: str, ids: list[str], log: EventLog, store: ModelStore,
                      settings: Settings, may_create: bool) -> ServedModel:
    """The model ``name`` (of the action set ``ids``, or with no ``ids`` the model with action
    features), created if it does not exist yet and ``may_create`` (else 403)."""
    model = store.get(name)
    if model is not None:
        return model
    if not may_create:
        raise PersonalizerFailure(
            403, "Forbidden",
            f"no model serves this {'action set' if ids else 'endpoint'} yet ({name}) and "
            "creating one needs an admin key (setting personalizer_auto_create = 'admin'): "
            "rank it once with an admin key, set BOOSTBANDIT_PERSONALIZER_AUTO_CREATE=any-key "
            "to let any key create models, or set personalizer_model",
        )
    return _create(name, ids, log, store, settings)


def resolve_model(ids: list[str], log: EventLog, store: ModelStore, settings: Settings,
                  may_create: bool = True, action_features: bool = False) -> ServedModel:
    """The model serving a request with action ids ``ids`` (docs/personalizer.md): the
    ``personalizer_model``, else the model with action features if ``action_features``
    (:func:`wants_action_features`), else the model of the action set; a model that does not
    exist yet is created only if ``may_create`` (else 403)."""
    if settings.personalizer_model:
        model = _configured(ids, settings, store)
    elif action_features:
        model = _found_or_created(ACTION_FEATURES_MODEL, [], log, store, settings, may_create)
        if not model.config.action_features:
            raise PersonalizerFailure(409, "Conflict", f"model {ACTION_FEATURES_MODEL!r} exists "
                                      "without action features (it was not created by rank)")
    else:
        if len(ids) < 2:
            raise bad("InvalidRankRequest", "rank needs at least 2 actions")
        name = action_set_model_name(ids)
        model = _found_or_created(name, ids, log, store, settings, may_create)
        # a model of that name made through POST /v1/models may hold other actions
        missing = [a for a in ids if a not in set(model.config.actions)]
        if missing:
            raise PersonalizerFailure(
                409, "Conflict",
                f"model {name!r}, the model of this action set, exists with other actions "
                f"(it was not created by rank); missing: {', '.join(missing)}",
            )
    if not model.config.action_features and full_information(model.config.booster):
        raise PersonalizerFailure(500, "InternalServerError",
                                  f"model {model.name!r} uses a full-information booster; the "
                                  "Personalizer routes need a bandit booster")
    return model


def request_context(features: list[dict[str, Any]] | None, settings: Settings,
                    where: str = "contextFeatures") -> dict[str, Any]:
    """A request's ``contextFeatures`` (or other feature objects, named ``where`` in errors)
    merged and flattened into our features, checked."""
    merged: dict[str, Any] = {}
    for obj in features or []:
        merged.update(obj)
    try:
        context = flatten_context(merged)
        check_context(context)
    except (TypeError, ValueError) as exc:
        raise bad("InvalidRankRequest", f"{where}: {exc}") from None
    return check_limits(context, settings, where)


def action_candidates(actions: list[RankableAction], settings: Settings
                      ) -> list[dict[str, Any]]:
    """The features of each action of a rank for the model with action features, flattened
    like the context's; an action without features is described by its id (``{"id": ...}``).

    >>> from service.settings import Settings
    >>> action_candidates([RankableAction(id="a1", features=[{"topic": {"name": "x"}}]),
    ...                    RankableAction(id="a2"), RankableAction(id="a3", features=[{}])],
    ...                   Settings())
    [{'topic.name': 'x'}, {'id': 'a2'}, {'id': 'a3'}]
    """
    return [request_context(a.features, settings, f"action {a.id!r} features") or {"id": a.id}
            for a in actions]


def check_limits(context: dict[str, Any], settings: Settings, where: str) -> dict[str, Any]:
    """``context`` if it keeps the feature limits (count, sizes), else a 400 naming ``where``."""
    if len(context) > settings.max_features:
        raise bad("InvalidRankRequest", f"{where}: too many features: {len(context)} > "
                  f"{settings.max_features}")
    try:
        contexts.check_context_sizes(context, settings)
    except ContextError as exc:
        raise bad("InvalidRankRequest", f"{where}: {exc}") from None
    return context


def excluded_ids(excluded: list[str] | None, ids: list[str], settings: Settings) -> list[str]:
    """A request's excluded action ids (checked against its actions ``ids``), in order, once
    each."""
    if len(ids) > settings.personalizer_max_actions:
        raise bad("InvalidRankRequest", f"too many actions: {len(ids)} > "
                  f"{settings.personalizer_max_actions}")
    excluded_ids = list(dict.fromkeys(excluded or []))
    unknown = [a for a in excluded_ids if a not in set(ids)]
    if unknown:
        raise bad("InvalidRankRequest", f"excludedActions not among actions: {', '.join(unknown)}")
    if len(excluded_ids) >= len(ids):
        raise bad("InvalidRankRequest", "excludedActions excludes every action")
    return excluded_ids


def _log_decision(model: ServedModel, log: EventLog, event_id: str, event: dict[str, Any],
                  new_types: dict[str, str], settings: Settings) -> None:
    """Put a (not deferred) rank's decision in the log, or the Personalizer failure why not."""
    outcome = log.append_decision(model.config, event_id, event, new_types=new_types)
    if outcome.status in ("type", "full"):
        message = str(contexts.outcome_error(outcome, new_types, settings))
        raise bad("InvalidRankRequest", f"contextFeatures: {message}")
    if outcome.status != "logged":
        raise PersonalizerFailure(409, "Conflict", f"eventId {event_id!r} was already used")
    contexts.confirm_types(model, new_types)


def _ranking(actions: list[str], decision, ids: list[str], offered: set[str]
             ) -> list[RankedAction]:
    """The chosen action first, then the others by decreasing probability (stable: request
    order), excluded actions last with probability 0 (``actions``: the decision's)."""
    p = decision.probabilities.tolist()
    index = {a: i for i, a in enumerate(actions)}
    chosen = actions[decision.action]
    rest = sorted((a for a in ids if a != chosen),
                  key=lambda a: (a not in offered, -p[index[a]]))  # stable: request order
    return [RankedAction(id=a, probability=p[index[a]] if a in offered else 0.0)
            for a in [chosen, *rest]]


def typed_context(model: ServedModel, log: EventLog, context: dict[str, Any]
                  ) -> tuple[dict[str, Any], dict[str, str]]:
    """The context as the model takes it and its feature types the model has not confirmed
    yet (:func:`service.models.contexts.typed_context`)."""
    try:
        return contexts.typed_context(model, log, context)
    except ContextError as exc:
        raise bad("InvalidRankRequest", f"contextFeatures: {exc}") from None


def rank_event(model: ServedModel, log: EventLog, store: ModelStore, settings: Settings,
               event_id: str, context: dict[str, Any], new_types: dict[str, str],
               excluded: list[int], baseline: str, defer: bool,
               extra: dict[str, Any] | None = None,
               candidates: Candidates | None = None) -> Decision:
    """Claim ``event_id``, decide like predict does (``baseline``: the action id the
    Apprentice and LoggingOnly modes play), and log the decision, or keep it until
    ``activate`` if ``defer``; ``extra`` goes into the event's ``bb.personalizer``.
    ``candidates`` (a model with action features): the request's action ids and their
    features (:func:`action_candidates`), which ``excluded`` indexes."""
    config = model.config
    actions, features = candidates if candidates is not None else (config.actions, None)
    retention = config.reward_wait_seconds + settings.event_retention_seconds
    if not log.claim_event_id(event_id, config.name, retention):
        raise PersonalizerFailure(409, "Conflict", f"eventId {event_id!r} was already used")
    try:
        serving, published = log.serving_state(config.name)
        decided = decide(model, store, context, event_id, excluded, serving, published,
                         baseline=actions.index(baseline), candidates=features)
        ts = time.time()
        event = decision_event(event_id, ts, decided.version, actions, context,
                               decided.decision, excluded=excluded, policy=decided.policy,
                               mode=decided.mode, candidates=features)
        event["bb"]["personalizer"] = {"deferred": defer, "baseline": baseline, **(extra or {})}
        if defer:
            log.defer_decision(config.name, event_id, event, ts, retention,
                               config.reward_aggregation)
        else:
            _log_decision(model, log, event_id, event, new_types, settings)
    except (EVENT_LOG_ERROR, PersonalizerFailure, ModelError):
        log.release_event_id(event_id)
        raise
    metrics.DECISIONS.labels(config.name).inc()
    return decided.decision


def rank(body: RankRequest, log: EventLog, store: ModelStore, settings: Settings,
         token: str | None) -> RankResponse:
    """Rank the request's actions: resolve the model, decide like predict does, log the
    decision (or keep it until ``activate`` if ``deferActivation``)."""
    ids = [a.id for a in body.actions]
    excluded = excluded_ids(body.excludedActions, ids, settings)
    context = request_context(body.contextFeatures, settings)
    model = resolve_model(ids, log, store, settings, may_create_models(token, settings),
                          wants_action_features(body.actions, settings))
    candidates = rank_candidates(model, body.actions, settings)
    actions = model.config.actions if candidates is None else ids
    context, new_types = typed_context(model, log, context)
    offered = set(ids) - set(excluded)
    excluded_indices = [i for i, a in enumerate(actions) if a not in offered]
    event_id = body.eventId or uuid.uuid4().hex
    baseline = next(a for a in ids if a in offered)
    decision = rank_event(model, log, store, settings, event_id, context, new_types,
                          excluded_indices, baseline, bool(body.deferActivation),
                          candidates=candidates)
    ranking = _ranking(actions, decision, ids, offered)
    return RankResponse(ranking=ranking, eventId=event_id, rewardActionId=ranking[0].id)


def rank_candidates(model: ServedModel, actions: list[RankableAction], settings: Settings
                    ) -> Candidates | None:
    """For a model with action features, the action ids and features a rank decides among
    (:func:`action_candidates`); None for a model of fixed actions."""
    if not model.config.action_features:
        return None
    return [a.id for a in actions], action_candidates(actions, settings)


def _model_of(event_id: str, log: EventLog, code: str) -> ModelConfig:
    name = log.model_of_event(event_id)
    config = None if name is None else log.config(name)
    if config is None:
        raise PersonalizerFailure(404, code, f"unknown or expired eventId {event_id!r}")
    return config


def reward(event_id: str, body: RewardRequest, log: EventLog) -> None:
    """Record the reward of an event (kept until activation for a deferred one): the first
    counts, or, under the ``sum`` aggregation, every one within the reward wait. ``value`` on
    [-1, 1] reaches the model as its ``negative_rewards`` says."""
    config = _model_of(event_id, log, "NotFound")
    now = time.time()
    payload = {"EventId": event_id, "Timestamp": iso_timestamp(now), "ts": now,
               "reward": config.from_client(body.value), "label": None, "label_id": None,
               "client_reward": float(body.value)}
    state = log.deferred_reward(config.name, event_id, payload)
    if state == 0:
        raise PersonalizerFailure(404, "NotFound", f"unknown or expired eventId {event_id!r}")
    if state == 1:
        outcome, _ = log.append_feedback(config.name, event_id, payload)
        if outcome == "new":
            metrics.REWARDS.labels(config.name).inc()


def activate(event_id: str, log: EventLog) -> None:
    """Log a deferred event's decision as made at rank time and forward a reward sent before;
    a no-op for an event that was not deferred, a drop after the reward window."""
    config = _model_of(event_id, log, "InvalidEventIdToActivate")
    deferred = log.deferred(config.name, event_id)
    if deferred is None:
        if log.event_exists(config.name, event_id):
            return  # not deferred / done
        raise PersonalizerFailure(404, "InvalidEventIdToActivate",
                                  f"unknown or expired eventId {event_id!r}")
    ts = deferred["ts"]
    if time.time() > ts + config.reward_wait_seconds:
        log_.info("%s: event %s activated after its reward window; dropped", config.name,
                  event_id)
        log.drop_deferred(config.name, event_id)
        return
    # order matters: log the decision first, then read and forward the stashed rewards (a
    # reward arriving from now on finds the decision in the log and goes the normal way, so
    # the stash read after it is complete); the forward is recorded once however often an
    # activation is retried
    log.append_decision(config, event_id, deferred["event"], age=max(0.0, time.time() - ts))
    stashed = _stashed(config, log.deferred(config.name, event_id))
    if stashed is not None:
        outcome, _ = log.append_feedback(config.name, event_id, stashed, once="activate")
        if outcome == "new":
            metrics.REWARDS.labels(config.name).inc()
    log.drop_deferred(config.name, event_id)


def _stashed(config: ModelConfig, deferred: dict[str, Any] | None) -> dict[str, Any] | None:
    """The feedback a deferred event's stash forwards at activation: its first reward, or under
    ``sum`` the first one carrying the sum of them all."""
    if deferred is None or deferred["feedback"] is None:
        return None
    if deferred["sum"] is None:
        return deferred["feedback"]
    total = deferred["sum"]
    return {**deferred["feedback"], "client_reward": total,
            "reward": config.summed_reward(total)}
