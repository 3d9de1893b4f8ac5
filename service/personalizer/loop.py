"""The Personalizer endpoint as one learning loop over its models: which models it has (one per
action set, or the configured ``personalizer_model``), the config each should have (the settings,
overlaid by the stored service configuration and policy), and applying a change to all of them.

A change that alters learning (booster, parameters, exploration, reward wait, default reward,
reward aggregation) renews each model: a new ``uid``, rebuilt by the learner from the joined
events the log retains (:meth:`~service.domain.ModelConfig.renewed`). Any other change (the
learning mode, the export frequency) is taken on in place and keeps what the model learned.
docs/personalizer.md, "Service configuration".
"""

from __future__ import annotations

import inspect
import time
from dataclasses import replace
from typing import Any

from boosters.registry import booster_class, booster_params, names
from service.domain import ACTION_FEATURES_BOOSTER, ModelConfig, reward_from_client
from service.eventlog import MAX_SEQUENCE, EventLog
from service.models.store import ModelStore
from service.personalizer.failures import PersonalizerFailure
from service.settings import Settings

__all__ = ["LEARNING_FIELDS", "apply", "booster_defaults", "desired", "exploration_param",
           "is_personalizer_model", "models"]

#: the config fields whose change starts a new model version (retrained from the log)
LEARNING_FIELDS = ("booster", "params", "reward_wait_seconds", "default_reward",
                   "reward_aggregation")


def is_personalizer_model(name: str, settings: Settings) -> bool:
    """Whether ``name`` is a model of the Personalizer endpoint."""
    return name.startswith("pz-") or name == settings.personalizer_model


def models(log: EventLog, settings: Settings) -> list[ModelConfig]:
    """The stored configs of the endpoint's models, by name."""
    configs = log.configs()
    return [configs[n] for n in sorted(configs) if is_personalizer_model(n, settings)]


def booster_defaults(booster: str) -> dict[str, Any]:
    """The flat parameters ``booster`` accepts with their defaults: a registered booster's
    (its groups' fields included), else its constructor's (the model with action features)."""
    if booster in names():
        return booster_params(booster)
    parameters = inspect.signature(booster_class(booster)).parameters
    return {name: p.default for name, p in parameters.items() if name != "self"}


def exploration_param(booster: str) -> str | None:
    """The parameter of ``booster`` that sets its exploration rate (``rho`` or ``epsilon``), or
    None for boosters that explore otherwise (UCB, Thompson sampling, Exp3, uniform).

    >>> exploration_param("adabandit"), exploration_param("egreedy_tree")
    ('rho', 'epsilon')
    """
    accepted = booster_defaults(booster)
    return next((p for p in ("rho", "epsilon") if p in accepted), None)


def exploration_value(percentage: float) -> float:
    """``explorationPercentage`` as the booster's rate: the same share of exploratory ranks,
    kept inside (0, 1), which the bandit boosters need to learn at all.

    >>> exploration_value(0.2), exploration_value(0.0), exploration_value(1.0)
    (0.2, 0.001, 0.999)
    """
    return min(max(float(percentage), 0.001), 0.999)


def _learner(log: EventLog, settings: Settings, config: ModelConfig | None,
             action_features: bool) -> tuple[str, dict[str, Any]]:
    """The booster and parameters a model of the endpoint should have before the service
    configuration's exploration: the ``personalizer_*`` settings (for the
    ``personalizer_model``, its own), then the stored policy; the model with action features
    keeps its booster, ``adf``, with ``personalizer_action_features_params`` (the policy's
    boosters need fixed actions)."""
    if config is not None and config.name == settings.personalizer_model:
        booster, params = config.booster, config.params
    elif action_features or (config is not None and config.action_features):
        booster, params = ACTION_FEATURES_BOOSTER, settings.personalizer_action_features_params
    else:
        booster, params = settings.personalizer_booster, settings.personalizer_params
    if booster == ACTION_FEATURES_BOOSTER:
        return booster, dict(params)
    policy = log.personalizer_doc("policy") or {}
    return policy.get("booster", booster), dict(policy.get("params", params))


