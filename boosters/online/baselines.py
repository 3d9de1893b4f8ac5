"""Simple baselines on the booster protocol (boosters/base.py).

More: docs/boosters.md, "boosters/online/baselines.py".
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any, ClassVar

import numpy as np
from river import bandit, proba, tree

from boosters._params import (
    MAX_ACTIONS,
    MAX_GRACE_PERIOD,
    HasMethods,
    Interval,
    Options,
    validate_params,
)
from boosters.base import (
    Decision,
    OnlineBooster,
    check_context,
    played_propensity,
    validate_feedback,
)
from boosters.exploration import check_allowed, mask_scores
from learners.value_offsets import MIN_OFFSET_L2, ValueOffsets

__all__ = ["UniformPolicy", "EpsilonGreedyTree", "RiverPolicy"]


def _draw(rng: np.random.Generator, probabilities: np.ndarray) -> int:
    """Draw an action index from ``probabilities`` (never one with probability 0)."""
    return int(rng.choice(probabilities.size, p=probabilities))


def _greedy_probabilities(
    scores: np.ndarray, epsilon: float, allowed: np.ndarray | None = None
) -> np.ndarray:
    """epsilon/k on every action plus (1 - epsilon) spread evenly over the argmax set of ``scores``.

    Spreading the greedy mass over tied actions is the exact marginal of "break ties uniformly
    at random, then explore with probability epsilon". With ``allowed``, the same over the allowed
    actions (epsilon / ``|A|`` each, the argmax among them) and 0 on the others.

    >>> _greedy_probabilities(np.array([0.2, 0.5, 0.5, 0.1]), 0.2).tolist()
    [0.05, 0.45, 0.45, 0.05]
    >>> p = _greedy_probabilities(np.array([0.2, 0.5, 0.5, 0.1]), 0.2, np.array([0, 2, 3]))
    >>> p.round(4).tolist()
    [0.0667, 0.0, 0.8667, 0.0667]
    """
    if allowed is None:
        best = scores == scores.max()
        return epsilon / scores.size + (1.0 - epsilon) * best / np.count_nonzero(best)
    masked = mask_scores(scores, allowed)
    best = masked == masked[allowed].max()
    p = np.zeros(scores.size)
    p[allowed] = epsilon / allowed.size
    return p + (1.0 - epsilon) * best / np.count_nonzero(best)


class UniformPolicy(OnlineBooster):
    """Plays every action with probability 1/k and learns nothing.

    >>> policy = UniformPolicy(n_actions=4, seed=1)
    >>> d = policy.decide_one({})
    >>> d.propensity
    0.25
    >>> policy.learn_one({}, d, reward=1.0)
    """

    _parameter_constraints: ClassVar[dict[str, list]] = {
        "n_actions": [Interval(int, 2, MAX_ACTIONS, bound="MAX_ACTIONS")],
        "seed": [None, Interval(int, 0, None)],
    }

    def __init__(self, n_actions: int, seed: int | None = None):
        validate_params({"n_actions": n_actions, "seed": seed}, self._parameter_constraints)
        self.n_actions = int(n_actions)
        self.seed = seed
        self._rng = np.random.default_rng(seed)
        self._p = np.full(self.n_actions, 1.0 / self.n_actions)

    def decide_one(
        self,
        x: dict,
        *,
        allowed: np.ndarray | Sequence[int] | None = None,
        rng: np.random.Generator | None = None,
    ) -> Decision:
        """A uniform action among ``allowed`` (``None``: all), drawn from ``rng`` if given."""
        check_context(x)
        allowed = check_allowed(allowed, self.n_actions)
        gen = self._rng if rng is None else rng
        if allowed is None:
            return Decision(int(gen.integers(self.n_actions)), self._p.copy())
        p = np.zeros(self.n_actions)
        p[allowed] = 1.0 / allowed.size
        return Decision(int(allowed[gen.integers(allowed.size)]), p)

    def learn_one(self, x, decision, reward=None, label=None) -> None:
        self._feedback(decision, reward, label)


class EpsilonGreedyTree(OnlineBooster):
    """Epsilon-greedy over one Hoeffding tree regressor of the reward per action.

    Action ``a``'s tree (``river.tree.HoeffdingTreeRegressor``, mean leaves) learns the rewards
    of the rounds ``a`` was played, so it estimates ``E[r | x, a]`` (the direct method). There
    are no importance weights: the action is chosen from ``x`` and the past only, so among the
    rounds ``a`` was played the reward given ``x`` still has mean ``E[r | x, a]``; dividing by the
    propensity would only add variance. A true label trains every action's tree (reward 1 for
    the label, 0 for the others). A tree is built the first time its action learns.

    With ``offset_l2`` (the default), each nominal value (a user id, a device) also has a constant
    offset per action (:class:`learners.value_offsets.ValueOffsets`, ridge penalty
    ``offset_l2``): action ``a``'s estimate is its tree's plus the offsets of the example's
    values. A round first gives its residual (the reward less that estimate) to the offsets, by
    one Kalman step, then teaches the tree the reward less the offsets (backfitting), so the two
    add up. A tree needs many rounds at a leaf before it splits on an id; an offset learns from
    the id's first round. Rounds without nominal values have no offsets, so on numeric streams
    the trees learn as with ``offset_l2=None``.

    Deciding: the greedy set is the argmax of the predicted rewards (an action that never
    learned scores 0, so an untrained policy ties everywhere). Every action gets ``epsilon / k``
    and the greedy set shares ``1 - epsilon``; spreading the greedy mass over ties is exactly
    breaking ties uniformly at random, marginalised, so the logged propensity is the exact
    probability the action was drawn with. The action is drawn with the seeded generator.

    Parameters
    ----------
    n_actions
        Number of actions k (>= 2).
    epsilon
        Exploration rate in [0, 1].
    seed
        Seed of the numpy generator that makes every random choice (the trees have none).
    grace_period, delta, tau
        Each tree's grace period (rewards seen at a leaf between split attempts), split
        confidence and tie threshold. With the defaults (20, 0.01, 0.5) the Hoeffding bound is
        under ``tau`` at a leaf's first attempt, so a leaf splits on its best split every 20
        rewards (as many of the boosters' "bandit" trees do). A smaller ``tau`` waits for the bound
        to separate the two best features: at 0.05, about 920 rewards at a leaf when features are
        correlated, which kept the trees of the actions played by exploration at one leaf
        (docs/boosters.md, "boosters/online/baselines.py").
    nominal_attributes
        Feature names to treat as nominal (strings are nominal anyway).
    offset_l2
        The values' offsets' ridge penalty (a new offset has variance ``1 / offset_l2``), or
        None for trees alone.

    >>> policy = EpsilonGreedyTree(n_actions=3, epsilon=0.3, seed=0)
    >>> d = policy.decide_one({"f": 1.0})
    >>> d.probabilities.round(4).tolist()          # untrained: every action ties
    [0.3333, 0.3333, 0.3333]
    >>> policy.learn_one({"f": 1.0}, d, reward=1.0)
    >>> d2 = policy.decide_one({"f": 1.0})
    >>> float(d2.probabilities[d.action].round(4))  # 1 - 0.3 + 0.3 / 3
    0.8
    """

    _parameter_constraints: ClassVar[dict[str, list]] = {
        **UniformPolicy._parameter_constraints,
        "epsilon": [Interval(float, 0.0, 1.0)],
        "grace_period": [Interval(int, 1, MAX_GRACE_PERIOD, bound="MAX_GRACE_PERIOD")],
        "delta": [Interval(float, 0.0, 1.0, closed="neither")],
        "tau": [Interval(float, 0.0, None)],
        "nominal_attributes": [None, HasMethods(("__iter__",))],
        "offset_l2": [None, Interval(float, MIN_OFFSET_L2, None)],
    }

    def __init__(
        self,
        n_actions: int,
        epsilon: float = 0.1,
        seed: int | None = None,
        grace_period: int = 20,
        delta: float = 0.01,
        tau: float = 0.5,
        nominal_attributes: list[str] | None = None,
        offset_l2: float | None = 1.0,
    ):
        validate_params({
            "n_actions": n_actions, "epsilon": epsilon, "seed": seed,
            "grace_period": grace_period, "delta": delta, "tau": tau,
            "nominal_attributes": nominal_attributes, "offset_l2": offset_l2,
        }, self._parameter_constraints)
        self.n_actions, self.epsilon = int(n_actions), float(epsilon)
        self.grace_period, self.delta, self.tau = int(grace_period), float(delta), float(tau)
        if nominal_attributes is not None:
            if isinstance(nominal_attributes, str) or not isinstance(nominal_attributes, Iterable):
                raise ValueError(
                    "nominal_attributes must be None or a list of feature names, "
                    f"got {nominal_attributes!r}"
                )
            nominal_attributes = list(nominal_attributes)
        self.nominal_attributes = nominal_attributes
        # 1 / offset_l2, a new offset's variance, must be finite
        self.offset_l2 = offset_l2 = None if offset_l2 is None else float(offset_l2)
        self.seed = seed
        self._rng = np.random.default_rng(seed)
        #: action -> its reward tree, built when the action first learns
        self.trees: dict[int, tree.HoeffdingTreeRegressor] = {}
        #: the nominal values' offsets (None: trees alone)
        self.offsets = (None if offset_l2 is None
                        else ValueOffsets(self.n_actions, offset_l2, nominal_attributes))

    def __setstate__(self, state: dict) -> None:
        if "trees" not in state:  # pickled with the one classifier tree of earlier versions
            raise TypeError(
                "this egreedy_tree was pickled by an earlier version (one classifier tree); its "
                "state cannot become reward trees: rebuild the model from its events"
            )
        super().__setstate__(state)  # before the values' offsets: boosters._migrations

    def _tree(self, action: int) -> tree.HoeffdingTreeRegressor:
        """Action ``action``'s reward tree (built on first use)."""
        model = self.trees.get(action)
        if model is None:
            model = self.trees[action] = tree.HoeffdingTreeRegressor(
                grace_period=self.grace_period,
                delta=self.delta,
                tau=self.tau,
                leaf_prediction="mean",
                nominal_attributes=self.nominal_attributes,
            )
        return model

    def scores(self, x: dict) -> np.ndarray:
        """The predicted rewards as a length-k vector (actions that never learned score 0)."""
        scores = np.zeros(self.n_actions)
        for action, model in self.trees.items():
            scores[action] = model.predict_one(x)
        if self.offsets is not None:
            scores += self.offsets.predict(self.offsets.rows(x, learn=False))
        return scores

    def _learn(self, action: int, x: dict, reward: float, rows: list[int] | None) -> None:
        """Teach ``action`` one reward: its offsets of ``rows`` (None or empty: none, and the
        tree is not asked for the residual) the residual, then its tree the rest."""
        model = self._tree(action)
        if not rows:
            model.learn_one(x, reward)
            return
        offsets = self.offsets
        assert offsets is not None  # rows come from the offsets
        residual = reward - model.predict_one(x) - offsets.predict_action(rows, action)
        offsets.learn(rows, action, residual)
        model.learn_one(x, reward - offsets.predict_action(rows, action))

    def decide_one(
        self,
        x: dict,
        *,
        allowed: np.ndarray | Sequence[int] | None = None,
        rng: np.random.Generator | None = None,
    ) -> Decision:
        """Epsilon-greedy among ``allowed`` (``None``: all), drawn from ``rng`` if given."""
        check_context(x)
        allowed = check_allowed(allowed, self.n_actions)
        probabilities = _greedy_probabilities(self.scores(x), self.epsilon, allowed)
        return Decision(_draw(self._rng if rng is None else rng, probabilities), probabilities)

    def learn_one(
        self, x: dict, decision: Decision, reward: float | None = None, label: int | None = None
    ) -> None:
        check_context(x)
        played_propensity(decision, self.n_actions)
        r, known = validate_feedback(decision, reward, label, self.n_actions)
        rows = None if self.offsets is None else self.offsets.rows(x, learn=True)
        if known is None:
            self._learn(int(decision.action), x, r, rows)
            return
        for action in range(self.n_actions):
            self._learn(action, x, float(action == known), rows)


class RiverPolicy(OnlineBooster):
    """A River context-free bandit policy that logs the exact probability of every played arm.

    The River policy object (``river.bandit.EpsilonGreedy``, ``UCB``, ``Exp3`` or
    ``ThompsonSampling`` with Beta posteriors) keeps the statistics and is updated with its own
    ``update(arm, reward)``; the arm is drawn here, with the seeded numpy generator, from a
    probability vector that mirrors the policy's rule:

    - ``"epsilon_greedy"``: ``epsilon / k`` on every arm plus ``1 - epsilon`` on River's best arm
      (the max of the arms' mean rewards, unpulled arms counting 0). River breaks ties by taking
      the first arm; here the ``1 - epsilon`` is shared evenly by the tied arms (uniform ties).
    - ``"ucb"``: deterministic argmax of River's bound ``mean + delta * sqrt(2 ln n / n_a)``;
      arms never pulled have an infinite bound; ties (including several unpulled arms) are
      uniform, as in River.
    - ``"exp3"``: River's ``(1 - gamma) * w / sum(w) + gamma / k``. Before River's update,
      ``policy._probabilities`` is set to the decision's logged vector, so the update divides by
      the probability the arm was really drawn with, even when rewards arrive late or out of
      order. When the largest weight passes 1e200 all weights are divided by it (the probabilities
      do not change; River's own weights would overflow after ~10^4 rewarded rounds).
    - ``"thompson"``: the probability that each arm has the largest posterior draw has no closed
      form; it is estimated by Monte Carlo with :attr:`mc_samples` joint draws from the Beta
      posteriors, and the arm is then drawn *from that estimated vector*, so the logged
      propensity is exactly the probability the arm was drawn with (an arm whose estimate is 0
      is not played at that step). Beta posteriors take binary rewards (River's ``Beta.update``
      counts any nonzero reward as a success), so a fractional reward ``r`` is rounded to 1 with
      probability ``r`` by the seeded generator (Agrawal and Goyal's Bernoulli trick).

    The other policies are updated with the real-valued reward; label feedback gives reward 1 if
    the label is the played action, else 0. Decisions ignore the context (it is still validated).

    Parameters
    ----------
    n_actions
        Number of arms k (>= 2).
    policy
        One of ``"epsilon_greedy"``, ``"ucb"``, ``"exp3"``, ``"thompson"``.
    seed
        Seed of the numpy generator that makes every random choice.
    epsilon
        Exploration rate of epsilon-greedy, in [0, 1].
    delta
        UCB confidence multiplier, >= 0 (1 is UCB1).
    gamma
        Exp3 egalitarianism factor, in [0, 1] (River's Exp3 never moves its weights at 0).

    >>> policy = RiverPolicy(n_actions=3, policy="ucb", seed=0)
    >>> d = policy.decide_one({})
    >>> d.probabilities.round(4).tolist()          # no arm pulled yet: all bounds infinite
    [0.3333, 0.3333, 0.3333]
    >>> policy.learn_one({}, d, reward=1.0)
    >>> p = policy.decide_one({}).probabilities     # the two unpulled arms tie
    >>> float(p[d.action]), float(p.sum())
    (0.0, 1.0)
    """

    POLICIES: tuple[str, ...] = ("epsilon_greedy", "ucb", "exp3", "thompson")

    #: Monte Carlo draws per decision for Thompson sampling's propensities.
    mc_samples: int = 1000

    _EXP3_RESCALE = 1e200

    _parameter_constraints: ClassVar[dict[str, list]] = {
        **UniformPolicy._parameter_constraints,
        "policy": [Options(POLICIES)],
        "epsilon": [Interval(float, 0.0, 1.0)],
        "delta": [Interval(float, 0.0, None)],
        "gamma": [Interval(float, 0.0, 1.0)],
    }

    def __init__(
        self,
        n_actions: int,
        policy: str = "epsilon_greedy",
        seed: int | None = None,
        epsilon: float = 0.1,
        delta: float = 1.0,
        gamma: float = 0.1,
    ):
        validate_params({"n_actions": n_actions, "policy": policy, "seed": seed,
                         "epsilon": epsilon, "delta": delta, "gamma": gamma},
                        self._parameter_constraints)
        self.n_actions, self.policy = int(n_actions), policy
        self.epsilon, self.delta, self.gamma = float(epsilon), float(delta), float(gamma)
        self.seed = seed
        self._rng = np.random.default_rng(seed)
        # River's own generator is never used to choose arms; seed it from ours for determinism
        # (Thompson sampling seeds the per-arm Beta objects from it).
        river_seed = int(self._rng.integers(2**32))
        arms = range(self.n_actions)
        # Any: one of four River policies, read through their own (private) statistics
        self._bandit: Any
        if policy == "epsilon_greedy":
            self._bandit = bandit.EpsilonGreedy(epsilon=self.epsilon, seed=river_seed)
        elif policy == "ucb":
            self._bandit = bandit.UCB(delta=self.delta, seed=river_seed)
        elif policy == "exp3":
            self._bandit = bandit.Exp3(gamma=self.gamma, seed=river_seed)
            for arm in arms:  # River's update divides by len(_weights): make it k from the start
                self._bandit._weights[arm]
        else:
            self._bandit = bandit.ThompsonSampling(reward_obj=proba.Beta(), seed=river_seed)

    @property
    def river_policy(self) -> bandit.base.Policy:
        """The River policy object holding the statistics."""
        return self._bandit

    def probabilities(
        self,
        *,
        allowed: np.ndarray | Sequence[int] | None = None,
        rng: np.random.Generator | None = None,
    ) -> np.ndarray:
        """The probability vector the next arm is drawn from (Thompson: a fresh MC estimate).

        ``allowed``: the rule applied to the allowed arms only, 0 on the others. ``rng``:
        Thompson's Monte Carlo draws come from it, and nothing of the policy is written (River's
        per-arm statistics are read without creating missing ones).
        """
        policy, k = self._bandit, self.n_actions
        allowed = check_allowed(allowed, k)
        if rng is None:
            stat = policy._rewards.__getitem__  # creates a missing arm's statistic, as before
        else:
            prototype = policy.reward_obj  # what River would create for a missing arm

            def stat(arm):
                return policy._rewards.get(arm, prototype)

        if self.policy == "epsilon_greedy":
            means = np.array([stat(arm).get() for arm in range(k)], dtype=float)
            return _greedy_probabilities(means, policy.current_epsilon, allowed)
        if self.policy == "ucb":
            bounds = np.full(k, math.inf)
            pulled = [arm for arm in range(k) if arm in policy._rewards]
            if pulled:
                means = np.array([policy._rewards[arm].get() for arm in pulled], dtype=float)
                counts = np.array([policy._counts[arm] for arm in pulled], dtype=float)
                # Same operations, in the same order, as River's UCB._pull (all correctly rounded
                # except the one scalar log), so ties are detected exactly as River does.
                bounds[pulled] = means + self.delta * np.sqrt(2 * math.log(policy._n) / counts)
            return _greedy_probabilities(bounds, 0.0, allowed)
        if self.policy == "exp3":
            weights = np.array([policy._weights[arm] for arm in range(k)], dtype=float)
            if allowed is None:
                total = sum(weights.tolist())  # River's left-to-right sum
                return (1 - self.gamma) * (weights / total) + self.gamma / k
            p = np.zeros(k)
            total = sum(weights[allowed].tolist())  # River's _pull over the allowed arms
            p[allowed] = (1 - self.gamma) * (weights[allowed] / total) + self.gamma / allowed.size
            return p
        arms = range(k) if allowed is None else allowed.tolist()
        alpha = np.array([stat(arm).alpha for arm in arms], dtype=float)
        beta = np.array([stat(arm).beta for arm in arms], dtype=float)
        gen = self._rng if rng is None else rng
        draws = gen.beta(alpha, beta, size=(self.mc_samples, len(arms)))
        counts = np.bincount(draws.argmax(axis=1), minlength=len(arms)) / self.mc_samples
        if allowed is None:
            return counts
        p = np.zeros(k)
        p[allowed] = counts
        return p

    def decide_one(
        self,
        x: dict,
        *,
        allowed: np.ndarray | Sequence[int] | None = None,
        rng: np.random.Generator | None = None,
    ) -> Decision:
        """The policy's arm among ``allowed`` (``None``: all), drawn from ``rng`` if given (then
        without changing the policy)."""
        check_context(x)
        probabilities = self.probabilities(allowed=allowed, rng=rng)
        return Decision(_draw(self._rng if rng is None else rng, probabilities), probabilities)

    def learn_one(
        self, x: dict, decision: Decision, reward: float | None = None, label: int | None = None
    ) -> None:
        check_context(x)
        played_propensity(decision, self.n_actions)
        arm = int(decision.action)
        if self.policy == "thompson":
            correct, _ = self._feedback(decision, reward, label)
            self._bandit.update(arm, correct)
            return
        r, _ = validate_feedback(decision, reward, label, self.n_actions)
        if self.policy == "exp3":
            self._bandit._probabilities = dict(enumerate(decision.probabilities.tolist()))
            self._bandit.update(arm, r)
            weights = self._bandit._weights
            top = max(weights.values())
            if top > self._EXP3_RESCALE:
                for key in weights:
                    weights[key] /= top
        else:
            self._bandit.update(arm, r)
