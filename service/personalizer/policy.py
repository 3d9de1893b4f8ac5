"""The endpoint's learning policy (Personalizer's "learning settings"): its ``arguments`` string
parsed into a booster and its parameters, checked by building the booster, and the stored
``policy`` document (or the default the settings give). docs/personalizer.md, "Policy and
evaluations".

The booster ``adf`` (the model with action features') is accepted as an evaluation's Custom
policy only (``make_policy(..., evaluated=True)``): the learning policy sets the fixed-action
models' booster; that model's parameters are the setting
``personalizer_action_features_params``.

>>> parse_arguments("--booster adabandit --learners 20 --rho 0.1")
('adabandit', {'n_learners': 20, 'rho': 0.1})
>>> parse_arguments("--booster adf --n-trees 3 --exploration egreedy")
('adf', {'n_trees': 3, 'exploration': 'egreedy'})
>>> parse_arguments("--cb_explore_adf --epsilon 0.2")
Traceback (most recent call last):
...
ValueError: '--cb_explore_adf' is a Vowpal Wabbit option; ...
"""

from __future__ import annotations

import json
import shlex
from typing import Any

from boosters.registry import booster_params, make_booster, names
from service.domain import ACTION_FEATURES_BOOSTER, action_features_params
from service.eventlog import EventLog
from service.models.store import ModelStore
from service.personalizer import loop
from service.settings import Settings

__all__ = ["MAX_ARGUMENTS", "action_counts", "arguments_of", "check_policy", "current",
           "default_policy", "make_policy", "parse_arguments", "set_policy"]

#: Personalizer's limit on the arguments string
MAX_ARGUMENTS = 1024

#: Vowpal Wabbit options (Personalizer's policies were VW command lines) and what to use instead
VW_OPTIONS = {
    "--cb_explore_adf": "--booster adabandit (or another booster)",
    "--cb_explore": "--booster adabandit", "--cb_adf": "--booster adabandit",
    "--cb": "--booster adabandit", "--epsilon": "--rho (adabandit) or --epsilon (egreedy_tree)",
    "-q": "nothing: the trees learn feature interactions", "--quadratic": "nothing (trees)",
    "--interactions": "nothing (trees)", "--cb_type": "nothing (the boosters' own estimator)",
    "-l": "nothing (no learning rate)", "--learning_rate": "nothing (no learning rate)",
    "--power_t": "nothing (no learning rate)", "--dsjson": "nothing (the log format is ours)",
    "--l1": "nothing", "--l2": "nothing", "-b": "nothing", "--bit_precision": "nothing",
    "--coin": "nothing", "--ignore": "nothing", "--ignore_linear": "nothing",
    "--first_only": "nothing", "--bag": "--learners N (adabandit)",
    "--cover": "--learners N (adabandit)", "--softmax": "--booster adabandit",
    "--lambda": "nothing", "--squarecb": "--booster adabandit", "--rnd": "--booster adabandit",
    "--synthcover": "--booster adabandit", "--regcb": "--booster adabandit",
    "--regcbopt": "--booster adabandit", "--online": "nothing", "--quiet": "nothing",
    "--random_seed": "--seed N", "--noconstant": "nothing", "--loss_function": "nothing",
}


