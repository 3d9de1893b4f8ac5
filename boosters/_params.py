"""Upper bounds on the sizes of an online booster, and its flags' type, checked before anything
is built.

:func:`check_flags` refuses a flag (:data:`FLAG_PARAMS`) that is not a boolean (a truthy
``"no"`` or ``0`` would otherwise turn it on or off silently). :func:`check_sizes` is the one
place that checks the sizes; :func:`boosters.registry.make_booster`
calls it before constructing anything (so the service's ``POST /v1/models``, the Personalizer
routes' models, model restores and the CLI all go through it). Only upper bounds are checked
here, cheaply; types and lower bounds stay the boosters' own checks. A size above its bound is a
ValueError naming the parameter, its value and its bound.

What grows with which size (measured on the 2-core development machine, under load):

- The Zhang et al. 2019 ensembles (``banditbbm``, ``adabandit``, ``onlinembbm``, ``adaboostolm``)
  hold ``n_learners`` trees over all actions. Their rounds form dense ``k x k`` cost matrices per
  learner (AdaBandit's eq. 10 for every learning round, the cost-sensitive weak predictions of
  the twins for every decision): ``n_learners * n_actions**2`` entries, ~24 bytes each in
  temporaries. At 1,000 actions and the default 20 learners (2*10^7 entries) an AdaBandit
  learning round takes ~1 s and ~0.5 GB; at 100 learners it was 5 s and 2.5 GB.
- BanditBBM's exact boost-by-majority potentials (:mod:`boosters.online.potentials`) have a
  recursion whose working set outgrows its bounded caches between 33 and 40 learners (k >= 10): the
  worst round went from ~1 s (N = 33) to 4 s (N = 36) and 10-15 s (N = 40); at N = 50 a round did
  not end in a minute, and at N = 1,000 the recursion overflows Python's stack.
- The OCO boosters (``oco``, ``oco_full``) hold one binary tree per action and per booster
  round: ``n_actions * n_learners`` trees. 20,000 fresh trees (1,000 actions x 20): built in
  0.4 s, pickled for the first snapshot in ~1 s (7.5 MB + 4 MB serving copy), ~55 MB, 20 ms per
  decision; 100,000 trees took 3-4 s to build, ~270 MB and 250 ms per decision.
- Thompson sampling (``river_thompson``) draws ``mc_samples x n_actions`` Beta variates per
  decision to estimate its propensities: 10^6 (1,000 x 1,000) took ~0.15 s.

The bounds (each generous for real use: this project's Table 1 reproductions use 5-20 learners,
and the service's own ``max_actions`` default is 1,000):

- ``MAX_ACTIONS`` (10,000): ten times the service's default ``max_actions``.
- ``MAX_LEARNERS`` (1,000): fifty times the default 20.
- ``MAX_BBM_LEARNERS`` (32) for ``banditbbm`` and ``onlinembbm``: below the potentials' cliff
  above; benchmarks/table1.py runs them at N = 10-20.
- ``MAX_WEAK_LEARNERS`` (20,000) on ``n_actions x n_learners`` for the OCO boosters: 1,000
  actions at the default 20 rounds; a second to build and snapshot.
- ``MAX_COST_MATRIX_ENTRIES`` (25,000,000) on ``n_learners x n_actions**2`` for the
  Zhang et al. 2019 ensembles: keeps the default 20 learners at 1,000 actions (~1 s, ~0.5 GB
  per round at most); 1,000 learners up to 158 actions.
- ``MAX_GRACE_PERIOD`` (1,000,000) for ``egreedy_tree``: 5,000 times River's default 200; a
  tree with a larger one never splits within a model's life. (The ensembles' grace periods come
  from the fixed ``tree_profile`` ranges of :data:`learners.hoeffding.TREE_PROFILES`, at most
  301; tests/test_limits.py keeps them within this bound too.)
- ``MAX_NOMINAL_ATTRIBUTES`` (10,000): the service's default ``max_feature_names``; a model
  never sees more distinct features than that.
- ``MAX_MC_SAMPLES`` (100,000) and ``MAX_MC_DRAWS`` (1,000,000 = ``mc_samples x n_actions``) for
  Thompson sampling's Monte Carlo propensities (a class attribute, 1,000, read from the class):
  100,000 draws estimate a propensity to +-0.002 already; 10^6 draws keep a decision near 0.15 s
  and 8 MB, which is the default 1,000 draws at 1,000 actions.

The trees' own limits (River's ``max_depth``, ``max_size`` of 100 MB per tree, the array
leaves' ``max_nominal_values`` 64 and ``max_multiway_values`` 32, splitter bins) are not booster
parameters: they are fixed defaults, so there is nothing to bound here. :data:`SIZE_PARAMS` and
:data:`OTHER_PARAMS` classify every registered booster parameter; tests/test_limits.py fails when
a booster gains a parameter that is in neither, so a new size parameter gets a bound.

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
    "MAX_BBM_LEARNERS",
    "MAX_COST_MATRIX_ENTRIES",
    "MAX_GRACE_PERIOD",
    "MAX_LEARNERS",
    "MAX_MC_DRAWS",
    "MAX_MC_SAMPLES",
    "MAX_NOMINAL_ATTRIBUTES",
    "MAX_WEAK_LEARNERS",
    "CLASS_SIZE_ATTRIBUTES",
    "FLAG_PARAMS",
    "OTHER_PARAMS",
    "SIZE_PARAMS",
    "check_flags",
    "check_sizes",
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
#: grace period of ``egreedy_tree``'s Hoeffding tree (River's default is 200)
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

#: booster parameters with an upper bound here
SIZE_PARAMS = frozenset({"n_learners", "grace_period", "nominal_attributes", "mc_samples"})
#: booster parameters that are no size (rates, options, seeds, flags, objects)
OTHER_PARAMS = frozenset({
    "seed", "rho", "gamma", "epsilon", "delta", "tau", "clip", "weight_scale", "baseline",
    "max_weight", "p_init", "tree_profile", "fixed_trees", "fast_trees", "ref_code_gradient",
    "reduction_order", "estimator", "weak_prediction", "update", "realizable", "optimizer",
})
#: booster parameters that are flags: booleans only
FLAG_PARAMS = frozenset({"fixed_trees", "fast_trees", "ref_code_gradient", "realizable"})
#: size attributes a booster class may fix (read from the class when not a parameter)
CLASS_SIZE_ATTRIBUTES = ("mc_samples",)


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _bound(name: str, value: Any, bound: int, constant: str, why: str = "") -> None:
    if _is_int(value) and value > bound:
        raise ValueError(
            f"{name} = {value} is above its bound {bound}{why} ({constant} in boosters/_params.py)"
        )


def check_flags(params: Mapping[str, Any]) -> None:
    """TypeError naming the flag if a flag of ``params`` (:data:`FLAG_PARAMS`) is not a bool.

    >>> check_flags({"fast_trees": False, "n_learners": 3})
    >>> check_flags({"fixed_trees": "no"})
    Traceback (most recent call last):
    ...
    TypeError: fixed_trees must be true or false, got 'no'
    """
    for name in sorted(FLAG_PARAMS & set(params)):
        if not isinstance(params[name], bool):
            raise TypeError(f"{name} must be true or false, got {params[name]!r}")


def check_sizes(booster: str, n_actions: Any, params: Mapping[str, Any]) -> None:
    """ValueError naming the parameter, its value and its bound if a size of booster ``booster``
    (a registered name) for ``n_actions`` actions is above its bound (module docstring).

    ``params``: the booster's parameters with its defaults filled in (and any class-fixed size of
    :data:`CLASS_SIZE_ATTRIBUTES`). Values of the wrong type are left to the booster's own checks.

    >>> check_sizes("oco", 1_000, {"n_learners": 21})
    Traceback (most recent call last):
    ...
    ValueError: n_actions x n_learners = 21000 is above its bound 20000 (trees of oco) \
(MAX_WEAK_LEARNERS in boosters/_params.py)
    """
    _bound("n_actions", n_actions, MAX_ACTIONS, "MAX_ACTIONS")
    n_learners = params.get("n_learners")
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
    mc_samples = params.get("mc_samples")
    _bound("mc_samples", mc_samples, MAX_MC_SAMPLES, "MAX_MC_SAMPLES")
    if booster in _MONTE_CARLO and _is_int(mc_samples) and _is_int(n_actions):
        _bound("mc_samples x n_actions", int(mc_samples) * int(n_actions), MAX_MC_DRAWS,
               "MAX_MC_DRAWS", f" (Beta draws of {booster} per decision)")
