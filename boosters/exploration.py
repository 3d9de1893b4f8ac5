"""Exploration and loss estimation for bandit feedback (Zhang et al. 2019).

More: docs/boosters.md, "boosters/exploration.py".

>>> p = exploration_distribution(yhat=1, k=3, rho=0.1)
>>> p.tolist()
[0.05, 0.9, 0.05]
>>> loss_estimate(yhat=1, ytilde=1, correct=True, p=p).round(4).tolist()   # case A
[1.1111, 0.0, 1.1111]
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable

import numpy as np

__all__ = [
    "check_allowed",
    "complete_probabilities",
    "MAX_AUTO_DECAY",
    "ROUNDS_PER_ACTION",
    "DRIFT_DELTA",
    "DRIFT_THRESHOLD",
    "decayed_rate",
    "dr_loss_estimate",
    "draw",
    "estimated_costs",
    "exploration_distribution",
    "explore",
    "forget_pending",
    "full_information_loss",
    "loss_estimate",
    "MISS_REFERENCE",
    "MissDrift",
    "make_drift",
    "missed_rate",
    "mask_scores",
    "naive_loss_estimate",
    "restrict",
    "schedule_clock",
    "scheduled_rate",
    "track_misses",
]


def check_allowed(allowed: Iterable[int] | None, k: int) -> np.ndarray | None:
    """The allowed actions as a sorted array of distinct indices, or ``None`` for "all k".

    ``allowed`` is ``None`` or a non-empty sequence of 0-based action indices (repeats are
    ignored). A sequence naming all ``k`` actions gives ``None`` too, so an unrestricted decision
    is the same whichever way it is asked for.

    >>> check_allowed([2, 0, 2], 4).tolist(), check_allowed(range(3), 3)
    ([0, 2], None)
    >>> check_allowed([], 3)
    Traceback (most recent call last):
    ...
    ValueError: allowed must name at least one action
    """
    if allowed is None:
        return None
    if isinstance(allowed, str | bytes | dict) or not isinstance(allowed, Iterable):
        raise TypeError(f"allowed must be a sequence of action indices, got {allowed!r}")
    values = list(allowed)
    for a in values:
        if isinstance(a, bool | np.bool_) or not isinstance(a, numbers.Integral):
            raise TypeError(f"allowed actions must be integer indices, got {a!r}")
        if not 0 <= a < k:
            raise ValueError(f"allowed action {a} is outside 0..{k - 1}")
    if not values:
        raise ValueError("allowed must name at least one action")
    result = np.unique(np.asarray(values, dtype=np.int64))
    return None if result.size == k else result


def mask_scores(scores: np.ndarray, allowed: np.ndarray | None) -> np.ndarray:
    """``scores`` (..., k) as floats with ``-inf`` on the excluded actions (as is if ``None``).

    An argmax of the result is an argmax among the allowed actions, ties among them only.

    >>> mask_scores(np.array([3, 1, 2]), np.array([1, 2])).tolist()
    [-inf, 1.0, 2.0]
    """
    if allowed is None:
        return scores
    out = np.full(np.shape(scores), -np.inf)
    out[..., allowed] = np.asarray(scores)[..., allowed]
    return out


#: the default schedule's decay (``rho_decay="auto"``): 5 learning rounds per action, at most
#: 100 rounds (docs/boosters.md, "Exploration schedule")
ROUNDS_PER_ACTION = 5
MAX_AUTO_DECAY = 100
#: the label types :func:`dr_loss_estimate` hands to its compiled loop
_INTS = (int, np.int64)


def decay_rounds(decay: float | str, k: int | None) -> float:
    """The schedule's decay in rounds: ``decay``, or for ``"auto"`` ``min(5 k, 100)``.

    >>> decay_rounds("auto", 3), decay_rounds("auto", 26), decay_rounds(40.0, 3)
    (15, 100, 40.0)
    """
    if decay == "auto":
        assert k is not None  # "auto" is per action: every caller with it passes k
        return min(ROUNDS_PER_ACTION * k, MAX_AUTO_DECAY)
    assert not isinstance(decay, str)  # "auto" is the one string (check_schedule)
    return decay


#: the prediction's miss rate at and above which the schedule's rate holds; below it the rate
#: shrinks in proportion (docs/boosters.md, "Exploration schedule")
MISS_REFERENCE = 0.25


def missed_rate(miss: float, missed: bool, decay: float | str, k: int) -> float:
    """The prediction's miss rate after one more round that played it: a moving average over
    about :func:`decay_rounds` rounds. The rounds that play the prediction are drawn
    independently of the context, so their misses estimate the prediction's without bias.

    >>> round(missed_rate(0.5, False, "auto", 3), 4), round(missed_rate(0.5, True, 10.0, 3), 4)
    (0.4667, 0.55)
    """
    step = 1.0 / decay_rounds(decay, k)
    return (1.0 - step) * miss + step * float(missed)


def decayed_rate(
    rho: float, t: int, decay: float | str | None, floor: float, k: int | None = None,
    miss: float | None = None, low: float | None = None,
) -> float:
    """The exploration rate after ``t`` learning rounds: ``rho`` when ``decay`` is None (eq. 2's
    constant rate), else ``rho / sqrt(1 + t / decay)`` kept at or above ``min(floor, rho)``
    (docs/boosters.md, "Exploration schedule"). ``decay="auto"`` is ``5 k`` rounds for ``k``
    actions, at most 100: the rate falls with the rounds each action has had on average. With
    the prediction's ``miss`` rate (:func:`missed_rate`), the decayed rate is scaled by
    ``min(1, miss / MISS_REFERENCE)``: a prediction that is rarely wrong has little to learn
    from exploring. With ``low`` too, the floor itself follows the miss rate down to ``low``
    (``min(floor, max(low, miss))``): at the floor, exploring at most doubles the misses. Every
    propensity of eq. 2 stays at least ``min(floor, rho, low) / (k - 1)``.

    >>> decayed_rate(0.1, 0, 100.0, 0.01), decayed_rate(0.1, 300, 100.0, 0.01)
    (0.1, 0.05)
    >>> decayed_rate(0.1, 10**6, 100.0, 0.01), decayed_rate(0.1, 10**6, None, 0.01)
    (0.01, 0.1)
    >>> decayed_rate(0.1, 60, "auto", 0.01, k=4), decayed_rate(0.1, 300, "auto", 0.01, k=26)
    (0.05, 0.05)
    >>> decayed_rate(0.1, 60, "auto", 0.01, 4, miss=0.125), decayed_rate(0.1, 0, 10.0, 0.01, 3, 0.0)
    (0.025, 0.01)
    >>> decayed_rate(0.1, 10**6, 10.0, 0.01, 3, miss=0.004, low=0.002)
    0.004
    >>> decayed_rate(0.1, 10**6, 10.0, 0.01, 3, miss=0.0, low=0.002)
    0.002
    """
    if decay is None:
        return rho
    rate = rho / math.sqrt(1.0 + t / decay_rounds(decay, k))
    floor = min(floor, rho)
    if miss is not None:
        rate *= min(1.0, miss / MISS_REFERENCE)
        if low is not None:
            floor = min(floor, max(low, miss))
    return max(floor, rate)


def schedule_clock(booster) -> int:
    """The learning rounds ``booster``'s schedule counts: all of them, or those since the last
    alarm of its ``drift_restart`` test (:class:`MissDrift`)."""
    drift = booster.miss_drift
    return booster.n_updates if drift is None else booster.n_updates - drift.start


def scheduled_rate(booster) -> float:
    """The exploration rate of ``booster``'s next decision: its schedule after its learning
    rounds (:func:`schedule_clock`), scaled by its prediction's miss rate with
    ``rho_by_misses``, the floor following that rate down to ``rho_min`` (:func:`decayed_rate`)."""
    miss = booster.miss_rate if booster.rho_by_misses else None
    return decayed_rate(
        booster.rho, schedule_clock(booster), booster.rho_decay, booster.rho_floor,
        booster.n_actions, miss, booster.rho_min,
    )


def track_misses(booster, decision, correct: bool, label: int | None) -> None:
    """``booster``'s prediction's miss rate (``rho_by_misses``, on a schedule) and its
    ``drift_restart`` test (:class:`MissDrift`) after a round that played the prediction, or
    any round with the ``label``; an alarm restarts the schedule's clock."""
    tracked = booster.rho_by_misses and booster.rho_decay is not None
    drift = booster.miss_drift
    if not tracked and drift is None:
        return
    yhat = int(decision.internals["yhat"])
    if label is None and decision.action != yhat:  # an explored miss says nothing of yhat
        return
    missed = yhat != label if label is not None else not correct
    if tracked:
        booster.miss_rate = missed_rate(
            booster.miss_rate, missed, booster.rho_decay, booster.n_actions
        )
    if drift is not None and drift.update(missed):
        drift.alarm(booster.n_updates)


