"""Name -> online booster class, for the CLI and the service.

>>> from boosters.registry import make_booster
>>> booster = make_booster("uniform", n_actions=3, seed=0)
>>> booster.decide_one({"x": 1.0}).probabilities.tolist()
[0.3333333333333333, 0.3333333333333333, 0.3333333333333333]
>>> make_booster("nope", n_actions=3)
Traceback (most recent call last):
...
ValueError: unknown booster 'nope'; choose from: ...
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from boosters._params import Flag, check_sizes

if TYPE_CHECKING:  # annotations only: listing the names stays free of numpy (the CLI's --help)
    from collections.abc import Callable

    from boosters.base import OnlineBooster

# name -> ("module:Class", preset keyword arguments); imported lazily to keep the import cheap.
_BOOSTERS: dict[str, tuple[str, dict[str, Any]]] = {
    "banditbbm": ("boosters.online.banditbbm:BanditBBM", {}),
    "adabandit": ("boosters.online.adabandit:AdaBandit", {}),
    "binbandit": ("boosters.online.binbandit:BinBandit", {}),
    "onlinembbm": ("boosters.online.banditbbm:OnlineMBBM", {}),
    "adaboostolm": ("boosters.online.adabandit:AdaBoostOLM", {}),
    "oco": ("boosters.online.oco_bandit:OCOBandit", {}),
    "oco_full": ("boosters.online.oco_bandit:OCOFull", {}),
    "uniform": ("boosters.online.baselines:UniformPolicy", {}),
    "egreedy_tree": ("boosters.online.baselines:EpsilonGreedyTree", {}),
    "river_egreedy": ("boosters.online.baselines:RiverPolicy", {"policy": "epsilon_greedy"}),
    "river_ucb": ("boosters.online.baselines:RiverPolicy", {"policy": "ucb"}),
    "river_exp3": ("boosters.online.baselines:RiverPolicy", {"policy": "exp3"}),
    "river_thompson": ("boosters.online.baselines:RiverPolicy", {"policy": "thompson"}),
}


def names() -> list[str]:
    """Registered booster names."""
    return sorted(_BOOSTERS)


def booster_class(name: str) -> type[OnlineBooster]:
    """The class registered under ``name``."""
    try:
        target, _ = _BOOSTERS[name]
    except KeyError:
        raise ValueError(f"unknown booster {name!r}; choose from: {', '.join(names())}") from None
    module, _, cls = target.partition(":")
    return getattr(importlib.import_module(module), cls)


def full_information(name: str) -> bool:
    """Whether the booster registered under ``name`` needs the true label (a full-information
    twin) rather than bandit feedback.

    >>> full_information("onlinembbm"), full_information("banditbbm")
    (True, False)
    """
    return bool(getattr(booster_class(name), "full_information", False))


def booster_params(name: str) -> dict[str, Any]:
    """The flat parameters ``name`` accepts (other than ``n_actions`` and its presets) with their
    defaults: its constructor's keywords, its groups' fields (:mod:`boosters.groups`) in their
    place. Every one of them is declared in the class's ``_parameter_constraints``.

    >>> booster_params("uniform")
    {'seed': None}
    >>> booster_params("adaboostolm")["rho"], "rho_decay" in booster_params("adaboostolm")
    (0.0, False)
    """
    from boosters.groups import flat_defaults

    params = flat_defaults(booster_class(name))
    for preset in _BOOSTERS[name][1]:
        params.pop(preset, None)
    return params


def flag_params(name: str) -> frozenset[str]:
    """The parameters of ``name`` declared as flags (booleans only); none for a name not
    registered (a model with action features).

    >>> sorted(flag_params("oco"))
    ['fast_trees', 'fixed_trees', 'realizable', 'rho_by_misses']
    """
    if name not in _BOOSTERS:
        return frozenset()
    declared = booster_class(name)._parameter_constraints
    return frozenset(p for p in booster_params(name)
                     if any(isinstance(c, Flag) for c in declared.get(p, ())))


def removed_message(name: str, params: Iterable[str]) -> str | None:
    """What refusing the options among ``params`` that booster ``name`` no longer has says
    (None: none of them was removed).

    >>> removed_message("adabandit", ["rho", "guess_play"])[:49]
    'parameter(s) guess_play of adabandit were removed'
    """
    from boosters._migrations import removed_options  # numpy: not at the CLI's import

    removed = sorted(set(params) & set(removed_options(booster_class(name)))) if (
        name in _BOOSTERS) else []
    if not removed:
        return None
    return (f"parameter(s) {', '.join(removed)} of {name} were removed: their benchmark lost "
            f"(docs/boosters.md, \"Removed options\"); a stored model that set them loads "
            f"with the rule that remains")


def without_removed(name: str, params: dict[str, Any], what: str) -> dict[str, Any]:
    """A stored config's ``params`` for booster ``name`` without the options removed since it
    was stored (each value other than the rule that remains logged as a warning naming
    ``what``; :data:`boosters._migrations.REMOVED`); unchanged for a name not registered.

    >>> without_removed("adabandit", {"rho": 0.1, "hedge_discount": 1.0}, "model 'm'")
    {'rho': 0.1}
    """
    from boosters._migrations import drop_removed

    if name not in _BOOSTERS:
        return dict(params)
    return drop_removed(booster_class(name), params, what)


#: sizes a booster class fixes rather than takes (read from the class for :func:`check_sizes`)
CLASS_SIZE_ATTRIBUTES = ("mc_samples",)


def make_booster(name: str, n_actions: int, **params: Any) -> OnlineBooster:
    """Build booster ``name`` for ``n_actions`` actions from flat parameters (a stored config's:
    the groups' fields are mapped into the groups, :func:`boosters.groups.regroup`); unknown
    parameters are a ValueError listing the accepted ones.

    The sizes are checked against their bounds (:mod:`boosters._params`) before anything is
    built, and every value against the class's ``_parameter_constraints`` by its constructor,
    first: a ValueError naming the parameter (a size: its value and its bound).

    >>> make_booster("adabandit", n_actions=3, n_learners=1001)
    Traceback (most recent call last):
    ...
    ValueError: n_learners = 1001 is above its bound 1000 (MAX_LEARNERS in boosters/_params.py)
    """
    cls = booster_class(name)
    allowed = booster_params(name)
    removed = removed_message(name, params)
    if removed:
        raise ValueError(removed)
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        raise ValueError(
            f"unknown parameter(s) for {name}: {', '.join(unknown)}; "
            f"accepted: {', '.join(sorted(allowed))}"
        )
    fixed = {a: getattr(cls, a) for a in CLASS_SIZE_ATTRIBUTES if hasattr(cls, a)}
    check_sizes(name, n_actions, {**fixed, **allowed, **params})  # before building anything
    build: Callable[..., OnlineBooster] = cls  # each subclass's own constructor
    return build(n_actions=n_actions, **_BOOSTERS[name][1], **params)
