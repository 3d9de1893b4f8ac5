"""A booster over per-request candidate sets described by their own features.

The action-dependent-features ("ADF") case of Vowpal Wabbit's ``--cb_explore_adf`` and of Azure
Personalizer's rank call: each request brings its candidates, each a dict of features (often with
an id never seen before), and the booster scores every (context, candidate) pair with one model
of the reward over their joint features. Such a candidate set has no fixed ``n_actions``, so this
booster does not follow :class:`boosters.base.OnlineBooster` and is not in
:mod:`boosters.registry`; its verbs are ``decide(context, actions)`` and
``learn(context, actions, decision, reward)``.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Sequence

import numpy as np
from river import tree

from boosters._params import check_choice, check_int, check_real
from boosters.base import Decision, check_context, validate_feedback
from boosters.exploration import draw

__all__ = ["ActionFeatureBooster", "egreedy_probabilities", "squarecb_probabilities"]

#: the exploration rules :class:`ActionFeatureBooster` knows
EXPLORATIONS = ("squarecb", "egreedy")
#: the features it may add for each pair of a context string and a candidate string
INTERACTIONS = ("cross", "equal", "none")
#: how its trees split a string feature: one value against the rest, or one branch per value
NOMINAL_SPLITS = ("binary", "multiway")


def _allowed_mask(excluded: Iterable[int] | None, k: int) -> np.ndarray:
    """A boolean mask of the candidates not in ``excluded`` (indices into the candidate list).

    >>> _allowed_mask([2, 0], 4).tolist()
    [False, True, False, True]
    >>> _allowed_mask([0, 1], 2)
    Traceback (most recent call last):
    ...
    ValueError: every candidate is excluded: at least one must stay
    """
    mask = np.ones(k, dtype=bool)
    if excluded is None:
        return mask
    if isinstance(excluded, str | bytes | dict) or not isinstance(excluded, Iterable):
        raise ValueError(f"excluded must be a sequence of candidate indices, got {excluded!r}")
    for i in excluded:
        if isinstance(i, bool | np.bool_) or not isinstance(i, numbers.Integral):
            raise ValueError(f"excluded candidates must be integer indices, got {i!r}")
        if not 0 <= i < k:
            raise ValueError(f"excluded candidate {i} is outside 0..{k - 1}")
        mask[i] = False
    if not mask.any():
        raise ValueError("every candidate is excluded: at least one must stay")
    return mask


def egreedy_probabilities(scores: np.ndarray, allowed: np.ndarray, epsilon: float) -> np.ndarray:
    """``epsilon / K`` on each of the ``K`` allowed candidates, ``1 - epsilon`` shared by the
    argmax set among them (the exact marginal of uniform tie breaking); 0 on the excluded.

    >>> egreedy_probabilities(np.array([0.1, 0.5, 0.5, 0.9]),
    ...                       np.array([True, True, True, False]), 0.3).round(4).tolist()
    [0.1, 0.45, 0.45, 0.0]
    """
    masked = np.where(allowed, scores, -np.inf)
    best = masked == masked.max()
    p = np.where(allowed, epsilon / np.count_nonzero(allowed), 0.0)
    return p + (1.0 - epsilon) * best / np.count_nonzero(best)


def squarecb_probabilities(scores: np.ndarray, allowed: np.ndarray, gamma: float) -> np.ndarray:
    """SquareCB's inverse gap weighting (Foster and Rakhlin 2020) over the allowed candidates.

    With ``K`` allowed candidates and ``b`` the first argmax of the predicted rewards among
    them, ``p_a = 1 / (K + gamma (yhat_b - yhat_a))`` for every other allowed ``a`` and ``b``
    gets the rest (at least ``1 / K``); excluded candidates get 0. ``gamma = 0`` is uniform.

    >>> p = squarecb_probabilities(np.array([0.9, 0.5, 0.1]), np.ones(3, dtype=bool), 10.0)
    >>> p.round(4).tolist()                   # 1 / (3 + 4), 1 / (3 + 8)
    [0.7662, 0.1429, 0.0909]
    >>> squarecb_probabilities(np.array([0.9, 0.5, 0.1]),
    ...                        np.array([False, True, True]), 10.0).round(4).tolist()
    [0.0, 0.8333, 0.1667]
    """
    k = np.count_nonzero(allowed)
    masked = np.where(allowed, scores, -np.inf)
    best = int(np.argmax(masked))
    gaps = np.where(allowed, masked[best] - scores, 0.0)
    p = np.where(allowed, 1.0 / (k + gamma * gaps), 0.0)
    p[best] = 0.0
    p[best] = 1.0 - p.sum()
    return p


class ActionFeatureBooster:
    """Online gradient boosting of Hoeffding regression trees over (context, candidate) features.

    **Features.** A candidate's features join the context's under the prefix ``action_prefix``
    (``{"price": 3}`` becomes ``{"a.price": 3}``), so names never collide and the trees find the
    interactions of context and candidate themselves. Strings are nominal, numbers numeric; an id
    is just another feature: a new id scores like the candidates whose other features it shares.
    ``interactions`` adds, for every context string ``c`` and candidate string ``a.n``, the
    number ``c==a.n`` (1.0 when the two values are equal): a reward that depends on whether a
    candidate matches the context (its category is the user's preferred one) is then one split
    on one feature, where the raw features need a split on ``c`` and one on ``a.n`` under each
    of its branches. ``"cross"`` (the default) adds the pair of values as a nominal feature too,
    ``c*a.n`` = ``"cv|av"`` (the cross VW's ``-q`` makes), for values from different
    vocabularies; ``"equal"`` only the numbers (cheaper); ``"none"`` neither. Their number is the
    product of the numbers of string features of the context and of a candidate.
    ``nominal_splits="binary"`` splits a string on one value against the rest, so a new id
    follows the rest (River's multiway branches send an unseen value down their most common
    branch, and new ids keep arriving).

    **Model.** The predicted reward is ``base + learning_rate * sum_m f_m(x, a)`` over ``n_trees``
    ``river.tree.HoeffdingTreeRegressor`` (mean leaves): ``base`` is the running mean reward and
    tree ``m`` learns the residual the trees before it leave (``r - base - learning_rate *
    sum_{j<m} f_j``, read before any of them learns the round), for the squared loss. Learning
    uses the played candidate only, unweighted: as in SquareCB, the played candidate depends on
    the past and the context only, so its reward is an unbiased sample of ``E[r | x, a]``.

    **Exploration** over the allowed candidates, with exact propensities (the whole distribution
    is returned; excluded candidates get 0; the draw uses the seeded generator):

    - ``"squarecb"``: inverse gap weighting (:func:`squarecb_probabilities`). ``gamma`` fixed,
      or ``None`` for the schedule ``gamma_scale * sqrt(K t)`` with ``K`` the allowed candidates
      and ``t`` one more than the rounds learned (Foster and Rakhlin's ``sqrt(K T)`` tuning,
      made anytime).
    - ``"egreedy"``: ``epsilon / K`` each plus ``1 - epsilon`` on the argmax set.

    The defaults (5 trees, learning rate 0.5, grace period 50, ``gamma_scale`` 16, ``"cross"``
    interactions, binary splits) were chosen on seeds 0 to 3 of the rotating catalogue of
    ``benchmarks/paper/rotating_catalogue.py`` (rewards in [0, 1]; its table uses other seeds):
    median last-20% reward 0.900 (worst seed 0.890; the best choice earns about 0.90), where
    the defaults before these options had 0.870 (0.795). ``"equal"`` has the same 0.900 there
    at about 10% less time; with multiway splits it has 0.870 (0.797): splits on ``a.id`` sent
    new ids down the wrong branches and the reward fell with time; binary splits without
    interactions have 0.73. With every preference renamed (no context string ever equals a
    candidate's), ``"cross"`` has 0.867 (0.845), the old defaults 0.870 (0.795), ``"equal"``
    0.68: binary splits find a cross of two raw strings slowly. A grace period of 20 let the
    first splits follow noise features (tau 0.5 splits at every attempt) and lost reward.

    Parameters
    ----------
    n_trees
        Number of boosted regression trees (>= 1).
    learning_rate
        Shrinkage of every tree's prediction, in (0, 1].
    exploration
        ``"squarecb"`` or ``"egreedy"``.
    epsilon
        egreedy's exploration rate in [0, 1].
    gamma
        SquareCB's fixed gamma (>= 0), or None for the schedule above.
    gamma_scale
        The schedule's scale (> 0).
    grace_period, delta, tau
        Each tree's grace period, split confidence and tie threshold (as ``egreedy_tree``'s:
        with tau 0.5 a leaf splits on its best split at each attempt).
    interactions
        ``"cross"``, ``"equal"`` or ``"none"``: the features added for each pair of a context
        string and a candidate string (above).
    nominal_splits
        ``"binary"`` (one value against the rest) or ``"multiway"`` (one branch per value).
    action_prefix
        Prefix of the candidates' feature names; no context feature may start with it.
    seed
        Seed of the numpy generator of the draws (the trees have no randomness).

    >>> booster = ActionFeatureBooster(n_trees=3, seed=0)
    >>> items = [{"id": "a", "price": 1.0}, {"id": "b", "price": 5.0}, {"id": "new", "price": 2.0}]
    >>> d = booster.decide({"user": "u1"}, items, excluded=[2])
    >>> d.probabilities.tolist()                 # untrained: uniform over the allowed two
    [0.5, 0.5, 0.0]
    >>> booster.learn({"user": "u1"}, items, d, reward=1.0)
    >>> d2 = booster.decide({"user": "u1"}, items)
    >>> float(d2.probabilities.sum()), booster.n_learned
    (1.0, 1)
    """

    def __init__(
        self,
        n_trees: int = 5,
        learning_rate: float = 0.5,
        exploration: str = "squarecb",
        epsilon: float = 0.05,
        gamma: float | None = None,
        gamma_scale: float = 16.0,
        grace_period: int = 50,
        delta: float = 0.01,
        tau: float = 0.5,
        interactions: str = "cross",
        nominal_splits: str = "binary",
        action_prefix: str = "a.",
        seed: int | None = None,
    ):
        self.n_trees = check_int("n_trees", n_trees, 1)
        self.learning_rate = check_real("learning_rate", learning_rate, 0.0, 1.0, open_low=True)
        self.exploration = check_choice("exploration", exploration, EXPLORATIONS)
        self.epsilon = check_real("epsilon", epsilon, 0.0, 1.0)
        self.gamma = None if gamma is None else check_real("gamma", gamma, 0.0)
        self.gamma_scale = check_real("gamma_scale", gamma_scale, 0.0, open_low=True)
        self.grace_period = check_int("grace_period", grace_period, 1)
        self.delta = check_real("delta", delta, 0.0, 1.0, open_low=True, open_high=True)
        self.tau = check_real("tau", tau, 0.0)
        self.interactions = check_choice("interactions", interactions, INTERACTIONS)
        self.nominal_splits = check_choice("nominal_splits", nominal_splits, NOMINAL_SPLITS)
        if not isinstance(action_prefix, str) or not action_prefix:
            raise ValueError(f"action_prefix must be a non-empty string, got {action_prefix!r}")
        self.action_prefix = action_prefix
        self.seed = seed
        self._rng = np.random.default_rng(seed)
        self.trees = [self._new_tree() for _ in range(self.n_trees)]
        #: the running mean reward (the boosting's constant start) and the rounds learned
        self.base = 0.0
        self.n_learned = 0
        #: feature name -> whether its first learned value was a string
        self.kinds: dict[str, bool] = {}

    def __setstate__(self, state: dict) -> None:
        # a booster pickled before ``interactions`` and ``nominal_splits`` learned without them
        self.__dict__.update({"interactions": "none", "nominal_splits": "multiway", **state})

    def _new_tree(self) -> tree.HoeffdingTreeRegressor:
        return tree.HoeffdingTreeRegressor(
            grace_period=self.grace_period, delta=self.delta, tau=self.tau,
            leaf_prediction="mean", binary_split=self.nominal_splits == "binary",
        )

    def _interactions(self, context: dict, action: dict) -> dict:
        """The added features of each context string ``c`` and candidate string ``a.n``:
        ``c==a.n`` (1.0 if equal, else 0.0) and, with ``"cross"``, ``c*a.n`` (``"cv|av"``).

        >>> ActionFeatureBooster(interactions="cross")._interactions(
        ...     {"pref": "c1", "budget": 0.5}, {"cat": "c1", "id": "x", "price": 2.0})
        {'pref==a.cat': 1.0, 'pref*a.cat': 'c1|c1', 'pref==a.id': 0.0, 'pref*a.id': 'c1|x'}
        """
        prefix, cross = self.action_prefix, self.interactions == "cross"
        texts = [(name, value) for name, value in context.items() if isinstance(value, str)]
        added: dict = {}
        for name, value in action.items():
            if not isinstance(value, str):
                continue
            for cname, cvalue in texts:
                added[f"{cname}=={prefix}{name}"] = 1.0 if cvalue == value else 0.0
                if cross:
                    added[f"{cname}*{prefix}{name}"] = f"{cvalue}|{value}"
        return added

    def features(self, context: dict, action: dict, record: bool = False) -> dict:
        """The joint features of ``context`` and one candidate (candidate names prefixed).

        A feature keeps the kind (string or number) it first had when learned; sent later with
        the other kind it becomes another feature, ``name:str`` or ``name:num`` (as in the
        service's feature schema), so no tree compares a string with a threshold. ``record``
        (learning) notes the kinds of names seen for the first time.

        >>> booster = ActionFeatureBooster()
        >>> booster.features({"u": 1}, {"id": "x", "u": 2.0}, record=True)
        {'u': 1, 'a.id': 'x', 'a.u': 2.0}
        >>> booster.features({"u": "1"}, {"id": 7})
        {'u:str': '1', 'a.id:num': 7}
        """
        prefix, kinds = self.action_prefix, self.kinds
        joint = {}
        pairs = [*context.items(), *((f"{prefix}{name}", v) for name, v in action.items())]
        for name, value in pairs:
            text = isinstance(value, str)
            first = kinds.get(name)
            if first is None:
                if record:
                    kinds[name] = text
            elif first is not text:
                name = f"{name}:{'str' if text else 'num'}"
            joint[name] = value
        if self.interactions != "none":
            joint.update(self._interactions(context, action))
        return joint

    def _check(self, context: dict, actions: Sequence[dict]) -> None:
        if not isinstance(context, dict):
            raise ValueError(f"context must be a dict of features, got {type(context).__name__}")
        _check_features(context, "context")
        clash = [name for name in context if str(name).startswith(self.action_prefix)]
        if clash:
            raise ValueError(
                f"context feature {clash[0]!r} starts with the action prefix "
                f"{self.action_prefix!r}: rename it or choose another action_prefix"
            )
        if isinstance(actions, dict | str | bytes) or not isinstance(actions, Sequence):
            raise ValueError(f"actions must be a list of feature dicts, got {actions!r}")
        if not actions:
            raise ValueError("actions is empty: give at least one candidate")
        for i, action in enumerate(actions):
            if not isinstance(action, dict):
                raise ValueError(
                    f"candidate {i} must be a dict of features, got {type(action).__name__}"
                )
            _check_features(action, f"candidate {i}")

    def _tree_predictions(self, joint: dict) -> np.ndarray:
        return np.array([model.predict_one(joint) for model in self.trees])

    def scores(self, context: dict, actions: Sequence[dict]) -> np.ndarray:
        """The predicted reward of every candidate, as an array."""
        self._check(context, actions)
        rows = [self._tree_predictions(self.features(context, a)) for a in actions]
        return self.base + self.learning_rate * np.sum(rows, axis=1)

    def current_gamma(self, k: int) -> float:
        """SquareCB's gamma for ``k`` allowed candidates now.

        >>> ActionFeatureBooster(gamma_scale=2.0).current_gamma(4)   # 2 sqrt(4 * 1)
        4.0
        """
        if self.gamma is not None:
            return self.gamma
        return self.gamma_scale * math.sqrt(k * (self.n_learned + 1))

    def decide(
        self,
        context: dict,
        actions: Sequence[dict],
        *,
        excluded: Iterable[int] | None = None,
        rng: np.random.Generator | None = None,
    ) -> Decision:
        """Pick one of ``actions`` (candidate dicts) for ``context``, never an ``excluded`` index.

        Draws from ``rng`` when given (then the booster is left unchanged), else from the
        booster's seeded generator. The decision's ``action`` indexes ``actions`` and its
        ``probabilities`` cover them all (summing to 1); ``internals["scores"]`` holds the
        predicted rewards.
        """
        scores = self.scores(context, actions)
        allowed = _allowed_mask(excluded, len(actions))
        if self.exploration == "egreedy":
            p = egreedy_probabilities(scores, allowed, self.epsilon)
        else:
            p = squarecb_probabilities(scores, allowed, self.current_gamma(int(allowed.sum())))
        action = draw(p, self._rng if rng is None else rng)
        return Decision(action=action, probabilities=p, internals={"scores": scores})

    def learn(
        self, context: dict, actions: Sequence[dict], decision: Decision, reward: float
    ) -> None:
        """Learn ``reward`` (in [0, 1]) of the candidate ``decision`` played among ``actions``."""
        self._check(context, actions)
        _check_decision(decision, len(actions))
        reward, _ = validate_feedback(decision, reward, None, len(actions))
        joint = self.features(context, actions[decision.action], record=True)
        before = np.cumsum(self._tree_predictions(joint)) * self.learning_rate
        residuals = reward - self.base - np.concatenate(([0.0], before[:-1]))
        for model, residual in zip(self.trees, residuals, strict=True):
            model.learn_one(joint, float(residual))
        self.n_learned += 1
        self.base += (reward - self.base) / self.n_learned


def _check_features(features: dict, what: str) -> None:
    """:func:`boosters.base.check_context` with its TypeErrors as ValueErrors naming ``what``."""
    try:
        check_context(features)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{what}: {error}") from None


def _check_decision(decision: Decision, k: int) -> None:
    """``decision`` must be a decision over ``k`` candidates with a positive propensity."""
    if not isinstance(decision, Decision):
        raise ValueError(f"decision must be a Decision, got {type(decision).__name__}")
    p = np.asarray(decision.probabilities, dtype=float)
    if p.shape != (k,):
        raise ValueError(f"decision has {p.size} probabilities, but there are {k} candidates")
    action = decision.action
    if isinstance(action, bool) or not isinstance(action, numbers.Integral) or not 0 <= action < k:
        raise ValueError(f"decision.action must be a candidate index in 0..{k - 1}, got {action!r}")
    if not p[action] > 0.0:
        raise ValueError(f"the played candidate's propensity must be positive, got {p[action]}")
