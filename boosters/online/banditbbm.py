"""BanditBBM ("OptBandit") and its full-information twin OnlineMBBM ("OptFull").

More: docs/boosters.md, "boosters/online/banditbbm.py".

>>> from boosters.online.banditbbm import BanditBBM
>>> booster = BanditBBM(n_actions=3, n_learners=5, rho=0.1, seed=42)
>>> decision = booster.decide_one({"x": 1.0})
>>> round(float(decision.probabilities.sum()), 6)
1.0
>>> booster.learn_one({"x": 1.0}, decision, reward=1.0)
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import numpy as np

from boosters._params import MAX_BBM_LEARNERS, Interval
from boosters.exploration import forget_pending
from boosters.groups import PAPER_EXPLORATION, Exploration, RewardExpert, WeakLearner, regroup
from boosters.online.adabandit import forget_trees
from boosters.online.potentials import BBMPotentials
from boosters.online.template import (
    BANDIT_CONSTRAINTS,
    FULL_RHO,
    TEMPLATE_CONSTRAINTS,
    BoostingTemplate,
    model_leads,
    record_switch,
)

__all__ = ["BanditBBM", "OnlineMBBM"]


class BanditBBM(BoostingTemplate):
    """Bandit boost-by-majority (Algorithm 2 of Zhang et al. 2019).

    Parameters are those of :class:`boosters.online.template.BoostingTemplate` plus ``gamma``, the
    weak learners' assumed edge (0.1 in the paper, not tuned), which enters only through the
    potentials. Its trees have adaptive naive-Bayes leaves by default (``leaf_prediction="nba"``,
    docs/boosters.md "Defaults"); the paper's are ``"mc"``. Its loss estimate is eq. 4 made
    doubly robust by default (``estimator="dr"``); the paper's is ``"proposed"``. Like
    AdaBandit's, its exploration decays with evidence (``rho_decay="auto"``: 0.1 down to 0.01 over
    ``min(5 k, 100)`` learning rounds for k actions, scaled by the prediction's recent miss rate
    over 0.25 with ``rho_by_misses``, the floor following that miss rate down to
    ``rho_min=0.002``) and it plays its reward model's
    best action while that model's estimated losses are below the vote's
    (``guess_expert``, on whenever there is a reward model; ``switch_weight``: the losses' clipped
    importance weights, docs/boosters.md "The Hedge's losses"; None compares the hit counts of
    the doubly robust switch instead); the paper's rate is constant (``rho_decay=None``). Above
    ``dense_max_actions`` actions the cost vectors are formed per class of labels
    (:meth:`boosters.online.potentials.BBMPotentials.costs`) instead of through ``k x k`` matrices.
    ``drift_restart``: as AdaBandit's (``"model"``: when the played prediction's misses jump,
    the schedule's clock restarts and the booster learns again from scratch;
    ``boosters.exploration.MissDrift``). The schedule is its ``exploration``
    (:class:`boosters.groups.Exploration`), the trees its ``weak_learner``, the reward model its
    ``reward_expert`` (``guess_model``, ``guess_expert``, ``switch_weight``); any of their fields
    also as a flat keyword.
    """

    #: up to this many actions, cost vectors are ``C @ omega`` with dense matrices (as always)
    dense_max_actions = 64
    _parameter_constraints: ClassVar[dict[str, list]] = {
        **TEMPLATE_CONSTRAINTS,
        **BANDIT_CONSTRAINTS,
        "n_learners": [Interval(int, 1, MAX_BBM_LEARNERS, bound="MAX_BBM_LEARNERS")],
        "gamma": [Interval(float, 0.0, 1.0, closed="neither")],
        "switch_weight": [None, Interval(float, 1.0, None)],
    }
    default_groups: ClassVar[dict[str, Any]] = {
        "exploration": Exploration(),
        "weak_learner": WeakLearner(),
        "reward_expert": RewardExpert(hedge_weight=None),
    }

    def __init__(
        self,
        n_actions: int,
        n_learners: int = 20,
        *,
        gamma: float = 0.1,
        seed: int | None = None,
        exploration: Exploration | None = None,
        weak_learner: WeakLearner | None = None,
        reward_expert: RewardExpert | None = None,
        nominal_attributes: list | None = None,
        estimator: str = "dr",
        **flat: Any,
    ):
        groups = regroup(type(self), {"exploration": exploration, "weak_learner": weak_learner,
                                      "reward_expert": reward_expert}, flat)
        super().__init__(n_actions, n_learners, seed, groups, nominal_attributes=nominal_attributes,
                         estimator=estimator, own={"gamma": gamma})
        self.gamma = float(gamma)
        self.potentials = BBMPotentials(self.n_actions, self.gamma)
        self.potentials.precompute(self.n_learners)
        self._ones = np.ones(self.n_learners, dtype=np.int64)
        weight = groups["reward_expert"].switch_weight
        self.switch_weight = self.switch_losses = None
        if weight is not None and self.guess_expert:  # only a switch needs it
            self.switch_weight = float(weight)
            #: the estimated losses (faded by GUESS_DECAY) of [the vote of all N, the model]
            self.switch_losses = np.zeros(2)

    def _forget(self) -> None:
        """Learn again from scratch (``drift_restart="model"``, after an alarm of its
        ``MissDrift``): new trees and reward models, the switch's losses as at creation."""
        forget_trees(self)
        if self.switch_losses is not None:
            self.switch_losses = np.zeros(2)

    def __setstate__(self, state):
        super().__setstate__(state)
        self.potentials.precompute(self.n_learners)  # the table is not pickled; refill it

    def _alpha(self) -> np.ndarray:
        return self._ones

    def _judge_weight(self) -> float | None:
        return self.switch_weight

    def _guess_leads(self) -> bool:
        """With ``switch_weight``, the switch plays the reward model while its estimated losses
        are strictly below the vote's; else the template's rule (its hits lead). The doubly
        robust estimate's own switch (:meth:`uses_guess`) keeps the hit counts."""
        if self.switch_losses is None:
            return super()._guess_leads()
        return model_leads(self.switch_losses)

    def _update(self, votes, weak, experts, lhat, costs, true_label, judged) -> None:
        if forget_pending(self):  # the round's experts are the forgotten trees'
            return
        if self.switch_losses is not None:
            n = self.n_learners
            record_switch(self.switch_losses, judged[experts[n - 1 : n + 1]])

    def _cost_matrices(self, votes: np.ndarray, first: int = 0) -> np.ndarray:
        return self.potentials.cost_matrices(votes, self.n_learners - 1 - first)

    def _learn_costs(self, votes: np.ndarray, omega: np.ndarray) -> np.ndarray:
        if self.n_actions <= self.dense_max_actions:
            return super()._learn_costs(votes, omega)
        return self.potentials.costs(votes[:-1], self.n_learners - 1, omega)


