"""Upper bounds on the sizes of an online booster, checked before anything is built.

A booster's memory and its build time grow with the number of weak learners it holds: the
ensemble boosters (BanditBBM, AdaBandit and their full-information twins) hold ``n_learners``
trees over all actions; the OCO boosters hold one binary learner per action and per booster
round (``n_actions * n_learners``). The bounds keep one model's creation to seconds and its
memory to what a service process can hold (a fresh tree is a few kilobytes; a grown one, tens):

- ``MAX_LEARNERS`` (1,000): the papers use 5-100; 1,000 is ten times the largest.
- ``MAX_ACTIONS`` (10,000): far above the service's own default limit (``max_actions``, 1,000).
- ``MAX_WEAK_LEARNERS`` (20,000): 1,000 OCO learners' worth of 20 actions, or 20 rounds of
  1,000 actions; building 20,000 fresh trees takes about a second.
- ``MAX_NOMINAL_ATTRIBUTES`` (10,000): the feature names a model may declare nominal.

>>> check_sizes("adabandit", 5, {"n_learners": 20})
>>> check_sizes("adabandit", 5, {"n_learners": 10**9})
Traceback (most recent call last):
...
ValueError: n_learners = 1000000000 is above its bound 1000 (MAX_LEARNERS in boosters/_params.py)
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from typing import Any

__all__ = [
    "MAX_ACTIONS",
    "MAX_LEARNERS",
    "MAX_NOMINAL_ATTRIBUTES",
    "MAX_WEAK_LEARNERS",
    "check_sizes",
]

MAX_LEARNERS = 1_000
MAX_ACTIONS = 10_000
MAX_WEAK_LEARNERS = 20_000
MAX_NOMINAL_ATTRIBUTES = 10_000

#: boosters whose weak learners are per action and per round
_PER_ACTION = {"oco", "oco_full"}


def _bound(name: str, value: Any, bound: int, constant: str) -> None:
    if isinstance(value, numbers.Integral) and not isinstance(value, bool) and value > bound:
        raise ValueError(
            f"{name} = {value} is above its bound {bound} ({constant} in boosters/_params.py)"
        )


def check_sizes(booster: str, n_actions: Any, params: Mapping[str, Any]) -> None:
    """ValueError naming the parameter if a size of booster ``booster`` is above its bound.

    Only the bounds are checked here (cheaply, before building); types and lower bounds are the
    booster's own checks.
    """
    _bound("n_actions", n_actions, MAX_ACTIONS, "MAX_ACTIONS")
    n_learners = params.get("n_learners")
    _bound("n_learners", n_learners, MAX_LEARNERS, "MAX_LEARNERS")
    nominal = params.get("nominal_attributes")
    if nominal is not None and hasattr(nominal, "__len__"):
        _bound("len(nominal_attributes)", len(nominal), MAX_NOMINAL_ATTRIBUTES,
               "MAX_NOMINAL_ATTRIBUTES")
    if booster in _PER_ACTION and isinstance(n_learners, numbers.Integral) and isinstance(
        n_actions, numbers.Integral
    ):
        _bound("n_actions x n_learners", int(n_actions) * int(n_learners), MAX_WEAK_LEARNERS,
               "MAX_WEAK_LEARNERS")
