"""``/v1/models/{name}/policies`` (offline policies) and ``/v1/models/{name}/serving``."""

from __future__ import annotations

import time
from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Path, Query, status

from service.deps import LogDep, ModelDep, StoreDep, require_admin, require_key
from service.domain import ServingConfig
from service.eventlog import EventLog
from service.runtime import ServedModel
from service.schemas import (
    PoliciesResponse,
    PolicyInfo,
    ServingInfo,
    ServingRequest,
    error_responses,
)
from service.store import ModelStore

router = APIRouter(prefix="/v1/models", tags=["policies"], dependencies=[Depends(require_key)],
                   responses=error_responses(401, 404, 422, 503))


def serving_info(model: ServedModel, log: EventLog, store: ModelStore) -> ServingInfo:
    """The serving config of ``model`` with the values predict would use now."""
    serving, published = log.serving_state(model.name, fresh=True)
    info = ServingInfo(
        mode=serving.mode,
        temperature=serving.temperature,
        min_propensity=serving.min_propensity,
        policy_version=published if serving.mode == "policy" else None,
        updated=serving.updated,
    )
    if serving.mode == "policy" and published is not None:
        bundle = store.policy(model.config, published)
        if bundle is not None:
            info.effective_temperature = (
                bundle.temperature if serving.temperature is None else serving.temperature
            )
            info.effective_min_propensity = (
                bundle.min_propensity if serving.min_propensity is None else serving.min_propensity
            )
    return info


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
        serving=serving_info(model, log, store),
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
    return serving_info(model, log, store)


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
    k = len(model.config.actions)
    if body.min_propensity is not None and body.min_propensity > 1.0 / k:
        raise HTTPException(
            status.HTTP_422_UNPROCESSABLE_CONTENT,
            f"min_propensity must be at most 1/number of actions = {1.0 / k:.6g}, "
            f"got {body.min_propensity}",
        )
    if body.mode == "policy":
        published = log.published_version(model.name)
        if published is None or store.policy(model.config, published) is None:
            raise HTTPException(
                status.HTTP_409_CONFLICT,
                f"model {model.name!r} has no published policy yet (the worker publishes one "
                "when its estimate beats the logging policy); see GET /v1/models/"
                f"{model.name}/policies",
            )
    serving = ServingConfig(
        mode=body.mode,
        temperature=None if body.temperature is None else float(body.temperature),
        min_propensity=None if body.min_propensity is None else float(body.min_propensity),
        updated=time.time(),
    )
    log.set_serving(model.name, serving)
    return serving_info(model, log, store)
