"""Azure Personalizer-compatible routes: ``/personalizer/v1.0/rank``,
``.../events/{eventId}/reward`` and ``.../events/{eventId}/activate``.

An existing Personalizer client works by changing its endpoint: same paths, field names and
status codes (rank 201, reward 204, activate 204), errors in Personalizer's envelope
``{"error": {"code", "message"}}`` with HTTP 400 (``InvalidRankRequest``,
``InvalidRewardRequest``, ``InvalidEventIdToActivate``; also for malformed JSON and bodies that
are not a JSON object, whatever the content type), 404 for an unknown event id, 409 for an event id
used twice, 401 without a valid key when keys are configured, 403 when a rank would create a model
without the right to (see "Who may create a model"), 413 for a body over ``max_body_bytes``, 503
when the event log (Redis) is unavailable. The key is read from ``Ocp-Apim-Subscription-Key``
(Personalizer's header) or ``Authorization: Bearer``. The request and response bodies are in
:mod:`service.personalizer_schemas`.

Mapping onto our models
=======================

* **Which model.** With the setting ``personalizer_model`` every request uses that model; the
  request's action ids must be among its actions, and its other actions are excluded for that
  event. Without it, each distinct *set* of action ids gets its own model, named
  ``pz-<16 hex of sha256 of the sorted ids>``, created on first use with the booster
  ``personalizer_booster`` (default ``adabandit``), ``personalizer_params``, the reward wait
  ``personalizer_reward_wait_seconds`` (600 s, Personalizer's default), the reward mapping
  ``personalizer_negative_rewards`` (default ``clip``) and the default reward
  ``personalizer_default_reward`` (on the client's scale, default 0, Personalizer's), its actions
  the sorted ids.
  At most ``personalizer_max_models`` are created that way. The event id -> model index is kept in
  ``bb:personalizer:event:<eventId>`` for as long as the event (reward wait + retention).
* **Who may create a model.** Creating a model is an admin action on every route: with keys
  configured, a rank whose action set has no model yet needs an admin key (``ADMIN_KEYS``) unless
  ``personalizer_auto_create`` is ``any-key``; with a user key it is refused with 403
  ``{"error": {"code": "Forbidden", ...}}`` naming the setting. Ranks of action sets that already
  have a model (and every rank with ``personalizer_model``) work with any valid key. Without keys
  (auth disabled) anyone creates models, as before.
* **Context.** ``contextFeatures`` (a list of objects) is merged and flattened into our flat
  features (``{"user": {"age": 3}}`` -> ``user.age``; see
  :func:`service.interchange.flatten_context`). Action ``features`` are accepted but not used:
  our boosters decide from the context over a fixed action list.
* **Ranking.** The chosen action first (``rewardActionId``), then the others by decreasing
  probability, excluded actions last with probability 0. The event id seeds the decision's
  generator, as in Personalizer.
* **Rewards.** A reward ``x`` in [-1, 1] reaches the model's [0, 1] scale as the model's
  ``negative_rewards`` says (:meth:`service.domain.ModelConfig.from_client`): ``clip`` (default)
  uses [0, 1] as sent and counts a negative reward as 0, so the usual 0/1 rewards are learned as
  0/1; ``rescale`` maps ``(x + 1) / 2``, for clients that send -1 for a miss. Configs stored before
  the setting existed keep ``rescale``, the mapping they were made with. The reward the client
  sent is kept as ``client_reward`` in the feedback record and the joined event (``bb``), and is
  what the DSJSON export writes. The first reward of an event counts (Personalizer's
  ``earliest`` aggregation); later ones are ignored (still 204). docs/personalizer.md has the
  details.
* **deferActivation.** A deferred decision is *not* put in the log at rank time: it waits in the
  hash ``bb:{model}:deferred:<eventId>``. A reward that arrives before activation is stashed
  there. ``activate`` appends the decision to the log as if it had been made then (same
  timestamp, reward window counted from the rank call) and forwards the stashed reward, so the
  learner joins and learns it like any other event. A deferred event never activated is never
  logged as a decision, joined or learned (Personalizer: "rewards are ignored unless activated").
  Activation after the reward window closed is accepted (204) but the event is dropped.
  Activating a non-deferred event is a no-op (204).
"""