#: the Page-Hinkley test of ``drift_restart`` (:class:`MissDrift`): the rise of the miss rate it
#: tolerates and the excess of summed misses over it that raises the alarm
DRIFT_DELTA, DRIFT_THRESHOLD = 0.1, 20.0


class MissDrift:
    """A Page-Hinkley test for a rise of the prediction's miss rate, on the misses
    :func:`track_misses` sees (docs/boosters.md, "Exploration schedule"): with ``m_n`` the mean
    of the first ``n`` misses since the last alarm, ``S_n = sum_i (miss_i - m_i - delta)``, an
    alarm when ``S_n`` is more than ``threshold`` above its lowest value. ``mode``: the booster's
    ``drift_restart``; ``start``: the learning round the schedule's clock counts from (0 until
    the first alarm); ``pending``: the booster is to forget at the end of this round.

    >>> drift = MissDrift("model")
    >>> [drift.update(False) for _ in range(500)].count(True)
    0
    >>> [drift.update(True) for _ in range(40)].index(True) + 1   # misses before the alarm
    23
    """

    def __init__(self, mode: str, delta: float = DRIFT_DELTA, threshold: float = DRIFT_THRESHOLD):
        self.mode, self.delta, self.threshold = mode, delta, threshold
        self.start = self.restarts = 0
        self.pending = False
        self.reset()

    def reset(self) -> None:
        """Forget the misses seen: the test starts again."""
        self.n, self.mean, self.sum, self.low = 0, 0.0, 0.0, 0.0

    def update(self, missed: bool) -> bool:
        """One more miss (or hit) of the played prediction; whether the alarm is raised."""
        self.n += 1
        self.mean += (float(missed) - self.mean) / self.n
        self.sum += float(missed) - self.mean - self.delta
        self.low = min(self.low, self.sum)
        return self.sum - self.low > self.threshold

    def alarm(self, rounds: int) -> None:
        """After an alarm at ``rounds`` learning rounds: the clock restarts there, the test
        starts again, and with ``"model"`` the booster is to forget (:func:`forget_pending`)."""
        self.reset()
        self.start, self.restarts = rounds, self.restarts + 1
        self.pending = self.mode == "model"


