"""The one set of parameter checks of boosters/: value checks, constraint tables, size bounds.

:func:`check_int`, :func:`check_real`, :func:`check_schedule`, :func:`check_choice` and
:func:`check_names` check one value; :func:`check_logged` checks logged actions, propensities and
rewards (the batch estimators' and the OPE estimators' input); :func:`validate_params` checks
parameters against a declared ``_parameter_constraints`` table (:class:`Interval`,
:class:`Options`, :class:`Flag`, :class:`Rounds`, :class:`HasMethods`, types, ``None``): every batch
estimator's and every online booster's. An upper bound of an :class:`Interval` may name its
constant; :func:`check_sizes` is the registry's check of the sizes before any online booster is
built, those that involve more than one value included, against MAX_ACTIONS, MAX_LEARNERS,
MAX_BBM_LEARNERS, MAX_WEAK_LEARNERS, MAX_COST_MATRIX_ENTRIES, MAX_GRACE_PERIOD,
MAX_NOMINAL_ATTRIBUTES, MAX_MC_SAMPLES and MAX_MC_DRAWS (what each bounds and why:
docs/boosters.md, "Size bounds").

>>> check_sizes("adabandit", 5, {"n_learners": 20})
>>> check_sizes("adabandit", 5, {"n_learners": 10**9})
Traceback (most recent call last):
...
ValueError: n_learners = 1000000000 is above its bound 1000 (MAX_LEARNERS in boosters/_params.py)
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "MAX_ACTIONS",
    "MAX_BBM_LEARNERS",
    "MAX_COST_MATRIX_ENTRIES",
    "MAX_GRACE_PERIOD",
    "MAX_LEARNERS",
    "MAX_MC_DRAWS",
    "MAX_MC_SAMPLES",
    "MAX_NOMINAL_ATTRIBUTES",
    "MAX_WEAK_LEARNERS",
    "DRIFT_RESTARTS",
    "Flag",
    "FlagError",
    "HasMethods",
    "Interval",
    "Options",
    "Rounds",
    "check_choice",
    "check_int",
    "check_logged",
    "check_names",
    "check_real",
    "check_sizes",
    "validate_params",
]

#: number of actions of one booster (the service's default ``max_actions`` is 1,000)
MAX_ACTIONS = 10_000
#: weak learners of one booster (the default is 20)
MAX_LEARNERS = 1_000
#: BanditBBM / OnlineMBBM learners: the exact potentials' cost explodes between 33 and 40
MAX_BBM_LEARNERS = 32
#: ``n_actions x n_learners`` trees of the OCO boosters (1,000 actions x 20 rounds)
MAX_WEAK_LEARNERS = 20_000
#: ``n_learners x n_actions**2`` cost-matrix entries of the Zhang et al. 2019 ensembles per round
MAX_COST_MATRIX_ENTRIES = 25_000_000
#: grace period of ``egreedy_tree``'s reward trees (its default is 20, River's 200)
MAX_GRACE_PERIOD = 1_000_000
#: feature names declared nominal (the service's default ``max_feature_names``)
MAX_NOMINAL_ATTRIBUTES = 10_000
#: Thompson sampling's Monte Carlo draws per decision, per action
MAX_MC_SAMPLES = 100_000
#: Thompson sampling's ``mc_samples x n_actions`` Beta draws per decision
MAX_MC_DRAWS = 1_000_000

#: the Zhang et al. 2019 ensembles (dense ``k x k`` cost matrices per learner)
_ENSEMBLES = {"banditbbm", "adabandit", "onlinembbm", "adaboostolm"}
#: the boosters with exact boost-by-majority potentials
_BBM = {"banditbbm", "onlinembbm"}
#: boosters whose weak learners are per action and per round
_PER_ACTION = {"oco", "oco_full"}
#: boosters that draw ``mc_samples`` per action and decision
_MONTE_CARLO = {"river_thompson"}

def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _bound(name: str, value: Any, bound: float, constant: str, why: str = "") -> None:
    if _is_int(value) and value > bound:
        raise ValueError(
            f"{name} = {value} is above its bound {bound}{why} ({constant} in boosters/_params.py)"
        )


def check_sizes(booster: str, n_actions: Any, params: Mapping[str, Any]) -> None:
    """ValueError naming the parameter, its value and its bound if a size of booster ``booster``
    (a registered name) for ``n_actions`` actions is above its bound (docs/boosters.md, "Size
    bounds").

    ``params``: the booster's parameters with its defaults filled in (and any size its class
    fixes, such as RiverPolicy's ``mc_samples``). Values of the wrong type are left to the
    booster's declared constraints (:func:`validate_params`).

    >>> check_sizes("oco", 1_000, {"n_learners": 21})
    Traceback (most recent call last):
    ...
    ValueError: n_actions x n_learners = 21000 is above its bound 20000 (trees of oco) \
(MAX_WEAK_LEARNERS in boosters/_params.py)
    """
    _bound("n_actions", n_actions, MAX_ACTIONS, "MAX_ACTIONS")
    n_learners: Any = params.get("n_learners")
    _bound("n_learners", n_learners, MAX_LEARNERS, "MAX_LEARNERS")
    if booster in _BBM:
        _bound("n_learners", n_learners, MAX_BBM_LEARNERS, "MAX_BBM_LEARNERS", f" for {booster}")
    both = _is_int(n_learners) and _is_int(n_actions)
    if booster in _PER_ACTION and both:
        _bound("n_actions x n_learners", int(n_actions) * int(n_learners), MAX_WEAK_LEARNERS,
               "MAX_WEAK_LEARNERS", f" (trees of {booster})")
    if booster in _ENSEMBLES and both:
        _bound("n_learners x n_actions^2", int(n_learners) * int(n_actions) ** 2,
               MAX_COST_MATRIX_ENTRIES, "MAX_COST_MATRIX_ENTRIES",
               f" (cost-matrix entries of {booster} per round)")
    _bound("grace_period", params.get("grace_period"), MAX_GRACE_PERIOD, "MAX_GRACE_PERIOD")
    nominal = params.get("nominal_attributes")
    if nominal is not None and hasattr(nominal, "__len__"):
        _bound("len(nominal_attributes)", len(nominal), MAX_NOMINAL_ATTRIBUTES,
               "MAX_NOMINAL_ATTRIBUTES")
    mc_samples: Any = params.get("mc_samples")
    _bound("mc_samples", mc_samples, MAX_MC_SAMPLES, "MAX_MC_SAMPLES")
    if booster in _MONTE_CARLO and _is_int(mc_samples) and _is_int(n_actions):
        _bound("mc_samples x n_actions", int(mc_samples) * int(n_actions), MAX_MC_DRAWS,
               "MAX_MC_DRAWS", f" (Beta draws of {booster} per decision)")


# ---- one value ----------------------------------------------------------------------------------


def check_int(name: str, value: Any, low: int) -> int:
    """``value`` as an int ``>= low`` (no bool), else a ValueError naming ``name``.

    >>> check_int("n_learners", 3, 1)
    3
    >>> check_int("n_learners", True, 1)
    Traceback (most recent call last):
    ...
    ValueError: n_learners must be an integer >= 1, got True
    """
    if not _is_int(value) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    return int(value)


def check_real(
    name: str,
    value: Any,
    low: float = -math.inf,
    high: float = math.inf,
    *,
    open_low: bool = False,
    open_high: bool = False,
) -> float:
    """``value`` as a finite float in the interval from ``low`` to ``high`` (closed ends unless
    ``open_low`` / ``open_high``), else a ValueError naming ``name``.

    >>> check_real("rho", 0.5, 0.0, 1.0, open_low=True)
    0.5
    >>> check_real("rho", 0.0, 0.0, 1.0, open_low=True)
    Traceback (most recent call last):
    ...
    ValueError: rho must be in (0.0, 1.0], got 0.0
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    too_low = value <= low if open_low else value < low
    # typeshed's numbers.Real declares < and <= alone, not > and >=
    if too_low or (value >= high if open_high else value > high):  # type: ignore[operator]
        raise ValueError(f"{name} must be {_interval(low, high, open_low, open_high)}, got {value}")
    return float(value)


def _interval(low: float, high: float, open_low: bool, open_high: bool) -> str:
    """How an interval reads in a message: "in [0.0, 1.0)", "> 0.0", "<= 5.0".

    >>> _interval(0.0, math.inf, True, False), _interval(0.0, 1.0, False, True)
    ('a number > 0.0', 'in [0.0, 1.0)')
    """
    if math.isinf(high):
        return f"a number {'>' if open_low else '>='} {low}"
    if math.isinf(low):
        return f"a number {'<' if open_high else '<='} {high}"
    return f"in {'(' if open_low else '['}{low}, {high}{')' if open_high else ']'}"


def check_schedule(
    rho_decay: Any, rho_floor: Any, rho_min: Any = None
) -> tuple[float | str | None, float, float | None]:
    """The exploration schedule's ``rho_decay`` (None: a constant rate; ``"auto"``: 5 learning
    rounds per action, at most 100; else a positive number of rounds), ``rho_floor`` (in (0, 1))
    and ``rho_min`` (None: the floor holds; else in (0, rho_floor]: how far the floor follows the
    prediction's misses down); :func:`boosters.exploration.decayed_rate` applies them.

    >>> check_schedule(None, 0.01), check_schedule(100, 0.01), check_schedule("auto", 0.01, 0.002)
    ((None, 0.01, None), (100.0, 0.01, None), ('auto', 0.01, 0.002))
    >>> check_schedule("auto", 0.01, 0.05)
    Traceback (most recent call last):
    ...
    ValueError: rho_min must be in (0.0, 0.01], got 0.05
    >>> check_schedule(0, 0.01)
    Traceback (most recent call last):
    ...
    ValueError: rho_decay must be a number > 0.0, got 0
    >>> check_schedule("fast", 0.01)
    Traceback (most recent call last):
    ...
    ValueError: rho_decay must be a number of rounds > 0, 'auto' or None, got 'fast'
    """
    if isinstance(rho_decay, str):
        if rho_decay != "auto":
            raise ValueError(
                f"rho_decay must be a number of rounds > 0, 'auto' or None, got {rho_decay!r}"
            )
    elif rho_decay is not None:
        rho_decay = check_real("rho_decay", rho_decay, 0.0, math.inf, open_low=True)
    rho_floor = check_real("rho_floor", rho_floor, 0.0, 1.0, open_low=True, open_high=True)
    if rho_min is not None:
        rho_min = check_real("rho_min", rho_min, 0.0, rho_floor, open_low=True)
    return rho_decay, rho_floor, rho_min


#: what a bandit booster's ``drift_restart`` restarts when its prediction's misses jump
#: (``boosters.exploration.MissDrift``): all it learned, or the schedule's clock alone
DRIFT_RESTARTS = ("model", "schedule")


def check_choice(name: str, value: Any, choices: Sequence[Any]) -> Any:
    """``value`` if it is one of ``choices``, else a ValueError naming ``name`` and them.

    >>> check_choice("step", "fast", ("fixed", "adaptive"))
    Traceback (most recent call last):
    ...
    ValueError: step must be one of 'fixed', 'adaptive', got 'fast'
    """
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}, got {value!r}")
    return value


