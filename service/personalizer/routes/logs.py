"""Personalizer's log routes: ``DELETE /logs`` and ``GET /logs/properties`` (admin; the work is
in :mod:`service.personalizer.logs`)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query, Response, status

from service.api.deps import LogDep, SettingsDep
from service.personalizer import logs
from service.personalizer.routes.common import admin_router, responses
from service.personalizer.schemas import LogsProperties, PersonalizerError

__all__ = ["router"]

router = admin_router()

_ADMIN = {403: {"model": PersonalizerError, "description": "Keys are configured and this one "
                "is not an admin key (`Forbidden`)."}}
_RANGE = {400: {"model": PersonalizerError, "description": "`from` or `to` is not an RFC 3339 "
                "date-time, or `from` is after `to` (`BadRequest`)."}}

_FROM = Query(alias="from", json_schema_extra={"format": "date-time"},
              description="Delete only what was logged from this time on (RFC 3339, e.g. "
              "`2026-11-23T20:00:00Z`). Not part of Personalizer's API.")
_TO = Query(alias="to", json_schema_extra={"format": "date-time"},
            description="Delete only what was logged up to this time (RFC 3339). Not part of "
            "Personalizer's API.")


@router.delete(
    "/logs",
    status_code=status.HTTP_204_NO_CONTENT,
    response_description="Deleted (what a model still needs is kept).",
    responses={**responses(), **_RANGE, **_ADMIN},
)
def delete_logs(log: LogDep, settings: SettingsDep,
                start: Annotated[str | None, _FROM] = None,
                end: Annotated[str | None, _TO] = None) -> Response:
    """Delete the logs of ranks and rewards of every model of the endpoint: all of them, or
    those logged from `from` to `to`.

    Never what a model still needs: the decision of an event not joined yet (waiting for its
    reward), a reward its learner has not read, a joined event its latest snapshot does not
    cover (a restart rebuilds the model from that snapshot and the joined events after it).
    Those stay; a later deletion takes them once they are learned. The models keep what they
    learned; a model retrained later (a change of its learning settings) learns from the log
    that remains.
    """
    logs.delete(log, settings, start, end)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.get(
    "/logs/properties",
    response_model=LogsProperties,
    response_model_exclude_none=True,
    response_description="The date range of the log (empty if nothing is logged).",
    responses={**responses(), **_ADMIN},
)
def get_logs_properties(log: LogDep, settings: SettingsDep) -> LogsProperties:
    """The date range of the log the endpoint retains (its decisions, rewards and joined
    events, over every model), by the event log's clock."""
    return logs.properties(log, settings)
