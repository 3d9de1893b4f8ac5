"""Personalizer's service configuration: ``GET``/``PUT``/``PATCH /configurations/service``,
and the apprentice's agreement report (the work is in
:mod:`service.personalizer.configuration`)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query

from service.api.deps import LogDep, SettingsDep, StoreDep
from service.personalizer import configuration
from service.personalizer.routes.common import admin_router, responses
from service.personalizer.schemas.configuration import (
    ApprenticeWindow,
    ServiceConfiguration,
    ServiceConfigurationPatch,
    ServiceConfigurationUpdate,
)

__all__ = ["router"]

router = admin_router()
PATH = "/configurations/service"


@router.get(PATH, response_model=ServiceConfiguration, response_model_exclude_none=True,
            responses=responses(403))
def get_service_configuration(log: LogDep, settings: SettingsDep) -> ServiceConfiguration:
    """The service configuration in force (the stored one, else the `personalizer_*`
    settings), with the apprentice's metrics once Apprentice mode was used."""
    return configuration.current(log, settings)


@router.put(PATH, response_model=ServiceConfiguration, response_model_exclude_none=True,
            responses=responses(400, 403))
def update_service_configuration(body: ServiceConfigurationUpdate, log: LogDep, store: StoreDep,
                                 settings: SettingsDep) -> ServiceConfiguration:
    """Replace the service configuration. A change of the reward wait, default reward,
    reward aggregation or exploration starts a new version of every model of the endpoint,
    retrained from the events the log retains; the learning mode, the export frequency and the
    log retention change in place (a switch from Apprentice to Online keeps what the model
    learned). docs/personalizer.md, "Service configuration"."""
    return configuration.update(body.model_dump(), log, store, settings)


@router.patch(PATH, response_model=ServiceConfiguration, response_model_exclude_none=True,
              responses=responses(400, 403))
def patch_service_configuration(body: ServiceConfigurationPatch, log: LogDep, store: StoreDep,
                                settings: SettingsDep) -> ServiceConfiguration:
    """v1.0's partial update: the fields given change, the others keep their values."""
    return configuration.update(body.model_dump(exclude_unset=True), log, store, settings,
                                partial=True)


@router.get(f"{PATH}/apprenticeMetrics", response_model=list[ApprenticeWindow],
            responses=responses(403))
def apprentice_agreement(
    log: LogDep, settings: SettingsDep,
    window: Annotated[int, Query(ge=1, le=100_000, description="Events per row.")] = 100,
) -> list[ApprenticeWindow]:
    """The apprentice's agreement with the baseline over time, one row per `window` apprentice
    events (an extension of this service: Personalizer showed it in its portal). Switch to
    Online when it is high enough (Personalizer suggested 60-80%)."""
    return configuration.apprentice_windows(log, settings, window)
