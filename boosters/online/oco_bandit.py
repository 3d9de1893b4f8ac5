"""Multiclass contextual-bandit form of the online agnostic OCO booster (one-vs-all).

More: docs/boosters.md, "boosters/online/oco_bandit.py".

>>> booster = OCOBandit(n_actions=3, n_learners=4, rho=0.1, seed=0)
>>> d = booster.decide_one({"f": "a"})
>>> d.internals["weak"].shape, d.probabilities.round(3).tolist()
((3, 4), [0.05, 0.9, 0.05])
>>> booster.learn_one({"f": "a"}, d, reward=1.0)
>>> booster.n_updates
1
"""

from __future__ import annotations

import dataclasses
import numbers
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from boosters._params import (
    Flag,
    HasMethods,
    Interval,
    Options,
    check_schedule,
    validate_params,
)
from boosters.base import (
    Decision,
    OnlineBooster,
    check_context,
    resolve_feedback,
    validate_feedback,
)
from boosters.exploration import (
    MISS_REFERENCE,
    check_allowed,
    exploration_distribution,
    explore,
    forget_pending,
    full_information_loss,
    make_drift,
    mask_scores,
    scheduled_rate,
    track_misses,
)
from boosters.groups import (
    PAPER_EXPLORATION,
    Exploration,
    RewardExpert,
    WeakLearner,
    flat_values,
    regroup,
)
from boosters.online.oco import OCOParams, OnlineConvexOptimizer, oco_labels
from boosters.online.template import (
    BANDIT_CONSTRAINTS,
    FULL_RHO,
    GUESS_MODELS,
    TEMPLATE_CONSTRAINTS,
    judged_losses,
    make_reward_model,
    model_leads,
    record_switch,
)
from learners.binary import signs_random_ties
from learners.reduction import argmax_random_ties

__all__ = ["OCOBandit", "OCOFull", "rounding_probability", "weighted_label"]

UPDATES = ("weighted", "rounding")
#: the fields of :class:`boosters.groups.WeakLearner` the one-vs-all trees use
OCO_TREE_FIELDS = ("tree_profile", "fixed_trees", "fast_trees", "leaf_prediction", "tree_core")


def rounding_probability(reward: float, propensity: float, pi_min: float) -> float:
    """CB-R: probability of the pseudo-label +1 for the played arm (docs/papers.md).

    ``1/2 + pi_min (r - 1/2) / pi(a)``, in [0, 1] because ``pi_min <= pi(a)``.

    >>> rounding_probability(1.0, 0.5, 0.25), rounding_probability(0.0, 0.25, 0.25)
    (0.75, 0.0)
    """
    return 0.5 + pi_min * (reward - 0.5) / propensity


def weighted_label(
    reward: float, propensity: float, baseline: float = 0.5, max_weight: float | None = None
) -> tuple[int, float]:
    """CB-W: ``(sign(r - b), |r - b| / pi(a))`` for the played arm (weight <= ``max_weight``).

    >>> weighted_label(1.0, 0.25), weighted_label(0.0, 0.25, max_weight=1.0)
    ((1, 2.0), (-1, 1.0))
    """
    label = 1 if reward >= baseline else -1
    weight = abs(reward - baseline) / propensity
    if max_weight is not None and weight > max_weight:
        weight = max_weight
    return label, weight


