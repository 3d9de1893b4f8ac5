"""Online agnostic boosting via online convex optimisation (BCHM20), binary labels.

More: docs/boosters.md, "boosters/online/oco.py".

>>> booster = OCOBooster(n_learners=5, gamma=0.2, seed=0)
>>> x = {"f": 1.0}
>>> d = booster.decide_one(x)
>>> d.internals["weak"].tolist(), d.internals["z"]
([1, -1, -1, 1, 1], 1.0)
>>> d.probabilities.tolist(), d.action      # |z| >= 1: Pi(z) = sign(z)
([0.0, 1.0], 1)
>>> booster.learn_one(x, d, label=0)         # the true label is -1
>>> booster.iterates(d.internals["weak"], -1).round(3).tolist()
[0.0, 1.0, 0.434, -0.028, 0.572]
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from boosters._params import check_choice, check_int, check_names, check_real
from boosters.base import Decision, OnlineBooster, check_context, resolve_feedback
from boosters.exploration import check_allowed
from learners.binary import (
    BinaryWeakLearner,
    binary_trees,
    forest_margins,
    forest_teach,
    margins,
    signs_random_ties,
)
from learners.hoeffding import LEAF_PREDICTIONS, TREE_CORES, TREE_PROFILES, sample_tree_params

__all__ = [
    "OCOBooster",
    "OCOParams",
    "OnlineConvexOptimizer",
    "ProjectedOGD",
    "oco_labels",
    "projection_probability",
    "randomized_projection",
    "relabel_probability",
]


# ---- the randomized projection and the relabel rule (BCHM20 Algorithm 1) -------------------------


def projection_probability(z):
    """``P(Pi(z) = +1) = (1 + clip(z, -1, 1)) / 2`` (Eq. 2), so ``E[Pi(z)] = clip(z, -1, 1)``.

    Works on floats and arrays.

    >>> projection_probability(np.array([-3.0, -0.5, 0.0, 0.5, 1.0, 7.0])).tolist()
    [0.0, 0.25, 0.5, 0.75, 1.0, 1.0]
    """
    return (1.0 + np.clip(z, -1.0, 1.0)) / 2.0


def randomized_projection(z, u):
    """``Pi(z)`` in {-1, +1} driven by uniform draws ``u`` in [0, 1): +1 iff ``u < P(+1)``.

    For ``|z| >= 1`` it is ``sign(z)`` whatever ``u`` is.

    >>> randomized_projection(np.array([2.0, -1.0, 0.5, 0.5]), np.array([0.99, 0.0, 0.7, 0.8]))
    array([ 1, -1,  1, -1])
    """
    return np.where(np.asarray(u) < projection_probability(z), 1, -1)


def relabel_probability(p):
    """Probability ``(1 + p) / 2`` that a weak learner is given the true label (Alg. 1, line 6).

    ``E[y^i | p, y] = p y``.

    >>> relabel_probability(np.array([-1.0, 0.0, 0.5])).tolist()
    [0.0, 0.5, 0.75]
    """
    return (1.0 + np.asarray(p)) / 2.0


# ---- online convex optimisers over an interval ---------------------------------------------------


@runtime_checkable
class OnlineConvexOptimizer(Protocol):
    """An OCO algorithm over the interval ``[low, high]`` for linear losses ``l_i(p) = g_i p``.

    ``iterates(gradients, start)`` runs one fresh instance over the last axis of ``gradients``
    (the learner index) and returns ``p`` of the same shape with ``p[..., 0] = start`` and
    ``p[..., i]`` a function of ``gradients[..., :i]`` only (the learner plays before it sees its
    loss). Leading axes are independent runs (the one-vs-all boosters of the bandit form).
    """

    low: float
    high: float

    def iterates(self, gradients: np.ndarray, start: float) -> np.ndarray:
        """The iterates ``p^1 .. p^N`` of one run (per leading index)."""


class ProjectedOGD:
    """Projected online gradient descent on ``[low, high]`` (Hazan, OCO book, Thm 3.1).

    ``p^{i+1} = clip(p^i - eta_i g_i, low, high)`` with ``eta_i = D / (G sqrt i)``
    (``step="anytime"``, the default) or ``eta = D / (G sqrt N)`` for a run of length N
    (``step="fixed"``); ``D = high - low`` and ``G = lipschitz`` bounds ``|g_i|``.

    >>> ogd = ProjectedOGD(-1.0, 1.0, lipschitz=2.0 / 0.5)          # gamma = 0.5
    >>> ogd.iterates(np.array([1.0, -3.0, -3.0, 1.0]), start=0.0).round(4).tolist()
    [0.0, -0.5, 0.5607, 1.0]
    """

    def __init__(
        self, low: float = -1.0, high: float = 1.0, lipschitz: float = 2.0, step: str = "anytime"
    ):
        self.low = check_real("low", low, -np.inf, np.inf)
        self.high = check_real("high", high, -np.inf, np.inf)
        if not self.low < self.high:
            raise ValueError(f"low must be below high, got low={low}, high={high}")
        self.lipschitz = check_real("lipschitz", lipschitz, 0.0, np.inf, open_low=True)
        if step not in ("anytime", "fixed"):
            raise ValueError(f"step must be 'anytime' or 'fixed', got {step!r}")
        self.step = step
        self._steps: dict[int, list[float]] = {}

    def steps(self, n: int) -> list[float]:
        """``eta_1 .. eta_{n-1}``: the steps that produce ``p^2 .. p^n`` (cached per n)."""
        steps = self._steps.get(n)
        if steps is None:
            scale = (self.high - self.low) / self.lipschitz
            if self.step == "anytime":
                steps = [scale / math.sqrt(i) for i in range(1, n)]
            else:
                steps = [scale / math.sqrt(n)] * (n - 1)
            self._steps[n] = steps
        return steps

    def iterates(self, gradients: np.ndarray, start: float) -> np.ndarray:
        """See :class:`OnlineConvexOptimizer`; a 1-d run is a plain float loop (N is small)."""
        g = np.asarray(gradients, dtype=float)
        n = g.shape[-1]
        steps = self.steps(n)
        lo, hi = self.low, self.high
        if g.ndim == 1:
            p = float(start)
            path = [p]
            for eta, gi in zip(steps, g.tolist()):
                p -= eta * gi
                p = lo if p < lo else hi if p > hi else p
                path.append(p)
            return np.array(path)
        out = np.empty_like(g)
        out[..., 0] = start
        for i, eta in enumerate(steps):
            np.clip(out[..., i] - eta * g[..., i], lo, hi, out=out[..., i + 1])
        return out


# ---- one round of learning (shared with the bandit form) -----------------------------------------


def oco_labels(
    weak: np.ndarray,
    y,
    gamma: float,
    optimizer: OnlineConvexOptimizer,
    start: float,
    realizable: bool,
    u: np.ndarray,
) -> np.ndarray:
    """The label each weak learner is trained on this round (0 = no update), Alg. 1 / Alg. 4.

    ``weak`` (..., N) are the decision-time predictions in {-1, +1}, ``y`` the label in {-1, +1}
    (a scalar or an array broadcasting against ``weak[..., :1]``), ``u`` uniform draws shaped like
    ``weak``. The OCO gradients are ``weak * y / gamma - 1``; agnostic: ``y`` with probability
    ``(1 + p^i) / 2``, else ``-y``; realizable: ``y`` with probability ``p^i``, else 0.

    >>> ogd = ProjectedOGD(-1.0, 1.0, lipschitz=2.0 / 0.5)
    >>> oco_labels(np.array([1, -1, -1]), 1, 0.5, ogd, 0.0, False, np.array([0.4, 0.9, 0.7]))
    array([ 1, -1,  1])
    """
    y = np.asarray(y)
    p = optimizer.iterates(weak * (y / gamma) - 1.0, start)
    if realizable:
        return np.where(u < p, y, 0)
    return np.where(u < relabel_probability(p), y, -y)


def _check_optimizer(optimizer, low: float, high: float) -> OnlineConvexOptimizer:
    if not callable(getattr(optimizer, "iterates", None)):
        raise ValueError("optimizer must have an iterates(gradients, start) method")
    if (getattr(optimizer, "low", None), getattr(optimizer, "high", None)) != (low, high):
        raise ValueError(
            f"optimizer must work on [{low}, {high}] for this variant, got "
            f"[{getattr(optimizer, 'low', None)}, {getattr(optimizer, 'high', None)}]"
        )
    return optimizer


class OCOParams:
    """The parameters and trees shared by the binary booster and its bandit form (a mixin)."""

    #: the host's generator; the weak learners: River's BinaryHoeffdingTrees (binary_trees)
    #: or the BinaryWeakLearners given
    _rng: np.random.Generator
    learners: list[Any]

    def _init_oco(self, gamma, p_init, realizable, optimizer) -> None:
        self.gamma = check_real("gamma", gamma, 0.0, 1.0, open_low=True)
        self.realizable = bool(realizable)
        low, high = (0.0, 1.0) if self.realizable else (-1.0, 1.0)
        if p_init is None:
            p_init = 0.5 if self.realizable else 0.0
        self.p_init = check_real("p_init", p_init, low, high)
        if optimizer is None:  # G = 2 / gamma bounds |w y / gamma - 1|; D = high - low
            optimizer = ProjectedOGD(low, high, lipschitz=2.0 / self.gamma)
        self.optimizer = _check_optimizer(optimizer, low, high)

    def _make_trees(
        self,
        count: int,
        tree_profile,
        fixed_trees,
        nominal_attributes,
        fast_trees=True,
        leaf_prediction="mc",
        tree_core="compiled",
    ) -> None:
        """``count`` binary trees, untrained, their hyperparameters drawn from the generator:
        ``forest`` (the compiled core) or ``learners`` (River's), the other empty."""
        self.tree_profile = check_choice("tree_profile", tree_profile, tuple(TREE_PROFILES))
        self.fixed_trees = bool(fixed_trees)
        self.nominal_attributes = check_names("nominal_attributes", nominal_attributes)
        self.fast_trees = bool(fast_trees)
        self.leaf_prediction = check_choice("leaf_prediction", leaf_prediction, LEAF_PREDICTIONS)
        self.tree_core = check_choice("tree_core", tree_core, TREE_CORES)
        params = [sample_tree_params(self.tree_profile, self._rng, fixed=self.fixed_trees)
                  for _ in range(count)]
        self.forest, self.learners = binary_trees(
            self.tree_core, params, self.nominal_attributes, self.leaf_prediction, self.fast_trees
        )
        self._trees = [getattr(wl, "tree", wl) for wl in self.learners]

    def _margins(self, x: dict) -> np.ndarray:
        """Every weak learner's margin for ``x`` (one compiled call with the compiled core)."""
        if self.forest is not None:
            return forest_margins(self.forest, x)
        return margins(self.learners, x)

    def _teach(self, x: dict, labels: np.ndarray, weight: float, first: int = 0) -> None:
        """Learners ``first ..`` learn ``labels`` in {-1, 0, +1} (0: no update) with weight
        ``weight``: one compiled call for all of them, or one call per River tree."""
        if self.forest is not None:
            forest_teach(self.forest, x, labels, weight, first)
            return
        for wl, lab in zip(self.learners[first : first + len(labels)], labels.tolist()):
            if lab:
                wl.learn_one(x, lab, w=weight)


class OCOBooster(OCOParams, OnlineBooster):
    """Online agnostic boosting with OCO (BCHM20 Algorithm 1; Algorithm 4 with ``realizable``).

    Parameters
    ----------
    n_actions
        Must be 2 (action 0 = label -1, action 1 = label +1).
    n_learners
        N, the number of weak learners (ignored when ``learners`` is given).
    gamma
        The weak learners' advantage in (0, 1]: votes are scaled by ``1 / (gamma N)`` and the OGD
        losses by ``1 / gamma`` (BCHM20 Definition 1; gamma is the weak learners' unknown edge).
    seed
        Seed of the numpy generator behind every random choice (tree draws, ties, ``Pi``, relabels).
    p_init
        The OCO start ``p^1`` of every round; default 0 (agnostic, the paper) or 1/2 (realizable).
    realizable
        Algorithm 4 instead of Algorithm 1.
    optimizer
        The OCO algorithm (see :class:`OnlineConvexOptimizer`); default :class:`ProjectedOGD` on
        the variant's interval with ``G = 2 / gamma``.
    tree_profile, fixed_trees, nominal_attributes, fast_trees, leaf_prediction
        Hyperparameters of the default Hoeffding trees (:func:`learners.hoeffding.
        sample_tree_params`); the full-information profile by default.
    tree_core
        ``"compiled"`` (the default): the N trees in one :class:`learners.compiled.TreeEnsemble`
        over two classes (-1 is class 0, +1 class 1), read and taught in one call each;
        ``"river"``: N River trees (:class:`learners.binary.BinaryHoeffdingTree`), the
        reference. Ignored when ``learners`` is given.
    learners
        Optional weak learners to use instead of trees (anything with ``margin_one`` and
        ``learn_one``, :class:`learners.binary.BinaryWeakLearner`).

    Feedback: the true label (full information). A reward also works, since with two actions it
    reveals the label: a reward rounded to 1 (``resolve_feedback``) means the played action was
    right, a 0 means the other one was.
    """

    full_information = True

    def __init__(
        self,
        n_actions: int = 2,
        n_learners: int = 20,
        gamma: float = 0.5,
        seed: int | None = None,
        p_init: float | None = None,
        realizable: bool = False,
        optimizer: OnlineConvexOptimizer | None = None,
        tree_profile: str = "full",
        fixed_trees: bool = False,
        nominal_attributes: list | None = None,
        learners: Sequence[BinaryWeakLearner] | None = None,
        fast_trees: bool = True,
        leaf_prediction: str = "mc",
        tree_core: str = "compiled",
    ):
        if check_int("n_actions", n_actions, 2) != 2:
            raise ValueError(f"n_actions must be 2 for the binary OCO booster, got {n_actions}")
        self.n_actions = 2
        self.seed = seed
        self._rng = np.random.default_rng(seed)
        self._init_oco(gamma, p_init, realizable, optimizer)
        if learners is None:
            self.n_learners = check_int("n_learners", n_learners, 1)
            self._make_trees(
                self.n_learners,
                tree_profile,
                fixed_trees,
                nominal_attributes,
                fast_trees,
                leaf_prediction,
                tree_core,
            )
        else:
            self.learners = list(learners)
            if not self.learners or not all(
                isinstance(wl, BinaryWeakLearner) for wl in self.learners
            ):
                raise ValueError("learners must be a non-empty list of binary weak learners")
            self.n_learners = len(self.learners)
            self.tree_profile, self.fixed_trees, self.nominal_attributes = None, False, None
            self.tree_core = check_choice("tree_core", tree_core, TREE_CORES)
            self.forest, self._trees = None, [getattr(wl, "tree", wl) for wl in self.learners]
        self._scale = 1.0 / (self.gamma * self.n_learners)
        self.n_decisions = 0
        self.n_updates = 0

    def weak_predictions(self, x: dict, u: np.ndarray) -> np.ndarray:
        """Each learner's prediction in {-1, +1} (int8), ties broken by the draws ``u`` (N,)."""
        return signs_random_ties(self._margins(x), u)

    def decide_one(
        self,
        x: dict,
        *,
        allowed: np.ndarray | Sequence[int] | None = None,
        rng: np.random.Generator | None = None,
    ) -> Decision:
        """Predict ``Pi(z)``, ``z = sum_i W_i(x) / (gamma N)`` (Alg. 1, lines 2-4).

        ``allowed``: with one action allowed, that action is played with probability 1 (the
        internals are still the learners' predictions; learning is unchanged, since with two
        actions the feedback reveals the label whichever action was played). ``rng``: the
        generator of this decision's draws instead of the booster's own (the booster is then
        only read).
        """
        check_context(x)
        allowed = check_allowed(allowed, 2)
        u = (self._rng if rng is None else rng).random(self.n_learners + 1)
        weak = self.weak_predictions(x, u[:-1])
        z = float(weak.sum()) * self._scale
        q = float(projection_probability(z))
        if rng is None:
            self.n_decisions += 1
        if allowed is not None:
            only = int(allowed[0])
            p = np.zeros(2)
            p[only] = 1.0
            return Decision(action=only, probabilities=p, internals={"weak": weak, "z": z})
        return Decision(
            action=int(u[-1] < q),
            probabilities=np.array([1.0 - q, q]),
            internals={"weak": weak, "z": z},
        )

    def iterates(self, weak: np.ndarray, y: int) -> np.ndarray:
        """The OCO iterates ``p^1 .. p^N`` of a round with predictions ``weak`` and label ``y``."""
        return self.optimizer.iterates(np.asarray(weak) * (y / self.gamma) - 1.0, self.p_init)

    def learn_one(
        self, x: dict, decision: Decision, reward: float | None = None, label: int | None = None
    ) -> None:
        """OCO over the learners and (random) relabelling (Alg. 1 lines 6-9, or Alg. 4)."""
        check_context(x)
        weak = np.asarray(decision.internals["weak"])
        if weak.shape != (self.n_learners,):
            raise ValueError("decision internals do not match this booster's learners")
        correct, known = resolve_feedback(decision, reward, label, 2, self._rng)
        if known is None:  # two actions: the played one was wrong, so the label is the other
            known = 1 - int(decision.action)
        self.learn_label(x, weak, 2 * known - 1)

    def learn_label(self, x: dict, weak: np.ndarray, y: int, weight: float = 1.0) -> None:
        """One round of learning with label ``y`` in {-1, +1} and decision-time predictions."""
        if isinstance(y, bool) or not isinstance(y, numbers.Integral) or y not in (-1, 1):
            raise ValueError(f"y must be -1 or +1, got {y!r}")
        u = self._rng.random(self.n_learners)
        labels = oco_labels(weak, y, self.gamma, self.optimizer, self.p_init, self.realizable, u)
        self._teach(x, labels, weight)
        self.n_updates += 1
