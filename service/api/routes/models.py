"""``/v1/models``: create, list, read and delete models."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Response, status

from service.api.deps import (
    LogDep,
    ModelDep,
    ModelName,
    SettingsDep,
    StoreDep,
    require_admin,
    require_key,
)
from service.api.schemas import CreateModel, ModelInfo, error_responses
from service.eventlog import EventLog
from service.models import creation
from service.models.errors import ModelNotFound
from service.models.runtime import ServedModel

router = APIRouter(prefix="/v1/models", tags=["models"], dependencies=[Depends(require_key)],
                   responses=error_responses(401, 422, 503))


def _info(model: ServedModel, log: EventLog) -> ModelInfo:
    stats = log.stats(model.name)
    serving, published = log.serving_state(model.name, fresh=True)
    joined = int(stats.get("joined", 0))
    c = model.config
    return ModelInfo(
        name=c.name,
        booster=c.booster,
        actions=c.actions,
        params=c.params,
        reward_wait_seconds=c.reward_wait_seconds,
        default_reward=c.default_reward,
        negative_rewards=c.negative_rewards,
        version=model.version,
        decisions=int(stats.get("decisions", 0)),
        rewards=int(stats.get("rewards", 0)),
        joined=joined,
        average_reward=(stats.get("reward_sum", 0.0) / joined) if joined else None,
        snapshot_version=model.snapshot_version,
        serving=serving.mode,
        published_policy=published,
        retention=log.retention(model.name),
    )


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    response_model=ModelInfo,
    dependencies=[Depends(require_admin)],
    responses=error_responses(400, 403, 409, 413, e409="A model of this name exists."),
)
def create_model(
    body: CreateModel,
    log: LogDep,
    store: StoreDep,
    settings: SettingsDep,
) -> ModelInfo:
    """Create a model (admin key). Its booster is built from `params` (a booster that
    refuses them is a 422 naming the problem) and its version-0 snapshot stored."""
    model = creation.create_model(log, store, body.to_config(), settings.max_actions)
    return _info(model, log)


@router.get("", response_model=list[ModelInfo])
def list_models(log: LogDep, store: StoreDep):
    """Every model, by name."""
    out = []
    for name in sorted(log.configs()):
        model = store.get(name)
        if model is not None:
            out.append(_info(model, log))
    return out


@router.get("/{name}", response_model=ModelInfo, responses=error_responses(404))
def read_model(model: ModelDep, log: LogDep):
    """One model: config, version, counters."""
    return _info(model, log)


@router.delete(
    "/{name}", status_code=status.HTTP_204_NO_CONTENT, dependencies=[Depends(require_admin)],
    responses=error_responses(403, 404),
)
def delete_model(name: ModelName, log: LogDep, store: StoreDep) -> Response:
    """Delete a model and its whole log (admin key); nothing else is touched."""
    if not log.delete_model(name):
        raise ModelNotFound(name)
    store.drop(name)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