from __future__ import annotations

import hashlib
import logging
import time
import uuid
from typing import Annotated, Any

import redis
from fastapi import APIRouter, Depends, Path, Request, Response, Security, status
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException  # FastAPI's is a subclass

from boosters.base import check_context
from boosters.registry import booster_class, names
from service import contexts as runtime
from service import creation, metrics
from service.deps import (
    SUBSCRIPTION_KEY,
    BearerCredentials,
    LogDep,
    SettingsDep,
    StoreDep,
    bearer_token,
    key_matches,
)
from service.domain import ModelConfig, reward_from_client
from service.eventlog import EventLog, OutcomeUnknown
from service.events import decision_event, iso_timestamp
from service.interchange import flatten_context
from service.personalizer_schemas import (
    ERROR_RESPONSES,
    PersonalizerError,
    RankedAction,
    RankRequest,
    RankResponse,
    RewardRequest,
)
from service.runtime import ServedModel
from service.settings import Settings
from service.store import ModelStore

__all__ = ["PREFIX", "PersonalizerFailure", "router"]

log_ = logging.getLogger("boostbandit.personalizer")

PREFIX = "/personalizer/v1.0"


class PersonalizerFailure(Exception):
    """An error answered in Personalizer's envelope.

    >>> PersonalizerFailure(404, "NotFound", "no such event").response().body
    b'{"error":{"code":"NotFound","message":"no such event"}}'
    """

    def __init__(self, status_code: int, code: str, message: str,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status_code, self.code, self.message = status_code, code, message
        self.headers = headers

    def response(self) -> JSONResponse:
        """The JSON answer."""
        body = PersonalizerError(error={"code": self.code, "message": self.message})
        return JSONResponse(body.model_dump(exclude_none=True), status_code=self.status_code,
                            headers=self.headers)


def too_large(limit: int) -> JSONResponse:
    """The 413 answer of a Personalizer path whose body is over ``limit`` bytes."""
    return PersonalizerFailure(413, "RequestEntityTooLarge",
                               f"request body too large (limit {limit} bytes)").response()


_VALIDATION_CODES = {"rank": "InvalidRankRequest", "reward": "InvalidRewardRequest",
                     "activate": "InvalidEventIdToActivate"}


def _json_content_type(request: Request) -> bool:
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    return kind == "application/json" or (kind.startswith("application/") and
                                          kind.endswith("+json"))


def _problem(error: dict[str, Any]) -> str:
    """One validation error as ``field: message``.

    >>> _problem({"type": "json_invalid", "loc": ("body", 1), "msg": "JSON decode error",
    ...           "ctx": {"error": "Expecting value"}})
    'body: not valid JSON (Expecting value at character 1)'
    >>> _problem({"type": "missing", "loc": ("body", "value"), "msg": "Field required"})
    'value: Field required'
    """
    loc = error.get("loc", ())
    if error.get("type") == "json_invalid":
        reason = (error.get("ctx") or {}).get("error", error.get("msg"))
        where = f" at character {loc[1]}" if len(loc) > 1 else ""
        return f"body: not valid JSON ({reason}{where})"
    return f"{'.'.join(str(p) for p in loc[1:]) or 'body'}: {error.get('msg')}"


class PersonalizerRoute(APIRoute):
    """Answers request-validation errors and bodies that are not JSON in Personalizer's envelope
    with HTTP 400 (instead of the app's 422 / 400 ``{"detail": ...}``), an unavailable event log
    with 503 in the envelope, and :class:`PersonalizerFailure` as it says."""

    def get_route_handler(self):  # noqa: ANN201 - Starlette's handler type
        original = super().get_route_handler()
        code = _VALIDATION_CODES.get(self.path.rsplit("/", 1)[-1], "BadRequest")

        async def handler(request: Request) -> Response:
            try:
                return await original(request)
            except RequestValidationError as exc:
                problems = "; ".join(_problem(e) for e in exc.errors())
                if self.body_field is not None and not _json_content_type(request):
                    problems = ("the body must be a JSON object sent as Content-Type: "
                                f"application/json; {problems}")
                return PersonalizerFailure(400, code, problems or "invalid request").response()
            except PersonalizerFailure as exc:
                return exc.response()
            except (redis.ConnectionError, redis.TimeoutError, OutcomeUnknown) as exc:
                return PersonalizerFailure(
                    503, "ServiceUnavailable",
                    f"event log (Redis) unavailable or did not answer ({exc}); retrying the "
                    "same request is safe", headers={"Retry-After": "1"},
                ).response()
            except HTTPException as exc:
                if exc.status_code != 400:  # pragma: no cover - only body parsing raises here
                    raise
                # a body that is not JSON: FastAPI's {"detail": "There was an error parsing
                # the body"}, answered in the envelope like any other invalid request
                return PersonalizerFailure(400, code, f"body: not valid JSON ({exc.detail})"
                                           ).response()

        return handler


async def require_personalizer_key(
    subscription_key: Annotated[str | None, Security(SUBSCRIPTION_KEY)],
    credentials: BearerCredentials,
    settings: SettingsDep,
) -> str | None:
    """With keys configured: ``Ocp-Apim-Subscription-Key`` or ``Authorization: Bearer`` (the
    key is returned; None without auth). Both schemes are declared to the OpenAPI."""
    if not settings.auth_enabled:
        return None
    token = (subscription_key or "").strip() or bearer_token(credentials)
    if not token or not key_matches(token, settings.user_keys):
        raise PersonalizerFailure(
            401, "Unauthorized",
            "missing or invalid key (Ocp-Apim-Subscription-Key or Authorization: Bearer)",
        )
    return token


PersonalizerKey = Annotated[str | None, Depends(require_personalizer_key)]


def may_create_models(token: str | None, settings: Settings) -> bool:
    """Whether the caller holding ``token`` may have a rank create a model: always without auth,
    with an admin key, or with any valid key when ``personalizer_auto_create`` is ``any-key``."""
    if not settings.auth_enabled or settings.personalizer_auto_create == "any-key":
        return True
    return token is not None and key_matches(token, settings.admins)


router = APIRouter(
    prefix=PREFIX,
    tags=["personalizer"],
    route_class=PersonalizerRoute,
    dependencies=[Depends(require_personalizer_key)],
)


def _bad(code: str, message: str) -> PersonalizerFailure:
    return PersonalizerFailure(400, code, message)


def action_set_model_name(ids: list[str]) -> str:
    """The model of an action set (order does not matter).

    >>> action_set_model_name(["b", "a"]) == action_set_model_name(["a", "b"])
    True
    """
    digest = hashlib.sha256("\x1f".join(sorted(ids)).encode()).hexdigest()
    return f"pz-{digest[:16]}"


def _create(name: str, ids: list[str], log: EventLog, store: ModelStore,
            settings: Settings) -> ServedModel:
    """Create the model of an action set (a concurrent creator may win: then use theirs)."""
    if settings.personalizer_booster not in names():
        raise PersonalizerFailure(500, "InternalServerError",
                                  f"personalizer_booster {settings.personalizer_booster!r} is "
                                  "not a registered booster")
    made = sum(1 for n in log.configs() if n.startswith("pz-"))
    if made >= settings.personalizer_max_models:
        raise _bad("InvalidRankRequest",
                   f"too many distinct action sets (personalizer_max_models = "
                   f"{settings.personalizer_max_models}); configure personalizer_model")
    mapping = settings.personalizer_negative_rewards
    config = ModelConfig(
        name=name,
        booster=settings.personalizer_booster,
        actions=sorted(ids),
        params=dict(settings.personalizer_params),
        reward_wait_seconds=settings.personalizer_reward_wait_seconds,
        default_reward=reward_from_client(settings.personalizer_default_reward, mapping),
        negative_rewards=mapping,
    )
    try:
        model = creation.create_model(log, store, config, settings.max_actions)
    except creation.InvalidModel as exc:
        raise PersonalizerFailure(500, "InternalServerError",
                                  f"cannot build booster: {exc.reason}") from None
    except creation.ModelExists:  # a concurrent creator won: use theirs
        existing = store.get(name)
        if existing is None:  # pragma: no cover - deleted right after a concurrent creation
            raise PersonalizerFailure(503, "ServiceUnavailable",
                                      "model creation raced; retry") from None
        return existing
    log_.info("created model %s for actions %s", name, ", ".join(config.actions))
    return model


def resolve_model(ids: list[str], log: EventLog, store: ModelStore,
                  settings: Settings, may_create: bool = True) -> ServedModel:
    """The model serving a request with action ids ``ids`` (see the module docstring); a model
    that does not exist yet is created only if ``may_create`` (else 403)."""
    if settings.personalizer_model:
        model = store.get(settings.personalizer_model)
        if model is None:
            raise PersonalizerFailure(500, "InternalServerError",
                                      f"personalizer_model {settings.personalizer_model!r} "
                                      "does not exist; create it with POST /v1/models")
        unknown = [a for a in ids if a not in set(model.config.actions)]
        if unknown:
            raise _bad("InvalidRankRequest",
                       f"unknown action id(s) for model {model.name!r}: {', '.join(unknown)}")
    else:
        if len(ids) < 2:
            raise _bad("InvalidRankRequest", "rank needs at least 2 actions")
        name = action_set_model_name(ids)
        model = store.get(name)
        if model is None:
            if not may_create:
                raise PersonalizerFailure(
                    403, "Forbidden",
                    f"no model serves this action set yet ({name}) and creating one needs an "
                    "admin key (setting personalizer_auto_create = 'admin'): rank it once with "
                    "an admin key, set BOOSTBANDIT_PERSONALIZER_AUTO_CREATE=any-key to let any "
                    "key create models, or set personalizer_model",
                )
            model = _create(name, ids, log, store, settings)
        # a model of that name made through POST /v1/models may hold other actions
        missing = [a for a in ids if a not in set(model.config.actions)]
        if missing:
            raise PersonalizerFailure(
                409, "Conflict",
                f"model {name!r}, the model of this action set, exists with other actions "
                f"(it was not created by rank); missing: {', '.join(missing)}",
            )
    if getattr(booster_class(model.config.booster), "full_information", False):
        raise PersonalizerFailure(500, "InternalServerError",
                                  f"model {model.name!r} uses a full-information booster; the "
                                  "Personalizer routes need a bandit booster")
    return model


def _decide(model: ServedModel, log: EventLog, store: ModelStore, context: dict[str, Any],
            event_id: str, excluded: list[int]):
    """Decide like ``/v1/models/{name}/predict`` (online model or published offline policy)."""
    config = model.config
    serving, published = log.serving_state(config.name)
    bundle = store.policy(config, published) if serving.mode == "policy" and published else None
    if bundle is None:
        decision, version = model.decide(context, event_id, excluded)
        return decision, version, None
    temperature = bundle.temperature if serving.temperature is None else serving.temperature
    floor = bundle.min_propensity if serving.min_propensity is None else serving.min_propensity
    decision, version = model.decide_policy(context, event_id, excluded, bundle, temperature,
                                            floor)
    return decision, version, {"version": published, "temperature": temperature,
                               "min_propensity": floor}


def _responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    return {c: ERROR_RESPONSES[c] for c in (*codes, 401, 413, 503, "4XX")}


@router.post(
    "/rank",
    status_code=status.HTTP_201_CREATED,
    response_model=RankResponse,
    response_description="The ranking; the event is logged (unless deferred).",
    responses=_responses(400, 403, 409, 500),
)
def rank(body: RankRequest, log: LogDep, store: StoreDep, settings: SettingsDep,
         token: PersonalizerKey) -> RankResponse:
    """Rank the actions for a context. The chosen one is `rewardActionId`: it is logged with its
    probability and learned when its reward arrives or its reward wait ends (after `activate`
    if `deferActivation`).

    The set of action ids selects the model (one per set, created on first use, unless
    `personalizer_model` is set). A rank that needs a new model needs an admin key when keys
    are configured, unless `personalizer_auto_create` is `any-key` (403 otherwise).
    """
    ids = [a.id for a in body.actions]
    if len(ids) > settings.personalizer_max_actions:
        raise _bad("InvalidRankRequest", f"too many actions: {len(ids)} > "
                   f"{settings.personalizer_max_actions}")
    excluded_ids = list(dict.fromkeys(body.excludedActions or []))
    unknown = [a for a in excluded_ids if a not in set(ids)]
    if unknown:
        raise _bad("InvalidRankRequest", f"excludedActions not among actions: {', '.join(unknown)}")
    if len(excluded_ids) >= len(ids):
        raise _bad("InvalidRankRequest", "excludedActions excludes every action")
    merged: dict[str, Any] = {}
    for obj in body.contextFeatures or []:
        merged.update(obj)
    try:
        context = flatten_context(merged)
        check_context(context)
    except (TypeError, ValueError) as exc:
        raise _bad("InvalidRankRequest", f"contextFeatures: {exc}") from None
    if len(context) > settings.max_features:
        raise _bad("InvalidRankRequest", f"too many features: {len(context)} > "
                   f"{settings.max_features}")
    try:
        runtime.check_context_sizes(context, settings)
    except runtime.ContextError as exc:
        raise _bad("InvalidRankRequest", f"contextFeatures: {exc}") from None
    model = resolve_model(ids, log, store, settings, may_create_models(token, settings))
    config = model.config
    try:
        new_types = runtime.unconfirmed_types(model, log, runtime.context_types(context))
    except runtime.ContextError as exc:
        raise _bad("InvalidRankRequest", f"contextFeatures: {exc}") from None
    offered = set(ids) - set(excluded_ids)
    excluded = [i for i, a in enumerate(config.actions) if a not in offered]
    event_id = body.eventId or uuid.uuid4().hex
    retention = config.reward_wait_seconds + settings.event_retention_seconds
    if not log.claim_event_id(event_id, config.name, retention):
        raise PersonalizerFailure(409, "Conflict", f"eventId {event_id!r} was already used")
    try:
        decision, version, policy = _decide(model, log, store, context, event_id, excluded)
        ts = time.time()
        event = decision_event(event_id, ts, version, config.actions, context, decision,
                               excluded=excluded, policy=policy)
        event["bb"]["personalizer"] = {"deferred": bool(body.deferActivation),
                                       "baseline": next(a for a in ids if a in offered)}
        if body.deferActivation:
            log.defer_decision(config.name, event_id, event, ts, retention)
        else:
            outcome = log.append_decision(config, event_id, event, new_types=new_types)
            if outcome.status in ("type", "full"):
                message = str(runtime.outcome_error(outcome, new_types, settings))
                raise _bad("InvalidRankRequest", f"contextFeatures: {message}")
            if outcome.status != "logged":
                raise PersonalizerFailure(409, "Conflict", f"eventId {event_id!r} was already used")
            runtime.confirm_types(model, new_types)
    except (redis.RedisError, PersonalizerFailure):
        log.release_event_id(event_id)
        raise
    metrics.DECISIONS.labels(config.name).inc()
    p = decision.probabilities.tolist()
    index = {a: i for i, a in enumerate(config.actions)}
    chosen = config.actions[decision.action]
    rest = sorted((a for a in ids if a != chosen),
                  key=lambda a: (a not in offered, -p[index[a]]))  # stable: request order
    ranking = [RankedAction(id=a, probability=p[index[a]] if a in offered else 0.0)
               for a in [chosen, *rest]]
    return RankResponse(ranking=ranking, eventId=event_id, rewardActionId=chosen)


def _model_of(event_id: str, log: EventLog, code: str) -> ModelConfig:
    name = log.model_of_event(event_id)
    config = None if name is None else log.config(name)
    if config is None:
        raise PersonalizerFailure(404, code, f"unknown or expired eventId {event_id!r}")
    return config


EventIdPath = Annotated[str, Path(description="The `eventId` of a rank.",
                                   examples=["75269AD0-BFEE-4598-8196-C57383D38E10"])]


@router.post(
    "/events/{eventId}/reward",
    status_code=status.HTTP_204_NO_CONTENT,
    response_description="Recorded (a second reward of the same event is ignored).",
    responses=_responses(400, 404),
)
def reward(eventId: EventIdPath, body: RewardRequest, log: LogDep) -> Response:  # noqa: N803
    """Report the reward of an event's chosen action, in [-1, 1]: typically 1 for a success
    and 0 for a failure.

    The model's `negative_rewards` setting maps it onto the model's [0, 1]: `clip` (the
    default) uses [0, 1] as sent and counts a negative reward as 0; `rescale` maps
    (x + 1) / 2. The reward as sent is logged and exported. Only the first reward of an event
    counts; it must arrive within the model's reward wait (else the default reward is learned).
    """
    config = _model_of(eventId, log, "NotFound")
    now = time.time()
    payload = {"EventId": eventId, "Timestamp": iso_timestamp(now), "ts": now,
               "reward": config.from_client(body.value), "label": None, "label_id": None,
               "client_reward": float(body.value)}
    state = log.deferred_reward(config.name, eventId, payload)
    if state == 0:
        raise PersonalizerFailure(404, "NotFound", f"unknown or expired eventId {eventId!r}")
    if state == 1:
        outcome, _ = log.append_feedback(config.name, eventId, payload)
        if outcome == "new":
            metrics.REWARDS.labels(config.name).inc()
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post(
    "/events/{eventId}/activate",
    status_code=status.HTTP_204_NO_CONTENT,
    response_description="Activated (also for an event that was not deferred, or activated "
    "after its reward wait, which is then dropped).",
    responses=_responses(404),
)
def activate(eventId: EventIdPath, log: LogDep, settings: SettingsDep) -> Response:  # noqa: N803
    """Activate an event ranked with `deferActivation`: from now on it is logged and learned
    like any other, with a reward sent before. Idempotent."""
    config = _model_of(eventId, log, "InvalidEventIdToActivate")
    deferred = log.deferred(config.name, eventId)
    if deferred is None:
        if log.event_exists(config.name, eventId):
            return Response(status_code=status.HTTP_204_NO_CONTENT)  # not deferred / done
        raise PersonalizerFailure(404, "InvalidEventIdToActivate",
                                  f"unknown or expired eventId {eventId!r}")
    ts = deferred["ts"]
    if time.time() > ts + config.reward_wait_seconds:
        log_.info("%s: event %s activated after its reward window; dropped", config.name, eventId)
        log.drop_deferred(config.name, eventId)
        return Response(status_code=status.HTTP_204_NO_CONTENT)
    event = deferred["event"]
    # order matters: log the decision first, then forward a stashed reward (a reward arriving
    # from now on finds the decision in the log and goes the normal way)
    log.append_decision(config, eventId, event, age=max(0.0, time.time() - ts))
    if deferred["feedback"] is not None:
        outcome, _ = log.append_feedback(config.name, eventId, deferred["feedback"])
        if outcome == "new":
            metrics.REWARDS.labels(config.name).inc()
    log.drop_deferred(config.name, eventId)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