def desired(log: EventLog, settings: Settings, config: ModelConfig | None = None,
            action_features: bool = False) -> dict[str, Any]:
    """The config fields a model of the endpoint should have (``config``, or a new one, with
    action features if ``action_features``): the booster and parameters of :func:`_learner`,
    then the stored service configuration (exploration, rewards, learning mode, export
    frequency). A set exploration is epsilon-greedy's rate for the model with action
    features."""
    service = log.personalizer_doc("service") or {}
    booster, params = _learner(log, settings, config, action_features)
    negative = settings.personalizer_negative_rewards
    fields: dict[str, Any] = {
        "booster": booster,
        "reward_wait_seconds": service.get("reward_wait_seconds",
                                           settings.personalizer_reward_wait_seconds),
        "default_reward": reward_from_client(
            service.get("default_reward", settings.personalizer_default_reward), negative),
        "negative_rewards": negative,
        "reward_aggregation": service.get("reward_aggregation", "earliest"),
        "learning_mode": service.get("learning_mode", "Online"),
        "export_seconds": service.get("export_seconds"),
        "log_retention_days": service.get("log_retention_days"),
    }
    rate = service.get("exploration")
    if rate is not None and booster == ACTION_FEATURES_BOOSTER:
        params.update(exploration="egreedy", epsilon=exploration_value(rate))
    name = None if booster == ACTION_FEATURES_BOOSTER else exploration_param(booster)
    if rate is not None and name is not None:
        params[name] = exploration_value(rate)
        if "rho_decay" in booster_params(booster):
            params["rho_decay"] = None  # a set percentage holds: no decaying schedule
    fields["params"] = params
    return fields


def _changed(config: ModelConfig, fields: dict[str, Any]) -> dict[str, Any]:
    """The fields that differ (a model keeps its own seed unless the policy gives one)."""
    out = {}
    for key, value in fields.items():
        if key == "params":
            value = {**value, "seed": value.get("seed", config.params.get("seed"))}
        if getattr(config, key) != value:
            out[key] = value
    return out


def retrain_start(learn_after: str | None, days: float, now: float) -> str | None:
    """Where a renewed model's replay starts: after ``learn_after`` (a reset or an import; None
    for the stream's start) and, with ``days`` (Personalizer's ``modelRetrainDays``) > 0, at
    the events joined in the last ``days`` days, whichever is later.

    >>> retrain_start(None, 0, 1e9), retrain_start("5-0", 0, 1e9)
    (None, '5-0')
    >>> retrain_start("5-0", 1, 86400.0 * 2)
    '86399999-18446744073709551615'
    >>> retrain_start("999999999-0", 1, 86400.0 * 2), retrain_start("5-0", 1e9, 1e9)
    ('999999999-0', '5-0')
    """
    ms = int((now - days * 86400.0) * 1000)
    if days <= 0 or ms <= 0:  # all of it (nothing was joined before 1970)
        return learn_after
    start = (ms - 1, MAX_SEQUENCE)  # after every entry of the millisecond before: from ms on
    if learn_after is not None:
        stored, _, seq = learn_after.partition("-")
        if (int(stored), int(seq or 0)) > start:
            return learn_after
    return f"{start[0]}-{start[1]}"


def apply(log: EventLog, store: ModelStore, settings: Settings) -> dict[str, list[str]]:
    """Bring every model of the endpoint to :func:`desired`: renewed (retrained from the log)
    when a learning field changed, replaced in place otherwise. The names, by what happened.

    A model named by ``personalizer_model`` (made with ``POST /v1/models``) keeps its own
    booster and parameters unless a policy is stored."""
    done: dict[str, list[str]] = {"renewed": [], "updated": []}
    retrain_days = (log.personalizer_doc("service") or {}).get("retrain_days", 0)
    for config in models(log, settings):
        what = _apply_one(log, settings, config, retrain_days)
        if what is not None:
            done[what].append(config.name)
    store.sync_configs(log.configs())  # this process at once; the others at their next step
    return done


#: how often :func:`apply` reads a model again when it changed between the read and the write
APPLY_ATTEMPTS = 5


def _apply_one(log: EventLog, settings: Settings, config: ModelConfig,
               retrain_days: float) -> str | None:
    """Bring one model to :func:`desired`, computed from its stored config and written only
    if that config is still stored (else read again and recompute). "renewed", "updated" or
    None (nothing to change, or the model is gone)."""
    for _ in range(APPLY_ATTEMPTS):
        changes = _changed(config, desired(log, settings, config))
        if not changes:
            return None
        renew = any(k in LEARNING_FIELDS for k in changes)
        if renew:
            changes["learn_after"] = retrain_start(config.learn_after, retrain_days, time.time())
        new = config.renewed(**changes) if renew else replace(config, **changes)
        if log.replace_config(new, config.uid):
            return "renewed" if renew else "updated"
        fresh = log.config(config.name)
        if fresh is None:
            return None
        config = fresh
    raise PersonalizerFailure(409, "Conflict", f"model {config.name!r} kept changing while "
                              "the configuration was applied; retry")