def check_names(name: str, value: Any) -> list | None:
    """A list of feature names (``None`` or empty: ``None``), else a ValueError naming ``name``.

    >>> check_names("nominal_attributes", ("colour",)), check_names("nominal_attributes", [])
    (['colour'], None)
    """
    if value is not None and not isinstance(value, list | tuple):
        raise ValueError(f"{name} must be a list of feature names")
    return list(value) if value else None


def check_logged(actions: Any, propensities: Any, rewards: Any, n: int, n_actions: int) -> tuple:
    """``n`` logged actions, propensities and rewards as arrays ``(a, p, r)``, else a ValueError
    naming the first one off: actions integers in ``[0, n_actions)``, propensities in (0, 1],
    rewards finite.

    >>> check_logged([0, 2], [0.5, 1.0], [1.0, 0.0], 2, 2)
    Traceback (most recent call last):
    ...
    ValueError: actions must be integers in [0, 2), got int64 values
    """
    import numpy as np  # here, not at the top: the CLI's start-up imports this module

    a = np.asarray(actions)
    p = np.asarray(propensities, dtype=np.float64)
    r = np.asarray(rewards, dtype=np.float64)
    for name, arr in (("actions", a), ("propensities", p), ("rewards", r)):
        if arr.shape != (n,):
            raise ValueError(f"{name} must have shape ({n},), got {arr.shape}")
    if n and (not np.issubdtype(a.dtype, np.integer) or a.min() < 0 or a.max() >= n_actions):
        raise ValueError(f"actions must be integers in [0, {n_actions}), got {a.dtype} values")
    if np.any(~np.isfinite(p)) or np.any(p <= 0) or np.any(p > 1):
        raise ValueError("propensities must lie in (0, 1]")
    if np.any(~np.isfinite(r)):
        raise ValueError("rewards must be finite")
    return a, p, r


