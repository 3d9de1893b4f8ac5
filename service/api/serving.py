"""How a model serves: what the serving routes answer (the config with the values predict would
use now) and the checks of a new serving config (a policy needs a published one; the floor is at
most 1/number of actions)."""

from __future__ import annotations

import time

from fastapi import HTTPException, status

from service.api.schemas import ServingInfo, ServingRequest
from service.domain import ServingConfig
from service.eventlog import EventLog
from service.runtime import ServedModel
from service.store import ModelStore

__all__ = ["serving_info", "set_serving"]


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
    policy = store.served_policy(model.config, serving, published)
    if policy is not None:
        info.effective_temperature = policy.temperature
        info.effective_min_propensity = policy.min_propensity
    return info


def set_serving(body: ServingRequest, model: ServedModel, log: EventLog,
                store: ModelStore) -> ServingInfo:
    """Check and store the serving config ``body`` asks for (422 for a floor over 1/number of
    actions, 409 for policy mode without a published policy); the new :func:`serving_info`."""
    if model.config.action_features:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, f"model {model.name!r} has "
                            "action_features: it serves its online booster only (no offline "
                            "policy over candidate sets yet)")
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
