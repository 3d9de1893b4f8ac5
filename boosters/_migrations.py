"""What an online booster pickled before an attribute existed reads for it: one table, applied
by one ``__setstate__`` (:class:`Migrating`, a base of :class:`boosters.base.OnlineBooster`).

Each entry is the value that reproduces how such a booster decided before the option came (the
paper's algorithm, River's trees, no reward model ...); a booster built now sets every one of
these attributes in its constructor. An entry is per class name and applies to the class and
its subclasses; a subclass's entry wins over its base's. Snapshots (pickle) and model data
(:mod:`service.models.modeldata`) both restore through ``__setstate__``.

>>> from boosters.online.adabandit import AdaBandit
>>> old = AdaBandit.__new__(AdaBandit)
>>> old.__setstate__({"n_actions": 3, "learners": []})
>>> old.alpha_min, old.rho_decay, old.guess_model, old.tree_core
(-2.0, None, 'linear', 'river')

An option that was removed (:data:`REMOVED`: its benchmark lost) is dropped from a stored
config or a pickled state; a value other than the rule that remains is logged as a warning and
the booster continues with that rule.
"""

from __future__ import annotations

import logging
from typing import Any

from boosters.exploration import MISS_REFERENCE

__all__ = ["MIGRATIONS", "REMOVED", "Migrating", "drop_removed", "missing_defaults"]

logger = logging.getLogger(__name__)

#: class name -> {attribute: what a booster pickled before the attribute existed reads}
MIGRATIONS: dict[str, dict[str, Any]] = {
    # Algorithm 1 of Zhang et al. 2019 as first shipped: the paper's unclipped eq. 4, majority-
    # class leaves, a constant rate (no schedule, no miss scaling, no drift test), the N
    # experts, AdaGrad's logistic reward model, River's trees (moved into the compiled core on
    # loading: BoostingTemplate.__setstate__)
    "BoostingTemplate": {
        "loss_clip": None, "leaf_prediction": "mc", "reward_model": None, "guess_hits": None,
        "rho_decay": None, "rho_floor": 0.01, "rho_min": None, "rho_by_misses": False,
        "miss_rate": MISS_REFERENCE, "drift_restart": None, "miss_drift": None,
        "guess_expert": False, "quadratic_expert": False, "quadratic_model": None,
        "guess_model": "linear", "tree_core": "river", "grace_by": "weight", "forest": None,
    },
    # the paper's feasible set [-2, 2] and its Hedge, on the trees' estimate
    "AdaBandit": {"alpha_min": -2.0, "hedge_weight": None},
    # the switch on the hit counts
    "BanditBBM": {"switch_weight": None, "switch_losses": None},
    # River's binary trees (kept: their labels are -1 and +1), majority-class leaves
    "OCOParams": {"leaf_prediction": "mc", "tree_core": "river", "forest": None},
    # a constant rate and no reward model: the one-vs-all vote always plays
    "OCOBandit": {
        "rho_decay": None, "rho_floor": 0.01, "rho_min": None, "rho_by_misses": False,
        "miss_rate": MISS_REFERENCE, "drift_restart": None, "miss_drift": None,
        "guess_model": None, "reward_model": None, "switch_weight": 5.0, "switch_losses": None,
    },
    # trees alone, before the nominal values' offsets
    "EpsilonGreedyTree": {"offset_l2": None, "offsets": None},
}


#: class name -> {removed option: the value of the rule that remains}. Options whose benchmark
#: lost (docs/boosters.md, "Removed options"): AdaBandit's discounted Hedge (``hedge_discount``
#: below 1) and its reward-model expert played by the template's switch instead of the Hedge
#: (``guess_play="switch"``)
REMOVED: dict[str, dict[str, Any]] = {
    "AdaBandit": {"hedge_discount": 1.0, "guess_play": "hedge"},
}


def removed_options(cls: type) -> dict[str, Any]:
    """The entries of :data:`REMOVED` for ``cls`` and its bases.

    >>> from boosters.online.adabandit import AdaBoostOLM
    >>> removed_options(AdaBoostOLM)
    {'hedge_discount': 1.0, 'guess_play': 'hedge'}
    """
    out: dict[str, Any] = {}
    for klass in reversed(cls.__mro__):
        out.update(REMOVED.get(klass.__name__, {}))
    return out


def drop_removed(cls: type, params: dict[str, Any], what: str = "stored config") -> dict[str, Any]:
    """``params`` without the options of ``cls`` that were removed; a value other than the rule
    that remains is logged as a warning naming it (``what`` says whose it was).

    >>> from boosters.online.adabandit import AdaBandit
    >>> drop_removed(AdaBandit, {"rho": 0.1, "guess_play": "switch"})
    {'rho': 0.1}
    """
    removed = removed_options(cls)
    for name in removed.keys() & params.keys():
        if params[name] != removed[name]:
            logger.warning(
                "%s of %s: option %s=%r was removed (its benchmark lost; docs/boosters.md, "
                "\"Removed options\"): it continues with %s=%r",
                what, cls.__name__, name, params[name], name, removed[name])
    return {name: value for name, value in params.items() if name not in removed}


def missing_defaults(cls: type, state: dict[str, Any]) -> dict[str, Any]:
    """The entries of :data:`MIGRATIONS` for ``cls`` (and its bases) that ``state`` lacks.

    >>> from boosters.online.banditbbm import OnlineMBBM
    >>> sorted(missing_defaults(OnlineMBBM, {"switch_weight": 2.0}))[:3]
    ['drift_restart', 'forest', 'grace_by']
    """
    filled: dict[str, Any] = {}
    for klass in reversed(cls.__mro__):
        filled.update(MIGRATIONS.get(klass.__name__, {}))
    return {name: value for name, value in filled.items() if name not in state}


class Migrating:
    """Restores a pickled state, first filling in what :data:`MIGRATIONS` says a booster
    pickled before an attribute existed reads."""

    def __setstate__(self, state: Any) -> None:
        slots = None
        if isinstance(state, tuple) and len(state) == 2:
            state, slots = state
        state = dict(state or {})
        kept = drop_removed(type(self), state, "pickled state")
        removed = {name: value for name, value in state.items() if name not in kept}
        state = kept
        self.__dict__.update(missing_defaults(type(self), state))
        self.__dict__.update(state)
        for key, value in (slots or {}).items():
            setattr(self, key, value)
        if removed:
            self._migrate_removed(removed)

    def _migrate_removed(self, removed: dict[str, Any]) -> None:
        """Bring a restored state that held the ``removed`` options (name -> stored value) to
        the rule that remains: a subclass's, where its state depends on them."""
