"""Creating a model: the one rule that ``POST /v1/models``, the Personalizer routes' models of
new action sets and ``boostbandit import --create`` all follow.

:func:`create_model` checks the config against the service's limits and the booster's
parameters, fills in the seed, builds the booster, stores the config and the version-0 snapshot
and registers the model in the process's :class:`~service.models.store.ModelStore`. It raises
domain errors (:class:`~service.models.errors.InvalidModel`, :class:`~.errors.ModelExists`);
each caller answers them its own way.
A creation that loses a race to a concurrent one of the same name raises :class:`ModelExists`
without writing anything: the winner's config and snapshot stay untouched.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from boosters.registry import removed_message
from service.domain import ModelConfig
from service.eventlog import EventLog
from service.models.errors import InvalidModel, ModelExists
from service.models.runtime import ServedModel
from service.models.store import ModelStore, save_snapshot

__all__ = ["create_model"]


def create_model(log: EventLog, store: ModelStore, config: ModelConfig,
                 max_actions: int) -> ServedModel:
    """Create the model ``config`` describes (its ``params`` as the client sent them, its
    actions at most ``max_actions``) and return it, stored and registered in ``store``."""
    config = dataclasses.replace(config, params=_checked_params(config, max_actions))
    if log.config(config.name) is not None:  # before building: a build can take seconds
        raise ModelExists(f"model {config.name!r} already exists")
    try:
        booster = config.build()
    except (ValueError, TypeError) as exc:
        raise InvalidModel(f"cannot build booster {config.booster!r}: {exc}", str(exc)) from None
    if not log.add_config(config):  # a concurrent creation won: its snapshot stays untouched
        raise ModelExists(f"model {config.name!r} already exists")
    model = ServedModel(config, booster)
    save_snapshot(log, model)  # version 0, so replicas and learners start from the same state
    store.put(model)
    return model


def _checked_params(config: ModelConfig, max_actions: int) -> dict[str, Any]:
    """The config's parameters with a concrete seed, or :class:`InvalidModel`.

    >>> c = ModelConfig("m", "uniform", ["a", "b"], {"seed": 7.0})
    >>> _checked_params(c, 10)
    {'seed': 7}
    >>> _checked_params(c, 1)
    Traceback (most recent call last):
    service.models.errors.InvalidModel: too many actions: 2 > 1 (max_actions)
    """
    if len(config.actions) > max_actions:
        raise InvalidModel(f"too many actions: {len(config.actions)} > {max_actions} "
                           "(max_actions)")
    accepted = config.accepted_params()
    unknown = sorted(set(config.params) - set(accepted))
    removed = None if config.action_features else removed_message(config.booster, unknown)
    if removed:
        raise InvalidModel(removed)
    if unknown:
        raise InvalidModel(f"unknown parameter(s) for {config.booster}: {', '.join(unknown)}; "
                           f"accepted: {', '.join(sorted(accepted))}")
    params = dict(config.params)
    seed = params.get("seed")
    if isinstance(seed, float) and seed.is_integer():  # JSON's 7.0 is an integer too
        seed = params["seed"] = int(seed)
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
        raise InvalidModel(f"params.seed must be a non-negative integer, got {seed!r}")
    return ModelConfig.fill_seed(params)
