"""AdaBandit and its full-information twin Adaboost.OLM ("AdaFull").

More: docs/boosters.md, "boosters/online/adabandit.py".

>>> from boosters.online.adabandit import AdaBandit
>>> booster = AdaBandit(n_actions=3, n_learners=5, rho=0.1, seed=42)
>>> decision = booster.decide_one({"x": 1.0})
>>> booster.learn_one({"x": 1.0}, decision, reward=0.0)
>>> booster.t
1
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, ClassVar

import numpy as np

from boosters._params import Flag, Interval
from boosters.exploration import forget_pending
from boosters.groups import PAPER_EXPLORATION, Exploration, RewardExpert, WeakLearner, regroup
from boosters.online.template import (
    BANDIT_CONSTRAINTS,
    FULL_RHO,
    TEMPLATE_CONSTRAINTS,
    BoostingTemplate,
)

__all__ = [
    "AdaBandit", "AdaBoostOLM", "forget_trees", "logistic_cost_matrices", "logistic_loss",
]


def logistic_loss(s: np.ndarray, y: int) -> float:
    """Multiclass logistic loss ``sum_{l != y} log(1 + exp(s_l - s_y))`` (Sec. 3.3)."""
    z = np.delete(s - s[y], y)
    return float(np.logaddexp(0.0, z).sum())


def logistic_cost_matrices(votes: np.ndarray) -> np.ndarray:
    """Eq. 10 for each row of ``votes`` (M, k): ``C[l, r] = 1 / (1 + exp(s_r - s_l))`` off the
    diagonal, and the diagonal makes every column sum to zero. Column ``r`` is the gradient of the
    logistic loss with true label ``r``.

    >>> C = logistic_cost_matrices(np.array([[0.0, 1.0, -1.0]]))[0]
    >>> np.allclose(C.sum(axis=0), 0), (C.argmin(axis=0) == [0, 1, 2]).all()
    (True, np.True_)
    """
    if type(votes) is np.ndarray and votes.dtype == np.float64 and votes.ndim == 2:
        from learners.round_loops import half_differences, logistic_costs

        halves, index = half_differences(votes)  # the same floats in two compiled calls
        return logistic_costs(np.tanh(halves, out=halves), index, votes.shape[1])
    diff = votes[:, :, None] - votes[:, None, :]  # [m, l, r] = s_l - s_r
    C = 0.5 * (1.0 + np.tanh(0.5 * diff))  # 1 / (1 + exp(s_r - s_l)), overflow-free
    k = votes.shape[1]
    idx = np.arange(k)
    C[:, idx, idx] = 0.0
    C[:, idx, idx] = -C.sum(axis=1)
    return C


def forget_trees(booster) -> None:
    """``booster``'s (a :class:`boosters.online.template.BoostingTemplate`) trees and reward
    models as new: the trees' hyperparameters drawn again from its generator, as at its
    creation, the reward models and their hit counts untrained. Its counters, its generator and
    its schedule's miss rate stay.

    >>> booster = AdaBandit(n_actions=3, n_learners=2, seed=0)
    >>> for _ in range(5):
    ...     booster.learn_one({"x": 1.0}, booster.decide_one({"x": 1.0}), reward=1.0)
    >>> forget_trees(booster)
    >>> booster.tree_proba({"x": 1.0}).tolist(), booster.n_updates
    ([[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]], 5)
    """
    booster._new_trees()
    booster.reward_model = booster.quadratic_model = None
    booster._init_reward_models(booster.guess_expert, booster.quadratic_expert)


#: the paper's lower end of the learner weights' feasible set [-2, 2] (AdaBandit's ``alpha_min``)
PAPER_ALPHA_MIN = -2.0


class AdaBandit(BoostingTemplate):
    """Adaptive bandit boosting (Algorithm 3 of Zhang et al. 2019). No edge parameter is needed.

    Defaults (docs/boosters.md, "Defaults"): ``rho=0.1`` decaying with ``rho_decay="auto"``
    (over ``min(5 k, 100)`` learning rounds for k actions; halved after three times that) to
    ``rho_floor=0.01`` and scaled by the prediction's recent miss rate over 0.25
    (``rho_by_misses``), the floor following that miss rate down to ``rho_min=0.002``,
    ``alpha_min=0``, ``leaf_prediction="nba"`` (adaptive naive-Bayes leaves),
    ``estimator="dr"`` (eq. 4 made doubly robust by a reward model) and that reward model as one
    more expert of the Hedge (``guess_expert``), chosen on the quality benchmark;
    ``alpha_min=-2, leaf_prediction="mc", estimator="proposed", rho_decay=None`` with the
    paper's ``rho`` is the paper's algorithm (its feasible set [-2, 2] for the weights,
    majority-class leaves, eq. 4, a constant rate, the N experts). ``alpha_min`` is
    the lower end of that set: 0 gives weights that never vote against a learner's label
    (docs/boosters.md, "Many actions").
    ``loss_clip=None`` is the paper's estimate; a number ``c >= 1`` clips the estimated loss
    vector to ``[1 - c, c]`` before the trees, the Hedge and the weights ``alpha`` use it, and
    the step becomes ``1 / (k c sqrt t)``.
    ``drift_restart="model"``: when the played prediction's misses jump (a Page-Hinkley test,
    ``boosters.exploration.MissDrift``), the schedule's clock restarts and the booster learns
    again from scratch; ``"schedule"`` restarts the clock alone, None neither (as before issue
    42).

    Parameters: ``n_actions``, ``n_learners``, ``seed``; ``exploration``
    (:class:`boosters.groups.Exploration`: ``rho`` and its schedule), ``weak_learner``
    (:class:`boosters.groups.WeakLearner`: the trees), ``reward_expert``
    (:class:`boosters.groups.RewardExpert`: ``guess_model``, ``guess_expert``,
    ``quadratic_expert``, ``hedge_weight``); ``nominal_attributes``,
    ``estimator``, ``loss_clip``, ``alpha_min``, ``ref_code_gradient``;
    any group field also as a flat keyword (``rho=0.05``), as stored configs have them.
    """

    _parameter_constraints: ClassVar[dict[str, list]] = {
        **TEMPLATE_CONSTRAINTS,
        **BANDIT_CONSTRAINTS,
        "loss_clip": [None, Interval(float, 1.0, None)],
        "alpha_min": [Interval(float, PAPER_ALPHA_MIN, 0.0)],
        "ref_code_gradient": [Flag()],
        "quadratic_expert": [Flag()],
        "hedge_weight": [None, Interval(float, 1.0, None)],
    }
    default_groups: ClassVar[dict[str, Any]] = {
        "exploration": Exploration(),
        "weak_learner": WeakLearner(),
        "reward_expert": RewardExpert(switch_weight=None),
    }

    def __init__(
        self,
        n_actions: int,
        n_learners: int = 20,
        *,
        seed: int | None = None,
        exploration: Exploration | None = None,
        weak_learner: WeakLearner | None = None,
        reward_expert: RewardExpert | None = None,
        nominal_attributes: list | None = None,
        estimator: str = "dr",
        loss_clip: float | None = None,
        alpha_min: float = 0.0,
        ref_code_gradient: bool = False,
        **flat: Any,
    ):
        groups = regroup(type(self), {"exploration": exploration, "weak_learner": weak_learner,
                                      "reward_expert": reward_expert}, flat)
        own = {"loss_clip": loss_clip, "alpha_min": alpha_min,
               "ref_code_gradient": ref_code_gradient}
        super().__init__(n_actions, n_learners, seed, groups, nominal_attributes=nominal_attributes,
                         estimator=estimator, own=own)
        reward = groups["reward_expert"]
        self.ref_code_gradient = bool(ref_code_gradient)
        self.alpha_min = float(alpha_min)
        self.hedge_weight = None if reward.hedge_weight is None else float(reward.hedge_weight)
        self.alpha = np.zeros(self.n_learners)
        # Hedge weights in log space, one per expert (the reward models' are the last)
        self.log_v = np.zeros(self.n_learners + len(self.expert_models()))
        self.t = 0

    def _migrate_removed(self, removed: dict[str, Any]) -> None:
        # a booster that played its reward model by the switch (guess_play="switch") kept the
        # Hedge over the N trees alone: its model's expert joins it with the trees' mean weight
        missing = self.n_learners + len(self.expert_models()) - self.log_v.size
        if missing > 0:
            mean = float(np.log(np.mean(np.exp(self.log_v - self.log_v.max())))) + self.log_v.max()
            self.log_v = np.concatenate([self.log_v, np.full(missing, mean)])

    def _forget(self) -> None:
        """Learn again from scratch (``drift_restart="model"``, after an alarm of its
        ``MissDrift``): new trees and reward models, the weights and the Hedge's as at
        creation."""
        forget_trees(self)
        self.alpha = np.zeros(self.n_learners)
        self.log_v = np.zeros(self.log_v.size)
        self.t = 0

    def _alpha(self) -> np.ndarray:
        return self.alpha

    def _cost_matrices(self, votes: np.ndarray, first: int = 0) -> np.ndarray:
        return logistic_cost_matrices(votes)

    def _learn_costs(self, votes: np.ndarray, omega: np.ndarray) -> np.ndarray:
        # all N + 1 rows: rows 0..N-1 feed the trees, rows 1..N the alpha gradients (eq. (11))
        return logistic_cost_matrices(votes) @ omega

    def _bandit_start(self, decision, correct, weak, alpha, guess) -> tuple | None:
        # with the reward model's guess, for an unrestricted decision: two compiled calls around
        # NumPy's tanh and the costs' product (learners.round_loops.round_start)
        p, k = decision.probabilities, self.n_actions
        if (guess is None or self.estimator != "dr" or self.loss_clip is not None
                or "allowed" in decision.internals or type(p) is not np.ndarray
                or p.dtype != np.float64 or p.shape != (k,) or guess.dtype != np.float64
                or guess.shape != (k,) or weak.dtype != np.int64 or alpha.dtype != np.float64):
            return None
        from learners.round_loops import logistic_costs, round_start

        weight = np.inf if self.hedge_weight is None else self.hedge_weight
        ok, lhat, judged, omega, votes, halves, index = round_start(
            weak, alpha, k, int(decision.internals["yhat"]), int(decision.action), bool(correct),
            p, guess, self.uses_guess(), weight)
        if not ok:
            return None
        costs = logistic_costs(np.tanh(halves, out=halves), index, k) @ omega
        return lhat, lhat if self.hedge_weight is None else judged, votes, costs

    def _expert_weights(self) -> np.ndarray | None:
        # np.exp(log_v - log_v.max()), the same floats, the shift compiled
        log_v = self.log_v
        if not (log_v.dtype == np.float64 and log_v.ndim == 1 and log_v.size):
            return None
        from learners.round_loops import shift_down

        w = np.empty(log_v.size)
        shift_down(log_v, w)
        return np.exp(w, out=w)

    def _choose_expert(self, u: float) -> int:
        w = self._expert_weights()
        if w is not None:
            from learners.round_loops import pick_by_weight

            chosen = pick_by_weight(w, u)
            if chosen >= 0:
                return chosen
        log_v = self.log_v
        w = np.exp(log_v - log_v.max())
        cdf = np.cumsum(w)
        return min(int(np.searchsorted(cdf, u * cdf[-1], side="right")), len(cdf) - 1)

    def _hit_prediction(self, internals: dict) -> int:
        return int(internals["yhat"])  # the Hedge's expert (the reward model's, when chosen)

    def _step_size(self) -> float:
        # eq. 11's eta_t = rho / (k^2 sqrt t) = 1 / (k * (k / rho) * sqrt t): k / rho bounds the
        # estimated losses; with loss_clip, loss_clip bounds them instead
        if self.loss_clip is None:
            return self.current_rho() / (self.n_actions**2 * math.sqrt(self.t))
        return 1.0 / (self.n_actions * self.loss_clip * math.sqrt(self.t))

    def _gradients(self, votes, weak, costs, omega_like) -> np.ndarray:
        """d/d alpha^i of the (estimated) logistic loss at the decision-time weights, eq. 11."""
        grads = costs[1:][self._rows, weak]  # [C(s^i) omega]_{h^i}, s^i = s^{i-1} + alpha^i e_h
        if self.ref_code_gradient:  # the authors' j = h branch: exp(s_l - a - s_h), sign flipped
            prev = votes[:-1]
            top = votes[1:][self._rows, weak]  # s_h + a
            right = 1.0 / (1.0 + np.exp(top[:, None] - prev))  # 1 / (1 + exp(s_h + a - s_l))
            wrong = 1.0 / (1.0 + np.exp(prev - top[:, None]))  # 1 / (1 + exp(s_l - a - s_h))
            right[self._rows, weak] = 0.0
            wrong[self._rows, weak] = 0.0
            grads = grads + omega_like[weak] * (right.sum(axis=1) - wrong.sum(axis=1))
        return grads

    def _judge_weight(self) -> float | None:
        return self.hedge_weight

    def _compiled_update(self, grads, experts, judged) -> bool:
        """:meth:`_update`'s steps after the gradients in one compiled call, the same floats
        (:func:`learners.round_loops.hedge_step`); False where it does not apply (arrays of
        other types or shapes, an expert out of range), nothing changed."""
        alpha, log_v = self.alpha, self.log_v
        if not (isinstance(grads, np.ndarray) and isinstance(judged, np.ndarray)
                and alpha.dtype == log_v.dtype == grads.dtype == judged.dtype == np.float64
                and grads.shape == alpha.shape and judged.ndim == 1
                and experts.dtype == np.int64 and experts.ndim == 1
                and experts.size >= log_v.size):
            return False
        from learners.round_loops import hedge_step

        return hedge_step(log_v, judged, experts, alpha, grads, self._step_size(),
                          self.alpha_min, 2.0)

    def _update(self, votes, weak, experts, lhat, costs, true_label, judged) -> None:
        if forget_pending(self):  # the round's experts are the forgotten trees'
            return
        self.t += 1
        grads = self._gradients(votes, weak, costs, 1.0 - lhat)
        if self._compiled_update(grads, experts, judged):
            return
        np.clip(self.alpha - self._step_size() * grads, self.alpha_min, 2.0, out=self.alpha)
        self.log_v -= judged[experts[: self.log_v.size]]  # the Hedge's experts
        self.log_v -= self.log_v.max()


class AdaBoostOLM(AdaBandit):
    """Adaboost.OLM (Jung et al. 2017), the full-information twin of AdaBandit (authors' code):
    ``rho`` (0 by default) constant, the paper's weights in [-2, 2], eq. 4, no reward model; it
    accepts AdaBandit's keys but the schedule's, the reward model's and AdaBandit's own."""

    full_information = True
    default_weak_prediction = "cost_sensitive"
    default_tree_profile = "full"
    _parameter_constraints: ClassVar[dict[str, list]] = {
        **TEMPLATE_CONSTRAINTS, "rho": FULL_RHO, "ref_code_gradient": [Flag()],
    }
    default_groups: ClassVar[dict[str, Any]] = {
        "exploration": dataclasses.replace(PAPER_EXPLORATION, rho=0.0),
        "weak_learner": WeakLearner(leaf_prediction="mc"),
        "reward_expert": RewardExpert(guess_model="linear", guess_expert=False, hedge_weight=None,
                                      switch_weight=None),
    }

    def __init__(
        self,
        n_actions: int,
        n_learners: int = 20,
        *,
        seed: int | None = None,
        exploration: Exploration | None = None,
        weak_learner: WeakLearner | None = None,
        nominal_attributes: list | None = None,
        estimator: str = "proposed",
        ref_code_gradient: bool = False,
        **flat: Any,
    ):
        super().__init__(
            n_actions, n_learners, seed=seed, exploration=exploration, weak_learner=weak_learner,
            nominal_attributes=nominal_attributes, estimator=estimator,
            alpha_min=PAPER_ALPHA_MIN,  # the authors' Adaboost.OLM
            ref_code_gradient=ref_code_gradient, **flat,
        )
        self.kappa = 5.0 + 15.0 * self._rng.random(self.n_learners)  # U[5, 20] per learner
        self.kappa[0] = 0.0

    def _step_size(self) -> float:
        return 2.0 * math.sqrt(2.0) / ((self.n_actions - 1) * math.sqrt(self.t))

    def _labels_weights(self, costs, u, known_label):
        # costs = C[:, y] per learner, so costs[:, y] is the diagonal entry C[y, y] (negative)
        weights = -self.kappa * costs[:, known_label] / (self.n_actions - 1)
        weights[0] = 5.0
        return np.full(self.n_learners, known_label), np.maximum(weights, 1e-10)
