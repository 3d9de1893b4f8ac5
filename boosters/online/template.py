"""Algorithm 1 of Zhang et al. 2019, the online bandit boosting template of all four boosters.

More: docs/boosters.md, "boosters/online/template.py".
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, ClassVar

import numpy as np

from boosters._params import (
    DRIFT_RESTARTS,
    MAX_ACTIONS,
    MAX_LEARNERS,
    Flag,
    Interval,
    Options,
    Rounds,
    check_choice,
    check_names,
    check_schedule,
    validate_params,
)
from boosters.base import Decision, OnlineBooster, check_context
from boosters.exploration import (
    MISS_REFERENCE,
    check_allowed,
    dr_loss_estimate,
    exploration_distribution,
    explore,
    full_information_loss,
    loss_estimate,
    make_drift,
    mask_scores,
    naive_loss_estimate,
    scheduled_rate,
    track_misses,
)
from boosters.groups import flat_values
from learners.hoeffding import (
    GRACE_BY,
    LEAF_PREDICTIONS,
    TREE_CORES,
    TREE_PROFILES,
    cost_sensitive_trees,
    proba_matrix,
    sample_tree_params,
)
from learners.linear import LinearRewards
from learners.reduction import argmax_random_ties, cost_to_label_weight
from learners.ridge import RidgeRewards

__all__ = [
    "BANDIT_CONSTRAINTS", "ESTIMATORS", "FULL_RHO", "GUESS_MODELS", "TEMPLATE_CONSTRAINTS",
    "WEAK_PREDICTIONS", "BoostingTemplate", "judged_losses", "make_reward_model",
    "model_leads", "record_switch",
]

#: the bandit loss estimates: eq. 4, eq. 3, eq. 4 made doubly robust (docs/boosters.md)
ESTIMATORS = ("proposed", "naive", "dr")
#: the reward models: AdaGrad's logistic regressions, or ridge regressions (docs/boosters.md)
GUESS_MODELS = ("linear", "ridge")
#: the weak learners' labels: App. B.3's argmax, or the twins' cost-sensitive rule
WEAK_PREDICTIONS = ("argmax", "cost_sensitive")
#: per learning round, the forgetting of the doubly robust estimate's hit counts
GUESS_DECAY = 0.998
#: AdaGrad's step of the quadratic expert's reward model (its updates are normalised)
QUADRATIC_RATE = 2.0


def make_reward_model(
    guess_model: str, n_actions: int, nominal_attributes: list | None = None
) -> LinearRewards | RidgeRewards:
    """The reward model ``guess_model`` names (one of ``GUESS_MODELS``) for ``n_actions``.

    >>> type(make_reward_model("ridge", 3)).__name__
    'RidgeRewards'
    """
    guess_model = check_choice("guess_model", guess_model, GUESS_MODELS)
    model = RidgeRewards if guess_model == "ridge" else LinearRewards
    return model(n_actions, nominal_attributes=nominal_attributes)


def judged_losses(decision: Decision, correct: bool, guess: np.ndarray, max_weight: float):
    """The loss vector experts are judged by: the reward model's doubly robust estimate
    (``guess``: its estimates before the round) with importance weights clipped at
    ``max_weight``, for an unrestricted decision (docs/boosters.md, "The Hedge's losses")."""
    yhat, p = int(decision.internals["yhat"]), decision.probabilities
    return dr_loss_estimate(yhat, decision.action, correct, p, 1.0 - guess, max_weight)


def record_switch(switch_losses: np.ndarray, losses: np.ndarray) -> None:
    """Add a round's ``losses`` of [the booster's own prediction, the reward model's best
    action] to a switch's sums, the earlier ones faded by ``GUESS_DECAY``."""
    switch_losses *= GUESS_DECAY
    switch_losses += losses


def model_leads(switch_losses: np.ndarray) -> bool:
    """The switch's rule: the reward model plays while its summed losses are strictly below
    the booster's own (a tie is no lead)."""
    return bool(switch_losses[1] < switch_losses[0])