def _value(text: str) -> Any:
    """A value as a JSON scalar (numbers, true/false, null, quoted strings), else the text."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return text
    if isinstance(value, (list, dict)):
        raise ValueError(f"value {text!r}: only scalars (numbers, true/false, strings)")
    return value


def _booster(tokens: list[str], default: str) -> str:
    """The value of the last ``--booster`` (``default`` without one)."""
    found = default
    for i, token in enumerate(tokens):
        if token == "--booster" and i + 1 < len(tokens):
            found = tokens[i + 1]
        elif token.startswith("--booster="):
            found = token.split("=", 1)[1]
    known = [*names(), ACTION_FEATURES_BOOSTER]
    if found not in known:
        raise ValueError(f"unknown booster {found!r}; known: {', '.join(known)}")
    return found


def _accepted(booster: str) -> dict[str, Any]:
    """The parameters ``booster`` accepts, with their defaults (``adf``'s too)."""
    if booster == ACTION_FEATURES_BOOSTER:
        return action_features_params()
    return booster_params(booster)


def _refuse_vw(tokens: list[str], booster: str) -> None:
    """A Vowpal Wabbit option (one that is not a parameter of ``booster``): a ValueError naming
    what to use instead."""
    accepted = _accepted(booster)
    for token in tokens:
        name = token.split("=", 1)[0]
        if name in VW_OPTIONS and _param(name.lstrip("-"), booster) not in accepted:
            raise ValueError(f"{name!r} is a Vowpal Wabbit option; this service's policies are "
                             f"boosters and their parameters: use {VW_OPTIONS[name]}, e.g. "
                             "'--booster adabandit --learners 20 --rho 0.1'")


def _param(name: str, booster: str) -> str:
    """A parameter name as the booster knows it (dashes as underscores; ``learners`` for
    ``n_learners``)."""
    name = name.replace("-", "_")
    accepted = _accepted(booster)
    return f"n_{name}" if name not in accepted and f"n_{name}" in accepted else name


def _pairs(tokens: list[str]) -> list[tuple[str, str]]:
    pairs, i = [], 0
    while i < len(tokens):
        token = tokens[i]
        if not token.startswith("--") or len(token) < 3:
            raise ValueError(f"expected '--<parameter> <value>', got {token!r}")
        name, eq, value = token[2:].partition("=")
        if not eq:
            if i + 1 >= len(tokens):
                raise ValueError(f"{token!r} has no value")
            i, value = i + 1, tokens[i + 1]
        pairs.append((name, value))
        i += 1
    return pairs


def parse_arguments(arguments: str, default_booster: str = "adabandit"
                    ) -> tuple[str, dict[str, Any]]:
    """``--booster NAME --<param> <value> ...`` as ``(booster, params)`` (not yet checked
    against the booster: :func:`check_policy`); ValueError naming the problem."""
    if len(arguments) > MAX_ARGUMENTS:
        raise ValueError(f"arguments are {len(arguments)} characters (at most {MAX_ARGUMENTS})")
    try:
        tokens = shlex.split(arguments)
    except ValueError as exc:
        raise ValueError(f"cannot split the arguments: {exc}") from None
    booster = _booster(tokens, default_booster)
    _refuse_vw(tokens, booster)
    params: dict[str, Any] = {}
    for key, value in _pairs(tokens):
        if key != "booster":
            params[_param(key, booster)] = _value(value)
    return booster, params


def check_policy(booster: str, params: dict[str, Any], n_actions: int = 2) -> None:
    """Build the booster: the project's one set of parameter checks (ValueError; ``adf``
    is built without ``n_actions``: it decides over each request's candidates)."""
    try:
        if booster == ACTION_FEATURES_BOOSTER:
            from boosters.online.adf import ActionFeatureBooster

            ActionFeatureBooster(**params)
            return
        make_booster(booster, n_actions=n_actions, **params)
    except TypeError as exc:
        raise ValueError(str(exc)) from None


def arguments_of(booster: str, params: dict[str, Any]) -> str:
    """The arguments string of ``booster`` with ``params``.

    >>> arguments_of("adabandit", {"n_learners": 20, "rho": 0.1})
    '--booster adabandit --n_learners 20 --rho 0.1'
    """
    parts = [f"--booster {booster}"]
    for key, value in params.items():
        text = json.dumps(value) if not isinstance(value, str) else shlex.quote(value)
        parts.append(f"--{key} {text}")
    return " ".join(parts)


def action_counts(log: EventLog, settings: Settings) -> list[int]:
    """The action counts a policy must build for: each model of the endpoint's (2 if none)."""
    return sorted({len(c.actions) for c in loop.models(log, settings)
                   if not c.action_features}) or [2]


def make_policy(name: str, arguments: str, settings: Settings,
                counts: list[int] | None = None, evaluated: bool = False) -> dict[str, Any]:
    """The ``policy`` document of ``arguments``, checked for models of ``counts`` actions
    (ValueError naming what is wrong). ``adf`` only for an evaluation's Custom policy
    (``evaluated``): it is no learning policy.

    >>> from service.settings import Settings
    >>> make_policy("f", "--booster adf --n_trees 3", Settings(), evaluated=True)["params"]
    {'n_trees': 3}
    >>> make_policy("f", "--booster adf --n_trees 3", Settings())
    Traceback (most recent call last):
    ...
    ValueError: booster 'adf' is the booster of the model with action features, ...
    """
    booster, params = parse_arguments(arguments, settings.personalizer_booster)
    if booster == ACTION_FEATURES_BOOSTER and not evaluated:
        raise ValueError(
            f"booster {booster!r} is the booster of the model with action features, whose "
            "parameters are the setting personalizer_action_features_params; the learning "
            f"policy sets the fixed-action models' booster (one of {', '.join(names())}). "
            f"An {booster!r} policy can be compared in an offline evaluation")
    for n in [2] if booster == ACTION_FEATURES_BOOSTER else counts or [2]:
        check_policy(booster, params, n)
    return {"name": name, "arguments": arguments, "booster": booster, "params": params}


def default_policy(settings: Settings) -> dict[str, Any]:
    """The policy the settings give (``personalizer_booster``, ``personalizer_params``)."""
    booster, params = settings.personalizer_booster, dict(settings.personalizer_params)
    return {"name": "default", "arguments": arguments_of(booster, params), "booster": booster,
            "params": params}


def current(log: EventLog, settings: Settings) -> dict[str, Any]:
    """The stored policy, or the default."""
    return log.personalizer_doc("policy") or default_policy(settings)


def set_policy(log: EventLog, store: ModelStore, settings: Settings,
               doc: dict[str, Any] | None) -> dict[str, Any]:
    """Store ``doc`` as the policy (None: back to the default) and renew the endpoint's models
    (retrained from the retained log); the policy now in force."""
    log.set_personalizer_doc("policy", doc)
    loop.apply(log, store, settings)
    return current(log, settings)