class OnlineMBBM(BanditBBM):
    """OnlineMBBM (Jung et al. 2017), the full-information twin of BanditBBM (authors' code).

    Feedback is the true label. Every tree learns that label with weight ``sum_l (c_l - c_y)``
    where ``c = C[:, y]`` (no clipping); weak learners predict cost-sensitively. With ``rho = 0``
    (the default) the booster plays its prediction.
    """

    full_information = True
    default_weak_prediction = "cost_sensitive"
    default_tree_profile = "full"
    _parameter_constraints: ClassVar[dict[str, list]] = {
        **TEMPLATE_CONSTRAINTS,
        "rho": FULL_RHO,
        "n_learners": BanditBBM._parameter_constraints["n_learners"],
        "gamma": BanditBBM._parameter_constraints["gamma"],
    }
    default_groups: ClassVar[dict[str, Any]] = {
        "exploration": dataclasses.replace(PAPER_EXPLORATION, rho=0.0),
        "weak_learner": WeakLearner(leaf_prediction="mc"),
        "reward_expert": RewardExpert(guess_model="linear", guess_expert=False, hedge_weight=None),
    }

    def __init__(
        self,
        n_actions: int,
        n_learners: int = 20,
        *,
        gamma: float = 0.1,
        seed: int | None = None,
        exploration: Exploration | None = None,
        weak_learner: WeakLearner | None = None,
        nominal_attributes: list | None = None,
        estimator: str = "proposed",
        **flat: Any,
    ):
        super().__init__(n_actions, n_learners, gamma=gamma, seed=seed, exploration=exploration,
                         weak_learner=weak_learner, nominal_attributes=nominal_attributes,
                         estimator=estimator, **flat)

    def _labels_weights(self, costs, u, known_label):
        weights = np.maximum((costs - costs[:, known_label : known_label + 1]).sum(axis=1), 1e-10)
        return np.full(self.n_learners, known_label), weights