#: the declarations every booster of Algorithm 1 shares (:func:`boosters._params.validate_params`)
TEMPLATE_CONSTRAINTS: dict[str, list] = {
    "n_actions": [Interval(int, 2, MAX_ACTIONS, bound="MAX_ACTIONS")],
    "n_learners": [Interval(int, 1, MAX_LEARNERS, bound="MAX_LEARNERS")],
    "seed": [None, Interval(int, 0, None)],
    "nominal_attributes": [None, list, tuple],
    "estimator": [Options(ESTIMATORS)],
    # Exploration
    "rho": [Interval(float, 0.0, 1.0, closed="neither")],
    # WeakLearner
    "tree_profile": [None, Options(tuple(TREE_PROFILES))],
    "fixed_trees": [Flag()],
    "fast_trees": [Flag()],
    "tree_core": [Options(TREE_CORES)],
    "grace_by": [Options(GRACE_BY)],
    "leaf_prediction": [Options(LEAF_PREDICTIONS)],
    "weak_prediction": [None, Options(WEAK_PREDICTIONS)],
    "clip": [Interval(float, 0.0, None, closed="right")],
    "weight_scale": [Interval(float, 0.0, None, closed="right")],
    "reduction_order": [Options(("reference", "paper"))],
}
#: the bandit boosters' further declarations: the schedule, the reward model
BANDIT_CONSTRAINTS: dict[str, list] = {
    "rho_decay": [None, Rounds()],
    "rho_floor": [Interval(float, 0.0, 1.0, closed="neither")],
    "rho_min": [None, Interval(float, 0.0, 1.0, closed="right")],
    "rho_by_misses": [Flag()],
    "drift_restart": [None, Options(DRIFT_RESTARTS)],
    "guess_model": [Options(GUESS_MODELS)],
    "guess_expert": [None, Flag()],
}
#: a full-information twin explores with ``rho`` in [0, 1)
FULL_RHO = [Interval(float, 0.0, 1.0, closed="left")]