def make_drift(mode: str | None) -> MissDrift | None:
    """The test of a booster's ``drift_restart`` (None: no test)."""
    return None if mode is None else MissDrift(mode)


def forget_pending(booster) -> bool:
    """Whether ``booster`` forgot what it learned now (its ``_forget``: an alarm of
    ``drift_restart="model"`` was pending); the alarm is then cleared."""
    drift = booster.miss_drift
    if drift is None or not drift.pending:
        return False
    drift.pending = False
    booster._forget()
    return True


def exploration_distribution(
    yhat: int, k: int, rho: float, allowed: np.ndarray | None = None
) -> np.ndarray:
    """Eq. 2: ``1 - rho`` on ``yhat`` and ``rho / (k - 1)`` on every other label.

    With ``allowed`` (from :func:`check_allowed`), eq. 2 over the allowed actions: ``k`` becomes
    ``|A|``, the excluded actions get 0, and ``yhat`` (which must be allowed) gets everything
    when it is the only allowed action.

    >>> exploration_distribution(2, 4, 0.2, np.array([0, 2, 3])).tolist()
    [0.1, 0.0, 0.8, 0.1]
    """
    if allowed is None:
        p = np.full(k, rho / (k - 1))
        p[yhat] = 1.0 - rho
        return p
    if yhat not in allowed:
        raise ValueError(f"the prediction {yhat} is not an allowed action")
    p = np.zeros(k)
    if allowed.size == 1:
        p[yhat] = 1.0
        return p
    p[allowed] = rho / (allowed.size - 1)
    p[yhat] = 1.0 - rho
    return p


