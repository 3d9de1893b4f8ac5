"""``/v1/models/{name}/policies`` (offline policies) and ``/v1/models/{name}/serving`` (the
work is in :mod:`service.models.serving`; :mod:`service.api.serving` maps its schemas)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Path, Query, status

from service.api import serving
from service.api.deps import LogDep, ModelDep, StoreDep, require_admin, require_key
from service.api.schemas import (
    PoliciesResponse,
    PolicyInfo,
    ServingInfo,
    ServingRequest,
    error_responses,
)

router = APIRouter(prefix="/v1/models", tags=["policies"], dependencies=[Depends(require_key)],
                   responses=error_responses(401, 404, 422, 503))


@router.get("/{name}/policies", response_model=PoliciesResponse)
def list_policies(
    model: ModelDep,
    log: LogDep,
    store: StoreDep,
    published_only: Annotated[bool, Query(description="Only the published ones.")] = False,
    limit: Annotated[int, Query(ge=1, le=1000, description="Newest N.")] = 100,
) -> PoliciesResponse:
    """Trained offline policies with their estimates, newest first, and the serving config."""
    policies = log.policies(model.name)
    if published_only:
        policies = [p for p in policies if p["published"]]
    return PoliciesResponse(
        model=model.name,
        serving=serving.serving_info(model, log, store),
        published_version=log.published_version(model.name),
        worker=log.worker_status(model.name),
        policies=[PolicyInfo(**p) for p in policies[:limit]],
    )


@router.get(
    "/{name}/policies/{version}",
    response_model=PolicyInfo,
    responses=error_responses(404, e404="Unknown model or policy version."),
)
def read_policy(
    version: Annotated[int, Path(description="The policy version.")], model: ModelDep, log: LogDep
) -> PolicyInfo:
    """One trained policy."""
    meta = log.policy_meta(model.name, version)
    if meta is None:
        raise HTTPException(
            status.HTTP_404_NOT_FOUND, f"model {model.name!r} has no policy version {version}"
        )
    return PolicyInfo(**meta)


@router.get("/{name}/serving", response_model=ServingInfo)
def read_serving(model: ModelDep, log: LogDep, store: StoreDep) -> ServingInfo:
    """How the model decides now."""
    return serving.serving_info(model, log, store)


@router.put(
    "/{name}/serving",
    response_model=ServingInfo,
    dependencies=[Depends(require_admin)],
    responses=error_responses(
        400, 403, 409, 413, e409="Mode `policy` while the model has no published policy."
    ),
)
def set_serving(
    body: ServingRequest, model: ModelDep, log: LogDep, store: StoreDep
) -> ServingInfo:
    """Serve online (the booster) or the latest published offline policy (admin key).

    Decisions served by a policy are logged like online ones; the online booster does not learn
    from them.
    """
    return serving.set_serving(body, model, log, store)
