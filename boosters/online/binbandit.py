"""BinBandit: one-vs-rest bandit boosting of binary trees (Chen, Lin and Lu 2014, "Boosting
with online binary learners for the multiclass bandit problem"), the baseline column of Zhang
et al. 2019's Tables 1 and 2.

More: docs/boosters.md, "boosters/online/binbandit.py".

>>> booster = BinBandit(n_actions=3, n_learners=2, rho=0.3, seed=0)
>>> d = booster.decide_one({"f": 1.0})
>>> d.internals["scores"].tolist(), d.probabilities.tolist()      # untrained: a tie
([0.0, 0.0, 0.0], [0.15, 0.7, 0.15])
>>> booster.learn_one({"f": 1.0}, d, reward=1.0)
>>> booster.n_updates, booster.alpha.round(3).tolist()
(1, [[0.5, 0.5], [0.5, 0.5], [0.5, 0.5]])
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from boosters._params import Interval, validate_params
from boosters.base import Decision, OnlineBooster, check_context, played_propensity
from boosters.exploration import check_allowed, exploration_distribution, explore, mask_scores
from boosters.groups import PAPER_EXPLORATION, Exploration, WeakLearner, flat_values, regroup
from boosters.online.oco import OCOParams
from boosters.online.template import TEMPLATE_CONSTRAINTS
from learners.reduction import argmax_random_ties

__all__ = ["BinBandit", "booster_weights", "edge_threshold"]

#: the fields of :class:`boosters.groups.WeakLearner` the one-vs-rest trees use
BIN_TREE_FIELDS = ("tree_profile", "fixed_trees", "fast_trees", "tree_core", "leaf_prediction")


def edge_threshold(gamma: float) -> float:
    """``theta = gamma / (2 + gamma)``: the margin each weak learner's vote is charged.

    >>> round(edge_threshold(0.1), 6)
    0.047619
    """
    return gamma / (2.0 + gamma)


def booster_weights(h: np.ndarray, z: int, gamma: float, propensity: float) -> np.ndarray:
    """The sample weights of one group's N trees for the binary label ``z`` in {-1, +1}: tree
    ``i`` gets ``min((1 - gamma)^{z_i}, 1) / p``, with ``z_i = sum_{j < i} (z h_j - theta)`` the
    margin of the trees before it (0 for the first) and ``p`` the played action's propensity.

    >>> booster_weights(np.array([1.0, 1.0, -1.0]), 1, 0.1, 0.5).round(4).tolist()
    [2.0, 1.8091, 1.6363]
    >>> booster_weights(np.array([1.0, 1.0, -1.0]), -1, 0.1, 0.5).round(4).tolist()
    [2.0, 2.0, 2.0]
    """
    charged = z * np.asarray(h, dtype=float) - edge_threshold(gamma)
    before = np.concatenate(([0.0], np.cumsum(charged)[:-1]))
    return np.minimum((1.0 - gamma) ** before, 1.0) / propensity


class BinBandit(OCOParams, OnlineBooster):
    """k one-vs-rest groups of N binary Hoeffding trees; only the played action's group learns.

    A decision scores each action ``c`` by ``sum_i alpha[c, i] h[c, i](x)``, each tree's
    ``h = P(+1 | x) - P(-1 | x)`` in [-1, 1], plays the argmax (random ties) and explores by
    eq. 2 of Zhang et al. 2019 (``delta = rho k / (k - 1)`` in Chen et al.'s notation). The
    feedback makes the played group's binary label ``z`` (+1 if the action was right, else
    -1; a fractional reward is rounded by the seeded generator, as for the other boosters):
    its trees learn ``z`` with :func:`booster_weights`, and where the group's margin is short
    of the edge (``theta - z alpha_c . h_c > 0``) its weights take an exponentiated-gradient
    step ``alpha_c *= exp(nu z h_c)`` with ``nu = delta^3 / k``, then sum to 1 again.

    Parameters: ``n_actions``, ``n_learners`` (N per action, 10 in the paper: k N trees in
    all), ``gamma`` (the edge, 0.1), ``seed``, ``exploration`` (``rho`` alone, constant),
    ``weak_learner`` (the trees: the ``"full"`` profile and majority-class leaves, as the
    authors' runs), ``nominal_attributes``; any group field also as a flat keyword.
    Departures from the authors' code (docs/boosters.md, "boosters/online/binbandit.py"):
    ``z_i`` sums every tree before ``i``, and the step's exponent has the hinge's sign.
    """

    _parameter_constraints: ClassVar[dict[str, list]] = {
        **{k: TEMPLATE_CONSTRAINTS[k] for k in ("n_actions", "n_learners", "seed",
                                                 "nominal_attributes", "rho")},
        **{k: TEMPLATE_CONSTRAINTS[k] for k in BIN_TREE_FIELDS},
        "gamma": [Interval(float, 0.0, 1.0, closed="neither")],
    }
    default_groups: ClassVar[dict[str, Any]] = {
        "exploration": dataclasses.replace(PAPER_EXPLORATION, rho=0.1),
        "weak_learner": WeakLearner(tree_profile="full", leaf_prediction="mc"),
    }

    def __init__(
        self,
        n_actions: int,
        n_learners: int = 10,
        *,
        gamma: float = 0.1,
        seed: int | None = None,
        exploration: Exploration | None = None,
        weak_learner: WeakLearner | None = None,
        nominal_attributes: list | None = None,
        **flat: Any,
    ):
        groups = regroup(type(self), {"exploration": exploration, "weak_learner": weak_learner},
                         flat)
        declared = type(self)._parameter_constraints
        validate_params({"n_actions": n_actions, "n_learners": n_learners, "seed": seed,
                         "gamma": gamma, "nominal_attributes": nominal_attributes,
                         **flat_values(groups, declared)}, declared)
        weak = groups["weak_learner"]
        self.n_actions, self.n_learners = int(n_actions), int(n_learners)
        self.rho, self.gamma, self.seed = float(groups["exploration"].rho), float(gamma), seed
        self._rng = np.random.default_rng(seed)
        self._make_trees(self.n_actions * self.n_learners, weak.tree_profile, weak.fixed_trees,
                         nominal_attributes, weak.fast_trees, weak.leaf_prediction,
                         weak.tree_core)
        self.alpha = np.full((self.n_actions, self.n_learners), 1.0 / self.n_learners)
        delta = self.rho * self.n_actions / (self.n_actions - 1)
        self.nu = delta**3 / self.n_actions  # the weights' step (Chen et al.'s delta^3 / k)
        self.n_decisions = self.n_updates = 0

    def current_rho(self) -> float:
        """The exploration rate (constant)."""
        return self.rho

    def decide_one(
        self,
        x: dict,
        *,
        allowed: np.ndarray | Sequence[int] | None = None,
        rng: np.random.Generator | None = None,
    ) -> Decision:
        """All k N trees' margins in one call, the weighted one-vs-rest scores, their argmax
        among ``allowed`` and eq. 2 over them. ``rng``: this decision's draws, the booster
        only read."""
        check_context(x)
        k = self.n_actions
        allowed = check_allowed(allowed, k)
        u = (self._rng if rng is None else rng).random(k + 1)
        h = self._margins(x).reshape(k, self.n_learners)
        scores = (self.alpha * h).sum(axis=1)
        yhat = int(argmax_random_ties(mask_scores(scores, allowed)[None, :], u[None, :k])[0])
        p = exploration_distribution(yhat, k, self.rho, allowed)
        action = explore(yhat, k, self.rho, u[-1], allowed)
        internals: dict[str, Any] = {"h": h, "scores": scores, "yhat": yhat}
        if allowed is not None:
            internals["allowed"] = allowed
        if rng is None:
            self.n_decisions += 1
        return Decision(action=action, probabilities=p, internals=internals)

    def learn_one(
        self, x: dict, decision: Decision, reward: float | None = None, label: int | None = None
    ) -> None:
        """The played group learns ``z`` (+1: the action was right); the other groups
        nothing."""
        check_context(x)
        h = np.asarray(decision.internals.get("h"), dtype=float)
        if h.shape != (self.n_actions, self.n_learners):
            raise ValueError("decision internals do not match this booster's learners")
        propensity = played_propensity(decision, self.n_actions)
        correct, _ = self._feedback(decision, reward, label)
        c, z = decision.action, 1 if correct else -1
        weights = booster_weights(h[c], z, self.gamma, propensity)
        self._teach_group(x, c, z, weights)
        if edge_threshold(self.gamma) - z * float(self.alpha[c] @ h[c]) > 0.0:
            step = self.alpha[c] * np.exp(self.nu * z * h[c])
            self.alpha[c] = step / step.sum()
        self.n_updates += 1

    def _teach_group(self, x: dict, c: int, z: int, weights: np.ndarray) -> None:
        """Group ``c``'s trees learn ``z`` with their own ``weights``: one compiled call, or
        one call per River tree."""
        n = self.n_learners
        if self.forest is None:
            for tree, w in zip(self.learners[c * n : (c + 1) * n], weights.tolist()):
                tree.learn_one(x, z, w=w)
            return
        classes = np.full(self.forest.n_trees, int(z > 0), dtype=np.int64)
        all_weights = np.zeros(self.forest.n_trees)
        all_weights[c * n : (c + 1) * n] = weights
        self.forest.learn(self.forest.transform(x, learn=True), classes, all_weights)
