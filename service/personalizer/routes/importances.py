"""Feature importances: ``PUT``/``GET``/``DELETE /featureImportances/{featureImportanceId}`` and
``GET /featureImportances`` (the work is in :mod:`service.personalizer.importances`)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Path, Query, Response, status

from service.api.deps import LogDep, SettingsDep
from service.personalizer import importances
from service.personalizer.routes.common import admin_router, responses
from service.personalizer.schemas import (
    FeatureImportance,
    FeatureImportanceList,
    FeatureImportanceRequest,
)

__all__ = ["router"]

router = admin_router()

IdPath = Annotated[str, Path(min_length=1, max_length=256, pattern=r"^[A-Za-z0-9_.~-]+$",
                             description="The feature importance's id.", examples=["week-47"])]


@router.put(
    "/featureImportances/{featureImportanceId}",
    response_model=FeatureImportance,
    response_description="Stored, status `NotSubmitted`: the offline worker computes it "
    "(`Running`, then `Succeeded`, `Failed` or `Timeout`); poll GET for its scores.",
    responses=responses(400, 409),
)
def create_feature_importance(featureImportanceId: IdPath,  # noqa: N803
                              body: FeatureImportanceRequest, log: LogDep,
                              settings: SettingsDep) -> FeatureImportance:
    """Which context features the models' choices depend on, over the events joined between
    `startTime` and `endTime`: for each feature, the share of sampled events whose greedy
    choice changes when the feature's values are shuffled across the sample (at most 1,000
    events shared by the models, the newest of the range). Answered at once; the offline
    worker computes it (within `evaluation_time_limit_seconds`), as Personalizer's job did.
    409 if the id exists."""
    doc = importances.create(log, settings, featureImportanceId, body)
    return FeatureImportance(**doc)


@router.get("/featureImportances/{featureImportanceId}", response_model=FeatureImportance,
            responses=responses(404))
def get_feature_importance(featureImportanceId: IdPath, log: LogDep  # noqa: N803
                           ) -> FeatureImportance:
    """A feature importance with its scores."""
    return FeatureImportance(**importances.get(log, featureImportanceId))


@router.get("/featureImportances", response_model=FeatureImportanceList,
            responses=responses(400))
def list_feature_importances(
    log: LogDep,
    top: Annotated[int | None, Query(ge=0, description="At most this many.")] = None,
    skip: Annotated[int, Query(ge=0, description="Skip this many first.")] = 0,
) -> FeatureImportanceList:
    """The feature importances, oldest first (without their scores)."""
    return FeatureImportanceList(value=importances.listing(log, top, skip))


@router.delete("/featureImportances/{featureImportanceId}",
               status_code=status.HTTP_204_NO_CONTENT, responses=responses(404))
def delete_feature_importance(featureImportanceId: IdPath, log: LogDep  # noqa: N803
                              ) -> Response:
    """Delete a feature importance."""
    importances.delete(log, featureImportanceId)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