def _is_index(value) -> bool:
    """Whether ``value`` is an integer that may index an action (a bool is not)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


class OCOBandit(OCOParams, OnlineBooster):
    """One-vs-all OCO boosters with eq.-2 exploration and bandit updates (the project's extension).

    Parameters
    ----------
    n_actions
        k >= 2 actions; one binary booster each.
    n_learners
        N Hoeffding trees per action (k N trees in all; a decision asks all of them, a bandit
        update trains the N trees of the played action).
    rho
        Explore rate of eq. 2, in (0, 1) ([0, 1) for :class:`OCOFull`).
    gamma
        The weak learners' advantage in (0, 1] (vote scale and OGD step, as in
        :class:`boosters.online.oco.OCOBooster`). The default 0.8 is above our first suggested grid
        (0.05-0.5): on short Car streams larger values did clearly better (0.1: ~0.3,
        0.5: ~0.5-0.7, 0.8: ~0.64-0.77 accuracy).
    seed, tree_profile, fixed_trees, nominal_attributes, fast_trees, leaf_prediction
        As for the Zhang et al. 2019 boosters (``boosters.online.template.BoostingTemplate``);
        ``leaf_prediction`` is ``"nba"`` (adaptive naive-Bayes leaves) by default here and
        ``"mc"`` for :class:`OCOFull` (docs/boosters.md, "Defaults").
    tree_core
        ``"compiled"`` (the default): the k N trees in one :class:`learners.compiled.TreeEnsemble`
        (action ``a``'s N trees are ``a N .. a N + N - 1``), read in one call per decision and
        taught in one per update; ``"river"``: River's trees, the reference
        (:class:`boosters.online.oco.OCOBooster`).
    update
        ``"weighted"`` (CB-W, default) or ``"rounding"`` (CB-R).
    p_init, realizable, optimizer
        The binary boosters' OCO start, Algorithm 4 switch and optimiser
        (:class:`boosters.online.oco.OCOBooster`).
    baseline
        CB-W's reward baseline ``b`` in [0, 1].
    max_weight
        CB-W's weight clip (``None``: no clipping, unbiased).
    rho_decay, rho_floor
        The exploration schedule of the tree boosters (docs/boosters.md, "Exploration
        schedule"): after ``t`` learned rounds the rate is ``max(min(rho_floor, rho), rho /
        sqrt(1 + t / rho_decay))``, 0.1 down to 0.01 by default; ``rho_decay="auto"`` (the
        default) is ``min(5 k, 100)`` rounds for k actions; ``rho_decay=None`` keeps
        ``rho`` constant (as :class:`OCOFull` does).
    rho_by_misses
        Whether the scheduled rate is scaled by ``min(1, miss / 0.25)``, ``miss`` the moving
        average of the prediction's misses on the rounds that played it (the default; False:
        the schedule alone).
    rho_min
        How far the floor follows those misses down: with ``rho_by_misses`` the rate is never
        below ``min(rho_floor, max(rho_min, miss))`` (0.002 by default; None: never below
        ``rho_floor``).
    guess_model
        The reward model (``"ridge"``, the default, or ``"linear"``; docs/boosters.md,
        "learners/ridge.py") whose best action the booster plays while that model's estimated
        losses are below those of the boosters' own argmax; None: no model, the one-vs-all vote
        always plays (as in :class:`OCOFull`).
    switch_weight
        The clip of the importance weights of those estimated losses (the reward model's doubly
        robust estimate, as BanditBBM's switch: docs/boosters.md, "The Hedge's losses").
    drift_restart
        ``"model"`` (the default): when the played prediction's misses jump (a Page-Hinkley test,
        ``boosters.exploration.MissDrift``), the schedule's clock restarts and the booster
        learns again from scratch (new trees and reward model); ``"schedule"``: the clock
        alone; None: neither (as :class:`OCOFull`).
    """

    default_tree_profile = "bandit"
    _parameter_constraints: ClassVar[dict[str, list]] = {
        "n_actions": TEMPLATE_CONSTRAINTS["n_actions"],
        "n_learners": TEMPLATE_CONSTRAINTS["n_learners"],
        "seed": TEMPLATE_CONSTRAINTS["seed"],
        "nominal_attributes": TEMPLATE_CONSTRAINTS["nominal_attributes"],
        "gamma": [Interval(float, 0.0, 1.0, closed="right")],
        "update": [Options(UPDATES)],
        "p_init": [None, Interval(float, -1.0, 1.0)],
        "realizable": [Flag()],
        "optimizer": [None, HasMethods(("iterates",))],
        "baseline": [Interval(float, 0.0, 1.0)],
        "max_weight": [None, Interval(float, 0.0, None, closed="right")],
        **{k: v for k, v in BANDIT_CONSTRAINTS.items() if k != "guess_expert"},
        "rho": TEMPLATE_CONSTRAINTS["rho"],
        **{k: TEMPLATE_CONSTRAINTS[k] for k in OCO_TREE_FIELDS},
        "guess_model": [None, Options(GUESS_MODELS)],
        "switch_weight": [Interval(float, 1.0, None)],
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
        gamma: float = 0.8,
        seed: int | None = None,
        exploration: Exploration | None = None,
        weak_learner: WeakLearner | None = None,
        reward_expert: RewardExpert | None = None,
        nominal_attributes: list | None = None,
        update: str = "weighted",
        p_init: float | None = None,
        realizable: bool = False,
        optimizer: OnlineConvexOptimizer | None = None,
        baseline: float = 0.5,
        max_weight: float | None = None,
        **flat: Any,
    ):
        groups = regroup(type(self), {"exploration": exploration, "weak_learner": weak_learner,
                                      "reward_expert": reward_expert}, flat)
        declared = type(self)._parameter_constraints
        validate_params({
            "n_actions": n_actions, "n_learners": n_learners, "seed": seed, "gamma": gamma,
            "nominal_attributes": nominal_attributes, "update": update, "p_init": p_init,
            "realizable": realizable, "optimizer": optimizer, "baseline": baseline,
            "max_weight": max_weight, **flat_values(groups, declared),
        }, declared)
        explore, weak = groups["exploration"], groups["weak_learner"]
        guess_model, switch_weight = (groups["reward_expert"].guess_model,
                                      groups["reward_expert"].switch_weight)
        self.n_actions, self.n_learners = int(n_actions), int(n_learners)
        self.rho = float(explore.rho)
        self.rho_decay, self.rho_floor, self.rho_min = check_schedule(
            explore.rho_decay, explore.rho_floor, explore.rho_min
        )
        self.rho_by_misses = bool(explore.rho_by_misses)
        self.miss_rate = MISS_REFERENCE
        self.update, self.baseline = update, float(baseline)
        self.max_weight = None if max_weight is None else float(max_weight)
        self.seed = seed
        self._rng = np.random.default_rng(seed)
        self._init_oco(gamma, p_init, realizable, optimizer)
        k, n = self.n_actions, self.n_learners
        self._make_trees(
            k * n,
            weak.tree_profile or self.default_tree_profile,
            weak.fixed_trees,
            nominal_attributes,
            weak.fast_trees,
            weak.leaf_prediction,
            weak.tree_core,
        )
        self._scale = 1.0 / (self.gamma * n)
        self._ova = np.full((k, k), -1, dtype=np.int8)  # row y: the one-vs-all labels of label y
        np.fill_diagonal(self._ova, 1)
        self.guess_model, self.switch_weight = guess_model, float(switch_weight)
        self.reward_model = self.switch_losses = None  # None: the booster of the paper
        if guess_model is not None:
            self.reward_model = make_reward_model(guess_model, k, self.nominal_attributes)
            #: the estimated losses (faded by GUESS_DECAY) of [the boosters' argmax, the model's]
            self.switch_losses = np.zeros(2)
        self.n_decisions = 0
        self.n_updates = 0
        self.drift_restart = explore.drift_restart
        self.miss_drift = make_drift(self.drift_restart)

    def _forget(self) -> None:
        """Learn again from scratch (``drift_restart="model"``, after an alarm of its
        ``MissDrift``): new trees (their hyperparameters drawn again from the booster's
        generator) and reward model, the switch's losses as at creation."""
        self._make_trees(
            self.n_actions * self.n_learners, self.tree_profile, self.fixed_trees,
            self.nominal_attributes, self.fast_trees, self.leaf_prediction, self.tree_core,
        )
        if self.reward_model is not None:
            self.reward_model = make_reward_model(
                self.guess_model, self.n_actions, self.nominal_attributes
            )
            self.switch_losses = np.zeros(2)

    def booster_learners(self, action: int) -> list:
        """The N weak learners of ``action``'s binary booster (River's trees; none with the
        compiled core, whose trees ``a N .. a N + N - 1`` are theirs)."""
        n = self.n_learners
        return self.learners[action * n : (action + 1) * n]

    def decide_one(
        self,
        x: dict,
        *,
        allowed: np.ndarray | Sequence[int] | None = None,
        rng: np.random.Generator | None = None,
    ) -> Decision:
        """All k N predictions, one-vs-all margins, greedy argmax, eq. 2 exploration.

        ``allowed`` (``None``: all actions): the greedy action is the argmax of the margins
        among the allowed actions and eq. 2 runs over them (``rho / (|A| - 1)`` on the other
        allowed actions, 0 on the excluded ones). The bandit updates divide by the logged,
        restricted propensity of the played arm, so CB-W's ``E[1{a = k} w sign(r - b)] =
        r(x, k) - b`` and CB-R's ``E[1{a = k} y~] = 2 pi_min (r(x, k) - 1/2)`` (with the
        unrestricted eq. 2's ``pi_min`` in every round) hold for every allowed arm ``k``; an
        excluded arm is never played, so its booster learns nothing that round. ``rng``: the
        generator of this decision's draws instead of the booster's own (the booster is then
        only read).
        """
        check_context(x)
        k, n = self.n_actions, self.n_learners
        kn = k * n
        allowed = check_allowed(allowed, k)
        model = self.reward_model
        u = (self._rng if rng is None else rng).random(kn + k + 1 + (0 if model is None else k))
        weak = signs_random_ties(self._margins(x), u[:kn]).reshape(k, n)
        z = weak.sum(axis=1) * self._scale
        yhat = int(argmax_random_ties(mask_scores(z, allowed)[None, :], u[None, kn : kn + k])[0])
        internals = {"weak": weak, "z": z, "yhat": yhat}
        if allowed is not None:
            internals["allowed"] = allowed
        if model is not None:  # the switch: the model's best action while its losses lead
            scores = mask_scores(model.predict_one(x), allowed)[None, :]
            best = int(argmax_random_ties(scores, u[None, kn + k : kn + 2 * k])[0])
            internals.update(vote=yhat, model=best)
            assert self.switch_losses is not None  # set with the reward model
            if model_leads(self.switch_losses):
                yhat = internals["yhat"] = best
        rho = self.current_rho()
        p = exploration_distribution(yhat, k, rho, allowed)
        # keep yhat w.p. 1 - rho, else a uniform action among the other (allowed) ones
        action = explore(yhat, k, rho, u[-1], allowed)
        if rng is None:
            self.n_decisions += 1
        return Decision(action=action, probabilities=p, internals=internals)

    def current_rho(self) -> float:
        """The exploration rate of the next decision (:func:`boosters.exploration.decayed_rate`)."""
        return scheduled_rate(self)

    def _check_decision(self, decision: Decision) -> tuple[np.ndarray, np.ndarray]:
        weak = np.asarray(decision.internals["weak"])
        if weak.shape != (self.n_actions, self.n_learners):
            raise ValueError("decision internals do not match this booster's learners")
        p = np.asarray(decision.probabilities, dtype=float)
        action = decision.action
        if p.shape != (self.n_actions,):
            raise ValueError(f"decision has {p.size} probabilities, expected {self.n_actions}")
        if not _is_index(action):
            raise TypeError(f"decision.action must be an action index, got {action!r}")
        if not 0 <= action < self.n_actions or not p[action] > 0.0:
            raise ValueError(f"decision.action {action} is not a playable action")
        self._check_switch(decision.internals)
        return weak, p

    def _check_switch(self, internals: dict) -> None:
        """The switch's logged actions (``yhat``, ``vote``, ``model``), checked before anything
        learns: both of ``vote`` and ``model`` or neither, each an action index."""
        if self.reward_model is None or not {"vote", "model"} & internals.keys():
            return
        for name in ("yhat", "vote", "model"):
            value: Any = internals.get(name)
            if not _is_index(value) or not 0 <= value < self.n_actions:
                raise ValueError(f"decision internals: {name} is not an action index: {value!r}")

    def learn_one(
        self, x: dict, decision: Decision, reward: float | None = None, label: int | None = None
    ) -> None:
        """A label trains all k boosters; a reward the played arm's booster."""
        check_context(x)
        weak, p = self._check_decision(decision)
        reward, label = validate_feedback(decision, reward, label, self.n_actions)
        if self.full_information and label is None:
            if reward != 1.0:
                raise ValueError(
                    f"{type(self).__name__} is a full-information booster: it needs the true "
                    "label (or a reward of 1 on the played action)"
                )
            label = decision.action
        n = self.n_learners
        if label is not None:
            y = self._ova[label][:, None]  # (k, 1)
            u = self._rng.random((self.n_actions, n))
            labels = oco_labels(
                weak, y, self.gamma, self.optimizer, self.p_init, self.realizable, u
            )
            self._teach(x, labels.ravel(), 1.0)
            self.n_updates += 1
            track_misses(self, decision, label == decision.action, label)
            if self.reward_model is not None:
                self._learn_model(x, decision, label == decision.action, label)
            forget_pending(self)
            return
        a = decision.action
        if self.update == "rounding":
            # pi_min of the unrestricted eq. 2 (no larger than any logged probability of ours,
            # restricted or not), so a restricted round trains towards the same target
            rho = self.current_rho()
            pi_min = min(float(p[p > 0.0].min()), 1.0 - rho, rho / (self.n_actions - 1))
            q = rounding_probability(reward, float(p[a]), pi_min)
            y, weight = (1 if self._rng.random() < q else -1), 1.0
        else:
            y, weight = weighted_label(reward, float(p[a]), self.baseline, self.max_weight)
        self.n_updates += 1
        if weight > 0.0:
            u = self._rng.random(n)
            labels = oco_labels(
                weak[a], y, self.gamma, self.optimizer, self.p_init, self.realizable, u
            )
            self._teach(x, labels, weight, first=a * n)
        if self.reward_model is None and not self.rho_by_misses and self.miss_drift is None:
            return
        # a fractional reward is rounded, as the template's
        correct, _ = resolve_feedback(decision, reward, None, self.n_actions, self._rng)
        track_misses(self, decision, correct, None)
        if self.reward_model is not None:
            self._learn_model(x, decision, correct, None)
        forget_pending(self)

    def _learn_model(self, x: dict, decision: Decision, correct: bool, label: int | None) -> None:
        """After a round: the switch's estimated losses of the boosters' argmax and the model's
        best action (the true ones with a ``label``; the model's doubly robust estimate with
        importance weights clipped at ``switch_weight`` from a reward, for an unrestricted
        decision that logged both), then the reward model."""
        internals = decision.internals
        # both set together, and the callers call this with a reward model only
        assert self.reward_model is not None and self.switch_losses is not None
        compared = "vote" in internals and (label is not None or "allowed" not in internals)
        if compared:
            if label is not None:
                losses = full_information_loss(label, self.n_actions)
            else:
                guess = self.reward_model.predict_one(x)
                losses = judged_losses(decision, correct, guess, self.switch_weight)
            record_switch(self.switch_losses, losses[[internals["vote"], internals["model"]]])
        self.reward_model.learn_one(x, decision.action, correct, label)


class OCOFull(OCOBandit):
    """Full-information twin of :class:`OCOBandit` (our extension): needs the label, ``rho = 0``."""

    full_information = True
    default_tree_profile = "full"
    _parameter_constraints: ClassVar[dict[str, list]] = {
        **{k: v for k, v in OCOBandit._parameter_constraints.items()
           if k not in BANDIT_CONSTRAINTS and k not in ("guess_model", "switch_weight")},
        "rho": FULL_RHO,
    }
    default_groups: ClassVar[dict[str, Any]] = {
        "exploration": dataclasses.replace(PAPER_EXPLORATION, rho=0.0),
        "weak_learner": WeakLearner(leaf_prediction="mc"),
        "reward_expert": RewardExpert(guess_model=None, hedge_weight=None),
    }
