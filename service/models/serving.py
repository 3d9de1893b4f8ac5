"""How a model serves: its serving config with the values a decision would use now, and the
rules of a new one (a policy needs a published one; the floor is at most 1/number of actions;
a model with action features serves its online booster only). It raises the domain errors of
:mod:`service.models.errors`; ``GET`` and ``PUT /v1/models/{name}/serving`` answer them."""

from __future__ import annotations

import time
from typing import NamedTuple

from service.domain import ServingConfig
from service.eventlog import EventLog
from service.models.errors import InvalidRequest, ServingRefused
from service.models.runtime import ServedModel, ServedPolicy
from service.models.store import ModelStore

__all__ = ["Serving", "serving_state", "set_serving"]


class Serving(NamedTuple):
    """A model's serving config, its published policy version (None: none yet) and the policy a
    decision would be served by now (None: the online model)."""

    config: ServingConfig
    published: int | None
    policy: ServedPolicy | None


def serving_state(model: ServedModel, log: EventLog, store: ModelStore) -> Serving:
    """How ``model`` serves now (read fresh from the log)."""
    serving, published = log.serving_state(model.name, fresh=True)
    return Serving(serving, published, store.served_policy(model.config, serving, published))


def set_serving(model: ServedModel, log: EventLog, store: ModelStore, mode: str,
                temperature: float | None, min_propensity: float | None) -> ServingConfig:
    """Check and store the serving config asked for (an InvalidRequest for a floor over
    1/number of actions or a model with action features, ServingRefused for policy mode without
    a published policy); the config stored."""
    if model.config.action_features:
        raise InvalidRequest(f"model {model.name!r} has action_features: it serves its online "
                             "booster only (no offline policy over candidate sets yet)")
    k = len(model.config.actions)
    if min_propensity is not None and min_propensity > 1.0 / k:
        raise InvalidRequest(f"min_propensity must be at most 1/number of actions = "
                             f"{1.0 / k:.6g}, got {min_propensity}")
    if mode == "policy":
        published = log.published_version(model.name)
        if published is None or store.policy(model.config, published) is None:
            raise ServingRefused(
                f"model {model.name!r} has no published policy yet (the worker publishes one "
                "when its estimate beats the logging policy); see GET /v1/models/"
                f"{model.name}/policies")
    serving = ServingConfig(
        mode=mode,
        temperature=None if temperature is None else float(temperature),
        min_propensity=None if min_propensity is None else float(min_propensity),
        updated=time.time(),
    )
    log.set_serving(model.name, serving)
    return serving
