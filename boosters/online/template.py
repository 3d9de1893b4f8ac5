"""Algorithm 1 of Zhang et al. 2019, the online bandit boosting template of all four boosters.

More: docs/boosters.md, "boosters/online/template.py".
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from boosters._params import check_choice, check_int, check_names, check_real, check_rho
from boosters.base import Decision, OnlineBooster, check_context
from boosters.exploration import (
    check_allowed,
    exploration_distribution,
    explore,
    full_information_loss,
    loss_estimate,
    mask_scores,
    naive_loss_estimate,
)
from learners.hoeffding import (
    LEAF_PREDICTIONS,
    TREE_PROFILES,
    CostSensitiveTree,
    proba_matrix,
    sample_tree_params,
)
from learners.reduction import argmax_random_ties, cost_to_label_weight

__all__ = ["BoostingTemplate"]


class BoostingTemplate(OnlineBooster):
    """Common machinery of BanditBBM, AdaBandit, OnlineMBBM and Adaboost.OLM (Algorithm 1)."""

    #: "argmax" (App. B.3, the bandit boosters) or "cost_sensitive" (authors' code, the twins).
    default_weak_prediction = "argmax"
    default_tree_profile = "bandit"
    #: the paper's unclipped estimate; also what a model pickled before the option existed reads
    loss_clip = None
    #: the trees' leaves; also what a model pickled before the option existed reads
    leaf_prediction = "mc"

    def __init__(
        self,
        n_actions: int,
        n_learners: int = 20,
        rho: float = 0.1,
        seed: int | None = None,
        tree_profile: str | None = None,
        fixed_trees: bool = False,
        nominal_attributes: list | None = None,
        clip: float = 100.0,
        weight_scale: float = 1.0,
        reduction_order: str = "reference",
        estimator: str = "proposed",
        weak_prediction: str | None = None,
        fast_trees: bool = True,
        loss_clip: float | None = None,
        leaf_prediction: str = "mc",
    ):
        self.n_actions = check_int("n_actions", n_actions, 2)
        self.n_learners = check_int("n_learners", n_learners, 1)
        self.rho = check_rho(rho, self.full_information)
        self.seed = seed
        self.tree_profile = check_choice(
            "tree_profile", tree_profile or self.default_tree_profile, tuple(TREE_PROFILES)
        )
        self.fixed_trees = bool(fixed_trees)
        self.nominal_attributes = check_names("nominal_attributes", nominal_attributes)
        self.clip = check_real("clip", clip, 0.0, np.inf, open_low=True)
        self.weight_scale = check_real("weight_scale", weight_scale, 0.0, np.inf, open_low=True)
        self.reduction_order = check_choice(
            "reduction_order", reduction_order, ("reference", "paper")
        )
        self.estimator = check_choice("estimator", estimator, ("proposed", "naive"))
        self.loss_clip = (
            None if loss_clip is None else check_real("loss_clip", loss_clip, 1.0, np.inf)
        )
        self.weak_prediction = check_choice(
            "weak_prediction", weak_prediction or self.default_weak_prediction,
            ("argmax", "cost_sensitive"),
        )

        self.fast_trees = bool(fast_trees)
        self.leaf_prediction = check_choice("leaf_prediction", leaf_prediction, LEAF_PREDICTIONS)
        self._rng = np.random.default_rng(seed)
        self.learners = [
            CostSensitiveTree(
                self.n_actions,
                nominal_attributes=self.nominal_attributes,
                fast_trees=self.fast_trees,
                leaf_prediction=self.leaf_prediction,
                **sample_tree_params(self.tree_profile, self._rng, fixed=self.fixed_trees),
            )
            for _ in range(self.n_learners)
        ]
        self._trees = [wl.tree for wl in self.learners]
        self._rows = np.arange(self.n_learners)
        self.n_decisions = 0
        self.n_updates = 0

    # ---- hooks for the subclasses -------------------------------------------------------------

    def _alpha(self) -> np.ndarray:
        """Current learner weights (N,)."""
        raise NotImplementedError

    def _cost_matrices(self, votes: np.ndarray, first: int = 0) -> np.ndarray:
        """Cost matrices (M, k, k) for the vote vectors ``votes`` (M, k) = ``s^{first..first+M-1}``.

        ``votes[m]`` is ``s^{first + m}``: the votes before learner ``first + m`` (0-based) adds
        its own, so it is the state that learner's cost matrix is built from.
        """
        raise NotImplementedError

    def _choose_expert(self, u: float) -> int:
        """Index of the expert whose label is played (0-based)."""
        return self.n_learners - 1

    def _learn_costs(self, votes: np.ndarray, omega: np.ndarray) -> np.ndarray:
        """Rows ``i = 0..N-1``: learner ``i``'s estimated cost vector ``C^i omega`` (eq. 5).

        A subclass may return one extra row (``C(s^N) omega``) for its own update.
        """
        return self._cost_matrices(votes[:-1]) @ omega

    def _update(self, votes, weak, experts, lhat, costs, true_label) -> None:
        """Booster state update after the weak learners learned (alpha, Hedge)."""

    def _labels_weights(self, costs, u, known_label):
        """(label, weight) per learner from the estimated costs (N, k); App. B.3."""
        return cost_to_label_weight(
            costs,
            u,
            known_label,
            clip=self.clip,
            decimals=2,
            scale=self.weight_scale,
            order=self.reduction_order,
        )

    # ---- protocol -----------------------------------------------------------------------------

    def _votes(self, weak: np.ndarray, alpha: np.ndarray) -> np.ndarray:
        """``S`` (N + 1, k): row ``i`` is ``s^i``, the votes of the first ``i`` learners."""
        votes = np.zeros((self.n_learners + 1, self.n_actions), dtype=alpha.dtype)
        votes[self._rows + 1, weak] = alpha
        np.cumsum(votes, axis=0, out=votes)
        return votes

    def _weak_predictions(self, x: dict, u: np.ndarray, alpha: np.ndarray) -> np.ndarray:
        """Each learner's label; ``u`` (N, k) are the uniform draws for random ties."""
        k = self.n_actions
        if self.weak_prediction == "argmax":  # App. B.3: argmax of the tree's class distribution
            return argmax_random_ties(proba_matrix(self._trees, x, k), u)
        # cost-sensitive rule of the twins (authors' code): h^i = argmin_l sum_r P(r | x) C^i[l, r]
        weak = np.empty(self.n_learners, dtype=np.int64)
        s = np.zeros((1, k), dtype=alpha.dtype)
        for i, wl in enumerate(self.learners):
            expected = self._cost_matrices(s, first=i)[0] @ wl.predict_proba(x)
            weak[i] = argmax_random_ties(-expected[None, :], u[i : i + 1])[0]
            s[0, weak[i]] += alpha[i]
        return weak

    def decide_one(
        self,
        x: dict,
        *,
        allowed: Sequence[int] | None = None,
        rng: np.random.Generator | None = None,
    ) -> Decision:
        """Steps 1-6 of Algorithm 1: weak labels, expert votes, expert choice, eq. 2 exploration.

        ``allowed``: the actions that may be played (``None``: all); the experts' labels are
        their argmax among them and eq. 2 runs over them (docs/boosters.md,
        "boosters/online/template.py"). ``rng``: the generator of this decision's draws instead of
        the booster's own; the booster is then only read (its generator and ``n_decisions`` do not
        move).
        """
        check_context(x)
        n, k = self.n_learners, self.n_actions
        allowed = check_allowed(allowed, k)
        u = (self._rng if rng is None else rng).random(2 * n * k + 2)
        alpha = self._alpha()
        weak = self._weak_predictions(x, u[: n * k].reshape(n, k), alpha)
        votes = self._votes(weak, alpha)
        experts = argmax_random_ties(
            mask_scores(votes[1:], allowed), u[n * k : 2 * n * k].reshape(n, k)
        )
        chosen = self._choose_expert(u[-2])
        yhat = int(experts[chosen])
        p = exploration_distribution(yhat, k, self.rho, allowed)
        # eq. 2 draw: keep yhat w.p. 1 - rho, else a uniform label among the other allowed ones
        action = explore(yhat, k, self.rho, u[-1], allowed)
        if rng is None:
            self.n_decisions += 1
        internals = {
            "weak": weak,
            "experts": experts,
            "expert": chosen,
            "yhat": yhat,
            "alpha": alpha.copy(),
        }
        if allowed is not None:
            internals["allowed"] = allowed
        return Decision(action=action, probabilities=p, internals=internals)

    def loss_vector(
        self, decision: Decision, correct: bool, label: int | None = None
    ) -> np.ndarray:
        """The loss vector learning uses: the true ``1 - e_y`` with a ``label``, else the
        estimate (eq. 4, or eq. 3 with ``estimator="naive"``) from the decision's logged
        prediction, played action, probabilities and, for a restricted decision, allowed
        actions (:mod:`boosters.exploration`, "Restricted decisions": every allowed coordinate
        is unbiased, and the whole vector whenever the true label is allowed). With
        ``loss_clip`` every coordinate is clipped to ``[1 - loss_clip, loss_clip]``."""
        if label is not None:  # full information: the true loss vector (eq. 1)
            return full_information_loss(label, self.n_actions)
        internals = decision.internals
        allowed = internals.get("allowed")
        if allowed is not None:
            allowed = np.asarray(allowed, dtype=np.int64)
        p = decision.probabilities
        if self.estimator == "proposed":
            lhat = loss_estimate(int(internals["yhat"]), decision.action, correct, p, allowed)
        else:
            lhat = naive_loss_estimate(decision.action, correct, p, allowed)
        if self.loss_clip is not None:  # clipped importance weights (docs: "Many actions")
            np.clip(lhat, 1.0 - self.loss_clip, self.loss_clip, out=lhat)
        return lhat

    def learn_one(
        self, x: dict, decision: Decision, reward: float | None = None, label: int | None = None
    ) -> None:
        """Steps 7-12 of Algorithm 1 from a reward in [0, 1] or the true label."""
        for _ in self.learn_steps(x, decision, reward=reward, label=label):
            pass

    def learn_steps(
        self, x: dict, decision: Decision, reward: float | None = None, label: int | None = None
    ) -> Iterator[None]:
        """:meth:`learn_one` with a step after each weak learner's update (see the base class).

        Everything is validated and every random number drawn before the first tree changes;
        the ensemble's weights change in the last step.
        """
        check_context(x)
        correct, known = self._feedback(decision, reward, label)
        internals = decision.internals
        weak = np.asarray(internals["weak"], dtype=np.int64)
        alpha = np.asarray(internals["alpha"])
        experts = np.asarray(internals["experts"], dtype=np.int64)
        if weak.shape != (self.n_learners,) or alpha.shape != (self.n_learners,):
            raise ValueError("decision internals do not match this booster's learners")

        lhat = self.loss_vector(decision, correct, known if label is not None else None)
        omega = 1.0 - lhat

        votes = self._votes(weak, alpha)
        costs = self._learn_costs(votes, omega)
        labels, weights = self._labels_weights(
            costs[: self.n_learners], self._rng.random((self.n_learners, self.n_actions)), known
        )
        for tree, lab, w in zip(self._trees, labels.tolist(), weights.tolist()):
            tree.learn_one(x, lab, w=w)
            yield
        self.n_updates += 1
        self._update(votes, weak, experts, lhat, costs, known)