def explore(yhat: int, k: int, rho: float, u: float, allowed: np.ndarray | None = None) -> int:
    """The eq. 2 draw from one uniform ``u`` in [0, 1): ``yhat`` if ``u < 1 - rho``, else the
    allowed action of rank ``floor((u - (1 - rho)) / rho * (m - 1))`` among the ``m - 1`` others
    (``m = k``, or ``|A|`` with ``allowed``). Exactly the distribution of
    :func:`exploration_distribution`.

    >>> allowed = np.array([1, 3])
    >>> explore(1, 3, 0.1, 0.5), explore(1, 3, 0.1, 0.99), explore(1, 4, 0.1, 0.99, allowed)
    (1, 2, 3)
    """
    if u < 1.0 - rho:
        return yhat
    if allowed is None:
        other = min(int((u - (1.0 - rho)) / rho * (k - 1)), k - 2)
        return other + (other >= yhat)
    m = allowed.size
    if m == 1:
        return yhat
    other = min(int((u - (1.0 - rho)) / rho * (m - 1)), m - 2)
    others = allowed[allowed != yhat]
    return int(others[other])


def restrict(p: np.ndarray, allowed: np.ndarray | None) -> np.ndarray:
    """``p`` with the excluded actions zeroed and the rest renormalised (uniform over the allowed
    actions if they had no mass). For a *fixed* policy's probabilities (a published offline
    policy): logging the result keeps its importance weights right on the allowed actions. A
    booster restricts its own rule instead (``decide_one(x, allowed=...)``): renormalising a
    booster's eq. 2 after the fact would bias its loss estimate (docs/boosters.md,
    "boosters/exploration.py").

    ``allowed``: the allowed action indices of one vector ``p``, or a boolean mask shaped like
    ``p`` (rows of events; entries only grow, so a floor still holds on the allowed actions).

    >>> restrict(np.array([0.5, 0.25, 0.25]), np.array([1, 2])).tolist()
    [0.0, 0.5, 0.5]
    >>> restrict(np.array([[0.2, 0.3, 0.5]]), np.array([[True, True, False]])).round(3).tolist()
    [[0.4, 0.6, 0.0]]
    """
    p = np.array(p, dtype=float)
    if allowed is None:
        return p
    mask = np.asarray(allowed)
    if mask.dtype != np.bool_:
        mask = np.zeros(p.shape, dtype=bool)
        mask[allowed] = True
    out = np.where(mask, p, 0.0)
    has_mass = out.sum(axis=-1, keepdims=True) > 0.0
    out = np.where(has_mass, out, mask.astype(np.float64))
    return out / out.sum(axis=-1, keepdims=True)