# ---- a constraint table (scikit-learn's _parameter_constraints style) ----------------------------


class FlagError(TypeError, ValueError):
    """A flag that is not a boolean: a TypeError (as the boosters always raised) that is also a
    ValueError (what the service answers with 422)."""


@dataclass(frozen=True)
class Interval:
    """Numbers of ``kind`` (int or float) from ``low`` to ``high``; ``closed`` says which ends
    belong: "both", "left", "right" or "neither" (``None`` as an end: unbounded). ``bound``: the
    name of the constant ``high`` is (MAX_LEARNERS, ...): a value above it is then refused as
    "above its bound" (docs/boosters.md, "Size bounds").

    >>> Interval(int, 1, MAX_LEARNERS, bound="MAX_LEARNERS").check("n_learners", 1001)
    Traceback (most recent call last):
    ...
    ValueError: n_learners = 1001 is above its bound 1000 (MAX_LEARNERS in boosters/_params.py)
    """

    kind: type
    low: float | None
    high: float | None
    closed: str = "both"
    bound: str | None = None

    def check(self, name: str, value: Any) -> None:
        low = -math.inf if self.low is None else self.low
        high = math.inf if self.high is None else self.high
        if self.bound is not None:
            _bound(name, value, high, self.bound)
        if self.kind is int:
            check_int(name, value, math.ceil(low) + (self.closed in ("right", "neither")))
            if value > high or (value == high and self.closed in ("left", "neither")):
                raise ValueError(f"{name} must be an integer <= {high}, got {value!r}")
            return
        check_real(name, value, low, high, open_low=self.closed in ("right", "neither"),
                   open_high=self.closed in ("left", "neither"))


