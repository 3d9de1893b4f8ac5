"""The serving routes' adapter: the serving config of :mod:`service.models.serving` as
:class:`ServingInfo` (with the values predict would use now), and a serving request into it.
The domain errors it raises are answered in :mod:`service.api.errors`."""

from __future__ import annotations

from service.api.schemas import ServingInfo, ServingRequest
from service.eventlog import EventLog
from service.models import serving as rules
from service.models.runtime import ServedModel
from service.models.store import ModelStore

__all__ = ["serving_info", "set_serving"]


def serving_info(model: ServedModel, log: EventLog, store: ModelStore) -> ServingInfo:
    """The serving config of ``model`` with the values predict would use now."""
    serving, published, policy = rules.serving_state(model, log, store)
    info = ServingInfo(
        mode=serving.mode,
        temperature=serving.temperature,
        min_propensity=serving.min_propensity,
        policy_version=published if serving.mode == "policy" else None,
        updated=serving.updated,
    )
    if policy is not None:
        info.effective_temperature = policy.temperature
        info.effective_min_propensity = policy.min_propensity
    return info


def set_serving(body: ServingRequest, model: ServedModel, log: EventLog,
                store: ModelStore) -> ServingInfo:
    """Store the serving config ``body`` asks for; the new :func:`serving_info`."""
    rules.set_serving(model, log, store, body.mode, body.temperature, body.min_propensity)
    return serving_info(model, log, store)