def draw(p: np.ndarray, rng: np.random.Generator) -> int:
    """One action from ``p`` by inverse CDF with one ``rng.random()``; never an action of
    probability 0.

    >>> draw(np.array([0.0, 1.0, 0.0]), np.random.default_rng(0))
    1
    """
    action = int(np.searchsorted(np.cumsum(p), rng.random() * p.sum(), side="right"))
    action = min(action, len(p) - 1)
    while p[action] == 0.0:  # guard against rounding at the edge of the cumsum
        action -= 1
    return action


def loss_estimate(
    yhat: int, ytilde: int, correct: bool, p: np.ndarray, allowed: np.ndarray | None = None
) -> np.ndarray:
    """Eq. 4, the proposed unbiased estimate of the 0-1 loss vector ``1 - e_y``.

    Needs only the bandit bit ``correct`` (= ``ytilde == y``), the prediction before exploration
    ``yhat``, the played label ``ytilde`` and the distribution ``p`` it was drawn from.

    With ``allowed`` (a restricted decision: ``p`` is 0 off ``allowed`` and ``yhat`` is allowed),
    the allowed coordinates other than ``yhat`` are ``1 - 1{ytilde = j, correct} / p_j``, so that
    every allowed coordinate is unbiased even when the label is excluded; docs/boosters.md
    ("boosters/exploration.py", "Restricted decisions") says exactly what is unbiased.

    >>> p = exploration_distribution(0, 4, 0.2, np.array([0, 1, 2]))
    >>> loss_estimate(0, 1, True, p, np.array([0, 1, 2])).tolist()
    [0.0, -9.0, 1.0, 10.0]
    """
    lhat = np.zeros(p.shape[0])
    inv = 1.0 / p[ytilde]
    if correct:  # y = ytilde is known: loss on every label other than y and yhat
        lhat[:] = inv
        lhat[ytilde] = 0.0
        lhat[yhat] = 0.0
    elif ytilde == yhat:  # not explored and wrong: yhat is known to be wrong
        lhat[yhat] = inv
    if allowed is not None:
        _allowed_by_reward(lhat, allowed[allowed != yhat], ytilde, correct, inv)
    return lhat


def dr_loss_estimate(
    yhat: int,
    ytilde: int,
    correct: bool,
    p: np.ndarray,
    baseline: np.ndarray,
    max_weight: float | None = None,
) -> np.ndarray:
    """Eq. 4 made doubly robust: ``baseline`` (k,), a guess of the loss vector made without this
    round's draw (one minus a reward model's estimates), plus eq. 4's importance-weighted
    correction of the guess. Unbiased for ``1 - e_y`` whatever the guess; a good guess gives
    every round, not only the correct ones, a loss on every label (docs/boosters.md, "Doubly
    robust estimates"). For unrestricted decisions (eq. 2 over all ``k`` labels).

    - ``yhat``: ``b + 1{ytilde = yhat} (1{wrong} - b) / p_yhat`` (the played label's reward);
    - every other ``j``: ``b_j + 1{correct} (1{j != ytilde} - b_j) / p_ytilde`` (a correct round
      reveals the whole vector; it happens with probability ``p_y``).

    ``max_weight``: the importance weights ``1 / p`` clipped at it (a biased estimate, towards
    the guess, with every coordinate within ``max_weight + 1`` of it: AdaBandit's Hedge,
    docs/boosters.md, "The Hedge's losses"); None is the unbiased estimate.

    >>> p = exploration_distribution(0, 3, 0.1)
    >>> dr_loss_estimate(0, 0, False, p, np.array([0.2, 0.9, 0.4])).round(4).tolist()
    [1.0889, 0.9, 0.4]
    >>> (dr_loss_estimate(0, 0, False, p, np.zeros(3)) == loss_estimate(0, 0, False, p)).all()
    np.True_
    >>> dr_loss_estimate(0, 1, True, p, np.full(3, 0.5), max_weight=5.0).tolist()
    [0.5, -2.0, 3.0]
    """
    if (type(p) is type(baseline) is np.ndarray and p.dtype == baseline.dtype == np.float64
            and p.shape == baseline.shape == (p.size,) and type(yhat) in _INTS
            and type(ytilde) in _INTS and 0 <= yhat < p.size and 0 <= ytilde < p.size):
        from learners.round_loops import dr_losses  # the same floats in one compiled call
        return dr_losses(yhat, ytilde, bool(correct), p, baseline,
                         np.inf if max_weight is None else float(max_weight))
    lhat = np.array(baseline, dtype=np.float64)
    if correct:
        truth = np.ones_like(lhat)
        truth[ytilde] = 0.0
        lhat += (truth - lhat) * _weight(p[ytilde], max_weight)
    lhat[yhat] = baseline[yhat]
    if ytilde == yhat:
        lhat[yhat] += ((0.0 if correct else 1.0) - baseline[yhat]) * _weight(p[yhat], max_weight)
    return lhat