@dataclass(frozen=True)
class HasMethods:
    """An object with these methods (a base learner, a weak learner)."""

    methods: tuple

    def check(self, name: str, value: Any) -> None:
        missing = [m for m in self.methods if not callable(getattr(value, m, None))]
        if missing:
            raise ValueError(f"{name} must have a {', '.join(missing)} method, got {value!r}")


@dataclass(frozen=True)
class Options:
    """One of a fixed set of values."""

    choices: tuple

    def check(self, name: str, value: Any) -> None:
        check_choice(name, value, self.choices)


@dataclass(frozen=True)
class Flag:
    """True or false (a numpy bool too); anything else is a :class:`FlagError` (a truthy ``"no"``
    or ``0`` would otherwise turn an option on or off).

    >>> try:
    ...     Flag().check("fixed_trees", "no")
    ... except (TypeError, ValueError) as error:
    ...     print(error)
    fixed_trees must be true or false, got 'no'
    """

    def check(self, name: str, value: Any) -> None:
        kind = type(value)
        if kind is not bool and not (kind.__module__ == "numpy" and kind.__name__ == "bool"):
            raise FlagError(f"{name} must be true or false, got {value!r}")


@dataclass(frozen=True)
class Rounds:
    """A number of rounds ``> 0`` or ``"auto"`` (the exploration schedule's ``rho_decay``)."""

    def check(self, name: str, value: Any) -> None:
        if isinstance(value, str) and value != "auto" or isinstance(value, bool):
            raise ValueError(
                f"{name} must be a number of rounds > 0, 'auto' or None, got {value!r}"
            )
        if not isinstance(value, str):
            check_real(name, value, 0.0, math.inf, open_low=True)


def _satisfies(name: str, value: Any, constraint: Any) -> Exception | Literal[False] | None:
    """None if ``value`` meets ``constraint`` (None, a type, Interval, Options, Flag, Rounds,
    HasMethods), else the error saying why not (None for a failed ``None`` or type alone)."""
    if constraint is None:
        return None if value is None else False
    if isinstance(constraint, type):
        return None if isinstance(value, constraint) else ValueError(
            f"{name} must be a {constraint.__name__}, got {value!r}")
    try:
        constraint.check(name, value)
    except ValueError as error:
        return error
    return None


def validate_params(params: Mapping[str, Any], constraints: Mapping[str, Sequence[Any]]) -> None:
    """ValueError naming the parameter if a value of ``params`` meets none of its constraints
    (a :class:`FlagError`, also a TypeError, for a flag).

    ``constraints``: name -> a list of allowed forms, any of which will do (a batch estimator's
    or an online booster's ``_parameter_constraints``); parameters without an entry are not
    checked. A ``None`` among the forms is not named in the message.

    >>> table = {"n_rounds": [Interval(int, 1, None)], "solver": [Options(("auto", "xgb"))],
    ...          "clip": [None, Interval(float, 1.0, None)]}
    >>> validate_params({"n_rounds": 10, "solver": "auto", "clip": None}, table)
    >>> validate_params({"n_rounds": 0, "solver": "auto"}, table)
    Traceback (most recent call last):
    ...
    ValueError: n_rounds must be an integer >= 1, got 0
    >>> validate_params({"clip": 0.5}, table)
    Traceback (most recent call last):
    ...
    ValueError: clip must be a number >= 1.0, got 0.5
    """
    for name, allowed in constraints.items():
        if name not in params:
            continue
        errors = [_satisfies(name, params[name], c) for c in allowed]
        if None in errors:
            continue
        failed = [e for e in errors if isinstance(e, Exception)]  # errors and False are left
        if len(failed) == 1:
            raise failed[0]
        raise ValueError(f"{name} = {params[name]!r} is invalid: {'; '.join(map(str, failed))}")