class BoostingTemplate(OnlineBooster):
    """Common machinery of BanditBBM, AdaBandit, OnlineMBBM and Adaboost.OLM (Algorithm 1).

    A subclass's constructor takes ``n_actions``, ``n_learners``, ``seed``, its groups
    (:mod:`boosters.groups`: ``exploration``, ``weak_learner``, ``reward_expert``; None: its
    ``default_groups``), a few keywords of its own and, for stored configs and earlier callers,
    the groups' fields as flat keywords (:func:`boosters.groups.regroup`); every value is
    checked against its ``_parameter_constraints``. What a booster pickled before an option
    existed reads for it: :data:`boosters._migrations.MIGRATIONS`.
    """

    #: "argmax" (App. B.3, the bandit boosters) or "cost_sensitive" (authors' code, the twins).
    default_weak_prediction = "argmax"
    default_tree_profile = "bandit"
    _parameter_constraints: ClassVar[dict[str, list]] = TEMPLATE_CONSTRAINTS
    default_groups: ClassVar[dict[str, Any]] = {}

    def __init__(
        self,
        n_actions: int,
        n_learners: int,
        seed: int | None,
        groups: dict[str, Any],
        *,
        nominal_attributes: list | None,
        estimator: str,
        own: dict[str, Any],
    ):
        """``groups``: the subclass's groups (:func:`boosters.groups.regroup`); ``own``: its own
        keywords, checked here with the rest; the groups' fields a class does not declare keep
        their defaults: the twins' constant rate and their lack of a reward model."""
        declared = type(self)._parameter_constraints
        values = {"n_actions": n_actions, "n_learners": n_learners, "seed": seed,
                  "nominal_attributes": nominal_attributes, "estimator": estimator,
                  **flat_values(groups, declared), **own}
        validate_params(values, declared)
        explore, weak = groups["exploration"], groups["weak_learner"]
        reward = groups["reward_expert"]
        self.n_actions, self.n_learners = int(n_actions), int(n_learners)
        self.rho = float(explore.rho)
        self.rho_decay, self.rho_floor, self.rho_min = check_schedule(
            explore.rho_decay, explore.rho_floor, explore.rho_min
        )
        self.rho_by_misses, self.miss_rate = bool(explore.rho_by_misses), MISS_REFERENCE
        self.drift_restart = explore.drift_restart
        self.miss_drift = make_drift(self.drift_restart)
        self.seed = seed
        self.tree_profile = weak.tree_profile or self.default_tree_profile
        self.fixed_trees, self.fast_trees = bool(weak.fixed_trees), bool(weak.fast_trees)
        self.nominal_attributes = check_names("nominal_attributes", nominal_attributes)
        self.clip, self.weight_scale = float(weak.clip), float(weak.weight_scale)
        self.reduction_order, self.estimator = weak.reduction_order, estimator
        loss_clip = own.get("loss_clip")
        self.loss_clip = None if loss_clip is None else float(loss_clip)
        self.weak_prediction = weak.weak_prediction or self.default_weak_prediction
        self.leaf_prediction, self.tree_core = weak.leaf_prediction, weak.tree_core
        self.grace_by = weak.grace_by
        self._rng = np.random.default_rng(seed)
        self._new_trees()
        self._rows = np.arange(self.n_learners)
        self.guess_model = reward.guess_model
        self._init_reward_models(reward.guess_expert, reward.quadratic_expert)
        self.n_decisions = self.n_updates = 0

    def _new_trees(self) -> None:
        """The N trees, untrained, their hyperparameters drawn from the generator (at creation,
        and when a ``drift_restart`` forgets: :func:`boosters.online.adabandit.forget_trees`)."""
        params = [sample_tree_params(self.tree_profile, self._rng, fixed=self.fixed_trees)
                  for _ in range(self.n_learners)]
        self.forest, self.learners = cost_sensitive_trees(
            self.tree_core, self.n_actions, params, self.nominal_attributes,
            self.leaf_prediction, self.fast_trees, self.grace_by)
        self._trees = [wl.tree for wl in self.learners]

    def _init_reward_models(self, guess_expert: bool | None, quadratic_expert: bool) -> None:
        """The doubly robust estimate's reward model (``estimator="dr"``), and the reward models
        that are experts ("The reward models as experts" in docs/boosters.md)."""
        self.reward_model = self.guess_hits = self.quadratic_model = None
        if self.estimator == "dr":
            self.reward_model = make_reward_model(
                self.guess_model, self.n_actions, self.nominal_attributes
            )
            #: importance-weighted hits of [the prediction, the reward model's best action]
            self.guess_hits = np.zeros(2)
        # None: an expert whenever there is a reward model
        has_model = self.reward_model is not None
        self.guess_expert = has_model if guess_expert is None else bool(guess_expert)
        self.quadratic_expert = bool(quadratic_expert)
        if (self.guess_expert or self.quadratic_expert) and not has_model:
            raise ValueError('guess_expert and quadratic_expert need estimator="dr"')
        if self.quadratic_expert:  # a second reward model, only an expert
            self.quadratic_model = LinearRewards(
                self.n_actions, learning_rate=QUADRATIC_RATE, quadratic=True, normalized=True,
                nominal_attributes=self.nominal_attributes,
            )

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
        """Index of the expert whose label is played (0-based): the vote of all N learners, or
        with ``guess_expert`` the reward model's while its hits lead (:meth:`uses_guess`, a
        strict lead)."""
        return self.n_learners if self._guess_leads() else self.n_learners - 1

    def _guess_leads(self) -> bool:
        """Whether the reward model's expert plays by the switch: a strict lead of its hits."""
        return self.guess_expert and self._guess_ahead()

    def _guess_ahead(self) -> bool:
        """The one lead rule of the switch and :meth:`uses_guess`: the reward model's hits
        strictly above the booster's (a tie is no lead)."""
        assert self.guess_hits is not None  # kept with the reward model (guess_expert needs it)
        return bool(self.guess_hits[1] > self.guess_hits[0])

    def _experts(self, x: dict, votes: np.ndarray, allowed, u: np.ndarray) -> np.ndarray:
        """The experts' labels: row ``i`` is the argmax of ``s^{i+1}`` among the allowed
        actions (random ties by ``u`` (N, k)); with ``guess_expert`` one more, the reward
        model's best allowed action (docs/boosters.md, "The reward models as experts")."""
        n = self.n_learners
        experts = argmax_random_ties(mask_scores(votes[1:], allowed), u[:n])
        scores = self._model_scores(x, allowed)
        if scores is None:
            return experts
        return np.concatenate((experts, argmax_random_ties(scores, u[n:])))

    def _compiled_decision(self, x: dict, u: np.ndarray, alpha: np.ndarray) -> tuple | None:
        """``(weak, experts, chosen)`` of an unrestricted decision (:meth:`_weak_predictions`,
        :meth:`_votes`, :meth:`_experts`, :meth:`_choose_expert`) in one compiled call, the same
        labels (:func:`learners.round_loops.decision_steps`); None where that does not apply
        (River's trees, the cost-sensitive rule, a choice without :meth:`_expert_weights`)."""
        if (self.forest is None or self.weak_prediction != "argmax"
                or alpha.dtype != np.float64 or alpha.shape != (self.n_learners,)):
            return None
        weights = self._expert_weights()  # after the checks: the twins' rule decides by steps
        if weights is None:
            return None
        from learners.round_loops import decision_steps

        proba = self.tree_proba(x)
        scores = self._model_scores(x, None)
        scores = np.zeros((0, self.n_actions)) if scores is None else scores.astype(float)
        weak, experts, chosen = decision_steps(proba, u, alpha, scores, weights)
        return weak, experts, self._choose_expert(u[-2]) if chosen < 0 else int(chosen)

    def _expert_weights(self) -> np.ndarray | None:
        """The weights :meth:`_choose_expert` draws the played expert by, for the compiled
        decision; None: it draws otherwise (the template's switch)."""
        return None

    def _model_scores(self, x: dict, allowed) -> np.ndarray | None:
        """Rows of :meth:`expert_models`' estimates for ``x``, the excluded actions at ``-inf``
        (None without such models)."""
        models = self.expert_models()
        if not models:
            return None
        scores = [m.predict_one(x) for m in models]  # fresh arrays: one is a row as it is
        return mask_scores(scores[0][None] if len(scores) == 1 else np.stack(scores), allowed)

    def expert_models(self) -> list[LinearRewards | RidgeRewards]:
        """The reward models whose best actions are experts after the N of the trees: the
        reward model with ``guess_expert``, then the quadratic one with ``quadratic_expert``."""
        models: list[LinearRewards | RidgeRewards] = []
        if self.guess_expert:
            assert self.reward_model is not None  # guess_expert needs estimator="dr"
            models = [self.reward_model]
        return models if self.quadratic_model is None else [*models, self.quadratic_model]

    def _extra_draws(self) -> int:
        """Uniform draws a decision needs beyond Algorithm 1's ``2 N k + 2``."""
        return self.n_actions * len(self.expert_models())

    def _hit_prediction(self, internals: dict) -> int:
        """The booster's own prediction that :meth:`uses_guess` compares with the reward model's:
        the vote of all N learners."""
        return int(internals["experts"][self.n_learners - 1])

    def current_rho(self) -> float:
        """The next decision's rate (:func:`boosters.exploration.scheduled_rate`)."""
        return scheduled_rate(self)

    def _learn_costs(self, votes: np.ndarray, omega: np.ndarray) -> np.ndarray:
        """Rows ``i = 0..N-1``: learner ``i``'s estimated cost vector ``C^i omega`` (eq. 5).

        A subclass may return one extra row (``C(s^N) omega``) for its own update.
        """
        return self._cost_matrices(votes[:-1]) @ omega

    def _bandit_start(self, decision, correct, weak, alpha, guess) -> tuple | None:
        """A bandit round's ``(lhat, judged, votes, costs)`` (:meth:`loss_vector`,
        :meth:`_expert_losses`, :meth:`_votes`, :meth:`_learn_costs`) in fewer calls, the same
        floats; None: those methods make them (the default; a subclass that changes one of them
        changes this too)."""
        return None

    def _update(self, votes, weak, experts, lhat, costs, true_label, judged) -> None:
        """Booster state update after the weak learners learned (alpha, Hedge); ``judged``: the
        loss vector the experts are judged by (:meth:`_expert_losses`)."""

    def _judge_weight(self) -> float | None:
        """The clip of the importance weights the experts are judged with (AdaBandit's
        ``hedge_weight``, BanditBBM's ``switch_weight``); None: the trees' own estimate."""
        return None

    def _expert_losses(self, decision: Decision, correct: bool, lhat, guess) -> np.ndarray:
        """The loss vector the experts are judged by: with :meth:`_judge_weight`, the doubly
        robust estimate from the reward model's guess with its importance weights clipped at it
        (docs/boosters.md, "The Hedge's losses"), for an unrestricted decision; else the trees'
        own estimate (the paper's)."""
        weight = self._judge_weight()
        if weight is None or guess is None or "allowed" in decision.internals:
            return lhat
        return judged_losses(decision, correct, guess, weight)

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
        if (weak.dtype == np.int64 and alpha.dtype == np.float64
                and weak.shape == alpha.shape == (self.n_learners,)):
            from learners.round_loops import prefix_votes  # the same floats in one call

            votes = prefix_votes(weak, alpha, self.n_actions)
            if votes is not None:
                return votes
        votes = np.zeros((self.n_learners + 1, self.n_actions), dtype=alpha.dtype)
        votes[self._rows + 1, weak] = alpha
        np.cumsum(votes, axis=0, out=votes)
        return votes

    def tree_proba(self, x: dict) -> np.ndarray:
        """The trees' class probabilities for ``x`` (N, k); an untrained tree's row is zeros."""
        if self.forest is not None:
            return self.forest.predict_proba(self.forest.transform(x))
        return proba_matrix(self._trees, x, self.n_actions)

    def _weak_predictions(self, x: dict, u: np.ndarray, alpha: np.ndarray) -> np.ndarray:
        """Each learner's label; ``u`` (N, k) are the uniform draws for random ties."""
        k = self.n_actions
        if self.weak_prediction == "argmax":  # App. B.3: argmax of the tree's class distribution
            return argmax_random_ties(self.tree_proba(x), u)
        # cost-sensitive rule of the twins (authors' code): h^i = argmin_l sum_r P(r | x) C^i[l, r]
        weak = np.empty(self.n_learners, dtype=np.int64)
        s = np.zeros((1, k), dtype=alpha.dtype)
        for i, proba in enumerate(self._learner_probas(x)):
            expected = self._cost_matrices(s, first=i)[0] @ proba
            weak[i] = argmax_random_ties(-expected[None, :], u[i : i + 1])[0]
            s[0, weak[i]] += alpha[i]
        return weak

    def __setstate__(self, state: dict) -> None:
        """Restore a pickled booster: a model saved before the compiled core (River's trees, no
        ``tree_core`` of its own) moves its trees into one (:mod:`learners.migrate`)."""
        super().__setstate__(state)  # the defaults of boosters._migrations first
        if "tree_core" not in state and self.learners:
            from learners.migrate import ensemble_from_river

            self.forest = ensemble_from_river(
                self.learners, self.n_actions, self.nominal_attributes, self.leaf_prediction
            )
            self.tree_core, self.learners, self._trees = "compiled", [], []

    def _learner_probas(self, x: dict):
        """Each learner's class probabilities, uniform while untrained (the twins' rule)."""
        if self.forest is None:
            return [wl.predict_proba(x) for wl in self.learners]
        proba = self.tree_proba(x)
        proba[~self.forest.trained()] = 1.0 / self.n_actions
        return proba

    def decide_one(
        self,
        x: dict,
        *,
        allowed: np.ndarray | Sequence[int] | None = None,
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
        u = (self._rng if rng is None else rng).random(2 * n * k + 2 + self._extra_draws())
        alpha = self._alpha()
        steps = None if allowed is not None else self._compiled_decision(x, u, alpha)
        if steps is None:
            weak = self._weak_predictions(x, u[: n * k].reshape(n, k), alpha)
            votes = self._votes(weak, alpha)
            experts = self._experts(x, votes, allowed, u[n * k : -2].reshape(-1, k))
            chosen = self._choose_expert(u[-2])
        else:
            weak, experts, chosen = steps
        yhat = int(experts[chosen])
        rho = self.current_rho()
        p = exploration_distribution(yhat, k, rho, allowed)
        # eq. 2 draw: keep yhat w.p. 1 - rho, else a uniform label among the other allowed ones
        action = explore(yhat, k, rho, u[-1], allowed)
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
        self,
        decision: Decision,
        correct: bool,
        label: int | None = None,
        x: dict | None = None,
        guess: np.ndarray | None = None,
    ) -> np.ndarray:
        """The loss vector learning uses: the true ``1 - e_y`` with a ``label``, else the
        estimate (eq. 4, eq. 3 with ``estimator="naive"``, eq. 4 made doubly robust with
        ``estimator="dr"`` and the context ``x``) from the decision's logged prediction, played
        action, probabilities and, for a restricted decision, allowed actions
        (:mod:`boosters.exploration`, "Restricted decisions": every allowed coordinate is
        unbiased, and the whole vector whenever the true label is allowed; a restricted
        decision gets eq. 4 under ``"dr"`` too; ``guess``: the reward model's estimates for
        ``x`` when already at hand). With ``loss_clip`` every coordinate is clipped to
        ``[1 - loss_clip, loss_clip]``."""
        if label is not None:  # full information: the true loss vector (eq. 1)
            return full_information_loss(label, self.n_actions)
        internals = decision.internals
        allowed = internals.get("allowed")
        if allowed is not None:
            allowed = np.asarray(allowed, dtype=np.int64)
        p = decision.probabilities
        yhat = int(internals["yhat"])
        if self.estimator == "naive":
            lhat = naive_loss_estimate(decision.action, correct, p, allowed)
        elif x is None or allowed is not None or not self.uses_guess():
            lhat = loss_estimate(yhat, decision.action, correct, p, allowed)
        else:
            assert self.reward_model is not None  # uses_guess(): estimator="dr"
            guess = self.reward_model.predict_one(x) if guess is None else guess
            lhat = dr_loss_estimate(yhat, decision.action, correct, p, 1.0 - guess)
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
        if weak.shape != (self.n_learners,) or alpha.shape != (self.n_learners,):
            raise ValueError("decision internals do not match this booster's learners")
        experts = self._logged_experts(x, internals)
        # the reward model's estimates, read once: it learns only in the last step
        guess = None if self.reward_model is None else self.reward_model.predict_one(x)
        start = None if label is not None else self._bandit_start(decision, correct, weak, alpha,
                                                                  guess)
        if start is None:
            lhat = self.loss_vector(decision, correct, known if label is not None else None, x,
                                    guess)
            votes = self._votes(weak, alpha)
            costs = self._learn_costs(votes, 1.0 - lhat)
            judged = None
        else:
            lhat, judged, votes, costs = start
        labels, weights = self._labels_weights(
            costs[: self.n_learners], self._rng.random((self.n_learners, self.n_actions)), known
        )
        if self.forest is not None:  # one compiled call teaches every tree
            self.forest.learn(self.forest.transform(x, learn=True), labels, weights)
            yield
        else:
            for tree, lab, w in zip(self._trees, labels.tolist(), weights.tolist()):
                tree.learn_one(x, lab, w=w)
                yield
        self.n_updates += 1
        track_misses(self, decision, correct, known if label is not None else None)
        if judged is None:
            judged = self._expert_losses(decision, correct, lhat, guess) if label is None else lhat
        self._update(votes, weak, experts, lhat, costs, known, judged)
        if self.reward_model is not None:
            # the label only when given: a hit's label would teach the reward model every action
            self._learn_guess(x, decision, correct, known if label is not None else None, guess)

    def _logged_experts(self, x: dict, internals: dict) -> np.ndarray:
        """The decision's experts, checked before anything learns: the N of the trees, then one
        per reward model of :meth:`expert_models`. A decision logged without the reward models'
        experts (before the option, or by a model without them) gets them from the models as
        they are now, so a replayed log still teaches the Hedge."""
        experts = np.asarray(internals["experts"], dtype=np.int64).reshape(-1)
        n_models = len(self.expert_models())
        if experts.size == self.n_learners and n_models:
            allowed = internals.get("allowed")
            allowed = None if allowed is None else np.asarray(allowed, dtype=np.int64)
            scores = self._model_scores(x, allowed)
            assert scores is not None  # n_models > 0
            experts = np.append(experts, scores.argmax(axis=1))
        if experts.size < self.n_learners + n_models:
            raise ValueError("decision internals do not match this booster's experts")
        return experts

    def uses_guess(self) -> bool:
        """Whether the loss estimate uses the reward model's guess now (``estimator="dr"``):
        before any hit is counted, then while its best action has been right strictly more
        often than the booster's prediction. A tie is eq. 4: a prediction that copies the guess
        (as the doubly robust estimate teaches the trees to) ties with it however wrong both
        are (docs/boosters.md, "Doubly robust estimates")."""
        if self.reward_model is None:
            return False
        assert self.guess_hits is not None  # kept with the reward model
        return self._guess_ahead() or not self.guess_hits.any()

    def _learn_guess(self, x: dict, decision: Decision, correct: bool, known, guess) -> None:
        """After a round: the hit counts of :meth:`uses_guess`, then the reward model (``guess``:
        its estimates for ``x`` before this round; ``known``: the label only when given, so a
        bandit round teaches the ridge model the played action alone). A correct round reveals
        the label; weighted by ``1 / p`` of the played action, its hits estimate each rule's
        accuracy without bias (restricted decisions are not counted)."""
        # called with a reward model only; the hit counts are kept with it
        assert self.reward_model is not None and self.guess_hits is not None
        self.guess_hits *= GUESS_DECAY
        action = decision.action
        if correct and decision.internals.get("allowed") is None:
            best = int(guess.argmax())
            hits = [self._hit_prediction(decision.internals) == action, best == action]
            self.guess_hits += np.asarray(hits) / decision.probabilities[action]
        self.reward_model.learn_one(x, action, correct, known)
        if self.quadratic_model is not None:
            self.quadratic_model.learn_one(x, action, correct, known)