def _weight(p: float, max_weight: float | None) -> float:
    """The importance weight ``1 / p``, at most ``max_weight`` when given."""
    return 1.0 / p if max_weight is None else min(1.0 / p, max_weight)


def _allowed_by_reward(lhat, coords, ytilde, correct, inv) -> None:
    """Set ``lhat[coords]`` to ``1 - 1{ytilde = j, correct} / p_j`` (one minus the
    importance-weighted reward of ``j``): unbiased for ``1{j != y}`` whatever the label."""
    lhat[coords] = 1.0
    if correct and ytilde in coords:
        lhat[ytilde] = 1.0 - inv


def naive_loss_estimate(
    ytilde: int, correct: bool, p: np.ndarray, allowed: np.ndarray | None = None
) -> np.ndarray:
    """Eq. 3, the naive unbiased estimate (zero in every mistake round; not used by default).

    With ``allowed``, every allowed coordinate is ``1 - 1{ytilde = j, correct} / p_j`` (as for
    :func:`loss_estimate`); the excluded ones stay eq. 3's.
    """
    lhat = np.zeros(p.shape[0])
    if correct:
        lhat[:] = 1.0 / p[ytilde]
        lhat[ytilde] = 0.0
    if allowed is not None:
        _allowed_by_reward(lhat, allowed, ytilde, correct, 1.0 / p[ytilde])
    return lhat


def full_information_loss(y: int, k: int) -> np.ndarray:
    """The true 0-1 loss vector ``1 - e_y`` (eq. 1), used when the label is known."""
    loss = np.ones(k)
    loss[y] = 0.0
    return loss


def estimated_costs(cost_matrices: np.ndarray, lhat: np.ndarray) -> np.ndarray:
    """Eq. 5: ``C^i (1 - lhat)`` for every learner; ``cost_matrices`` is (N, k, k), result (N, k).

    Column ``r`` of ``C^i`` is the cost vector learner ``i`` would get if ``r`` were the truth.
    """
    return cost_matrices @ (1.0 - lhat)


def complete_probabilities(probabilities: Iterable[float | None]) -> np.ndarray:
    """A probability vector with its unknown entries (None or NaN: a log that recorded only the
    chosen action's probability) given equal shares of the rest of the mass. An assumption of
    whoever needs a whole vector in memory, never something to write back to a log.

    >>> complete_probabilities([0.5, None, None, 0.0]).tolist()
    [0.5, 0.25, 0.25, 0.0]
    >>> complete_probabilities([0.25, float("nan"), 0.75]).tolist()
    [0.25, 0.0, 0.75]
    """
    p = np.array([np.nan if v is None else v for v in probabilities], dtype=np.float64)
    unknown = np.isnan(p)
    if unknown.any():
        p[unknown] = max(0.0, 1.0 - float(np.nansum(p))) / int(unknown.sum())
    return p
