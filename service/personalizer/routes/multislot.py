"""Personalizer's multi-slot events (v1.1-preview.1): ``multislot/rank``,
``multislot/events/{eventId}/reward`` and ``multislot/events/{eventId}/activate`` (the work is
in :mod:`service.personalizer.multislot`)."""

from __future__ import annotations

from fastapi import Response, status

from service.api.deps import LogDep, SettingsDep, StoreDep
from service.personalizer import multislot
from service.personalizer.routes.common import (
    EventIdPath,
    PersonalizerKey,
    event_router,
    responses,
)
from service.personalizer.schemas import (
    MultiSlotRankRequest,
    MultiSlotRankResponse,
    MultiSlotRewardRequest,
)

__all__ = ["router"]

router = event_router()


@router.post(
    "/multislot/rank",
    status_code=status.HTTP_201_CREATED,
    response_model=MultiSlotRankResponse,
    response_description="One action per slot; each slot's event is logged (unless deferred).",
    responses=responses(400, 403, 409, 500),
)
def rank(body: MultiSlotRankRequest, log: LogDep, store: StoreDep, settings: SettingsDep,
         token: PersonalizerKey) -> MultiSlotRankResponse:
    """Fill the slots, in order, with distinct actions: one decision per slot by the model of
    the action set (as `rank` selects it), with the slot id as a context feature and the
    slot's excluded actions and the earlier slots' actions excluded. Each slot's decision is
    logged and learned as its own event `<eventId>/<slotId>`."""
    return multislot.rank(body, log, store, settings, token)


@router.post(
    "/multislot/events/{eventId}/reward",
    status_code=status.HTTP_204_NO_CONTENT,
    response_description="Recorded.",
    responses=responses(400, 404),
)
def reward(eventId: EventIdPath, body: MultiSlotRewardRequest,  # noqa: N803
           log: LogDep) -> Response:
    """Report the rewards of some of the event's slots, each in [-1, 1] (mapped as for
    `reward`); a slot id the event does not have is a 400 and records nothing."""
    multislot.reward(eventId, body, log)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post(
    "/multislot/events/{eventId}/activate",
    status_code=status.HTTP_204_NO_CONTENT,
    response_description="Every slot of the event activated.",
    responses=responses(404),
)
def activate(eventId: EventIdPath, log: LogDep) -> Response:  # noqa: N803
    """Activate a multi-slot event ranked with `deferActivation`: every slot's event is logged
    and learned from now on, with a reward sent before. Idempotent."""
    multislot.activate(eventId, log)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
