"""Personalizer's single-slot events: ``rank``, ``events/{eventId}/reward`` and
``events/{eventId}/activate`` (the work is in :mod:`service.personalizer.mapping`)."""

from __future__ import annotations

from fastapi import Response, status

from service.api.deps import LogDep, SettingsDep, StoreDep
from service.personalizer import mapping
from service.personalizer.routes.common import (
    EventIdPath,
    PersonalizerKey,
    event_router,
    responses,
)
from service.personalizer.schemas import RankRequest, RankResponse, RewardRequest

__all__ = ["router"]

router = event_router()


@router.post(
    "/rank",
    status_code=status.HTTP_201_CREATED,
    response_model=RankResponse,
    response_description="The ranking; the event is logged (unless deferred).",
    responses=responses(400, 403, 409, 500),
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
    return mapping.rank(body, log, store, settings, token)


@router.post(
    "/events/{eventId}/reward",
    status_code=status.HTTP_204_NO_CONTENT,
    response_description="Recorded (a second reward of the same event is ignored, unless the "
    "reward aggregation is `sum`).",
    responses=responses(400, 404),
)
def reward(eventId: EventIdPath, body: RewardRequest, log: LogDep) -> Response:  # noqa: N803
    """Report the reward of an event's chosen action, in [-1, 1]: typically 1 for a success
    and 0 for a failure.

    The model's `negative_rewards` setting maps it onto the model's [0, 1]: `clip` (the
    default) uses [0, 1] as sent and counts a negative reward as 0; `rescale` maps
    (x + 1) / 2. The reward as sent is logged and exported. Only the first reward of an event
    counts, or, with the service configuration's `rewardAggregation` `sum`, the sum of those
    that arrive within the reward wait (the event is then learned when the wait ends); a reward
    must arrive within the model's reward wait (else the default reward is learned).
    """
    mapping.reward(eventId, body, log)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post(
    "/events/{eventId}/activate",
    status_code=status.HTTP_204_NO_CONTENT,
    response_description="Activated (also for an event that was not deferred, or activated "
    "after its reward wait, which is then dropped).",
    responses=responses(404),
)
def activate(eventId: EventIdPath, log: LogDep) -> Response:  # noqa: N803
    """Activate an event ranked with `deferActivation`: from now on it is logged and learned
    like any other, with a reward sent before. Idempotent."""
    mapping.activate(eventId, log)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
