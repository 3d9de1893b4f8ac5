"""Off-policy estimators of a target policy's value from logged bandit data.

Implements the IPS estimator of London, Lu, Sandler, Joachims, *Boosted Off-Policy Learning*
(AISTATS 2023; docs/papers.md), Sec. 3.2, Eq. (6), unbiased under full support; clipping,
self-normalised IPS and doubly robust estimators, which that section names as complementary
options (Swaminathan & Joachims 2015; Dudik et al. 2011); and DM with a reward model (the
reward-regression baselines of its Sec. 5.2).

Every estimator takes the logged actions ``a`` (n,), propensities ``p`` (n,) of the logging policy,
observed rewards ``r`` (n,) and the target policy's probability matrix ``target`` (n, k) on the
logged contexts, and returns an :class:`Estimate` (value and a normal-approximation confidence
interval at ``level``). Everything is vectorised (throughput: benchmarks/RESULTS.md, "Off-policy
evaluation throughput").

- :func:`ips`: mean of w_i r_i, w_i = pi(a_i|x_i) / p_i.
- :func:`clipped_ips`: mean of min(w_i, clip) r_i (biased toward 0 for r >= 0, lower variance).
- :func:`snips`: sum w r / sum w; interval by the delta method.
- :func:`direct_method`: mean of sum_a pi(a|x_i) rhat(x_i, a).
- :func:`doubly_robust`: DM plus w_i (r_i - rhat(x_i, a_i)).
- :func:`paired_difference`: value(target) - value(baseline) on the *same* events, from per-event
  differences of the two policies' DR (or linearised SNIPS) terms, with a one-sided lower
  confidence bound by betting: the test "is the target better than the baseline?" at a stated
  level, valid whatever the terms' distribution above their lowest possible value. It lives in
  :mod:`boosters.ope_difference` (with :class:`Difference`, :data:`DIFFERENCE_ESTIMATORS` and the
  bound), which builds on this module.
- :func:`estimate_all`: several of the above on the same events (Open Bandit Pipeline style).
- :func:`mean_estimate`: a mean with its normal interval (the rejection replay's estimate).
- :func:`cross_fitted_predictions`: reward predictions for DM/DR, each half of the events
  predicted by a model fitted on the other half.

>>> import numpy as np
>>> a = np.array([0, 1, 0, 1]); p = np.full(4, 0.5); r = np.array([1.0, 0.0, 1.0, 0.0])
>>> target = np.array([[1.0, 0.0]] * 4)              # always play action 0
>>> est = ips(a, p, r, target)
>>> est.value, round(est.stderr, 4)
(1.0, 0.5774)
>>> snips(a, p, r, target).value
1.0
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np

from boosters._params import check_logged

__all__ = [
    "ESTIMATORS",
    "Estimate",
    "check_events",
    "check_level",
    "clipped_ips",
    "cross_fitted_predictions",
    "direct_method",
    "doubly_robust",
    "estimate_all",
    "ips",
    "mean_estimate",
    "snips",
]

@dataclass(frozen=True, slots=True)
class Estimate:
    """A policy-value estimate with its normal-approximation interval ``[low, high]``."""

    value: float
    stderr: float
    low: float
    high: float
    level: float
    n: int

    def covers(self, true_value: float) -> bool:
        """Whether ``true_value`` lies in the interval."""
        return self.low <= true_value <= self.high

    @classmethod
    def undefined(cls, level: float, n: int) -> Estimate:
        """No estimate on ``n`` events: a NaN value, the whole line as its interval."""
        return cls(math.nan, math.inf, -math.inf, math.inf, level, n)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (non-finite numbers become None).

        >>> Estimate.undefined(0.9, 0).to_dict()
        {'value': None, 'stderr': None, 'low': None, 'high': None, 'level': 0.9, 'n': 0}
        """
        return {
            "value": _finite(self.value),
            "stderr": _finite(self.stderr),
            "low": _finite(self.low),
            "high": _finite(self.high),
            "level": self.level,
            "n": self.n,
        }


def _finite(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


def check_level(level: float) -> float:
    """``level`` as a float in (0, 1) (a confidence level), else a ValueError."""
    if (
        isinstance(level, bool)
        or not isinstance(level, numbers.Real)
        or math.isnan(level)
        or not 0.0 < level < 1.0
    ):
        raise ValueError(f"level must be a number in (0, 1), got {level!r}")
    return float(level)


def check_events(
    actions: np.ndarray, propensities: np.ndarray, rewards: np.ndarray, target: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The logged events and the target's (n, k) probability matrix on them, checked
    (ValueError) and as arrays: ``(actions, propensities, rewards, target)``."""
    target = np.asarray(target, dtype=np.float64)
    if target.ndim != 2:
        raise ValueError(f"target must be a 2-D probability matrix (n, k), got {target.shape}")
    n, k = target.shape
    if n == 0:
        raise ValueError("target must hold at least one logged event")
    a, p, r = check_logged(actions, propensities, rewards, n, k)
    return a, p, r, target


def _interval(value: float, terms: np.ndarray, level: float) -> Estimate:
    n = terms.shape[0]
    stderr = float(np.std(terms, ddof=1) / math.sqrt(n)) if n > 1 else math.inf
    z = NormalDist().inv_cdf(0.5 + level / 2.0)
    return Estimate(float(value), stderr, value - z * stderr, value + z * stderr, level, n)


def mean_estimate(values: np.ndarray, level: float = 0.95) -> Estimate:
    """The mean of ``values`` with its normal interval (undefined for no value).

    >>> est = mean_estimate(np.array([1.0, 0.0, 1.0, 0.0]))
    >>> est.value, round(est.stderr, 4), est.n
    (0.5, 0.2887, 4)
    """
    values = np.asarray(values, dtype=np.float64)
    if values.size == 0:
        return Estimate.undefined(level, 0)
    return _interval(float(values.mean()), values, level)


def _weights(a: np.ndarray, p: np.ndarray, target: np.ndarray) -> np.ndarray:
    return target[np.arange(a.shape[0]), a] / p


def _check_predictions(reward_predictions: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    q = np.asarray(reward_predictions, dtype=np.float64)
    if q.shape != shape:
        raise ValueError(f"reward_predictions must have shape {shape}, got {q.shape}")
    return q


def ips(
    actions: np.ndarray,
    propensities: np.ndarray,
    rewards: np.ndarray,
    target: np.ndarray,
    *,
    level: float = 0.95,
) -> Estimate:
    """Inverse propensity scoring: mean_i r_i pi(a_i|x_i) / p_i (Eq. 6 with the sign flipped)."""
    level = check_level(level)
    a, p, r, target = check_events(actions, propensities, rewards, target)
    terms = _weights(a, p, target) * r
    return _interval(float(terms.mean()), terms, level)


def clipped_ips(
    actions: np.ndarray,
    propensities: np.ndarray,
    rewards: np.ndarray,
    target: np.ndarray,
    *,
    clip: float = 100.0,
    level: float = 0.95,
) -> Estimate:
    """IPS with importance weights clipped at ``clip`` (> 0): mean_i min(w_i, clip) r_i."""
    if (
        isinstance(clip, bool)
        or not isinstance(clip, numbers.Real)
        or math.isnan(clip)
        or not clip > 0
    ):
        raise ValueError(f"clip must be a number > 0, got {clip!r}")
    level = check_level(level)
    a, p, r, target = check_events(actions, propensities, rewards, target)
    terms = np.minimum(_weights(a, p, target), clip) * r
    return _interval(float(terms.mean()), terms, level)


def snips(
    actions: np.ndarray,
    propensities: np.ndarray,
    rewards: np.ndarray,
    target: np.ndarray,
    *,
    level: float = 0.95,
) -> Estimate:
    """Self-normalised IPS: sum w r / sum w (Swaminathan & Joachims 2015); delta-method stderr.

    The linearisation of the ratio gives per-event terms w_i (r_i - V) / mean(w).
    """
    level = check_level(level)
    a, p, r, target = check_events(actions, propensities, rewards, target)
    w = _weights(a, p, target)
    total = w.sum()
    if total <= 0:
        raise ValueError("snips needs the target to give positive probability to a logged action")
    value = float(np.dot(w, r) / total)
    terms = w * (r - value) / w.mean()
    est = _interval(0.0, terms, level)
    return Estimate(value, est.stderr, value + est.low, value + est.high, level, est.n)


def direct_method(
    actions: np.ndarray,
    propensities: np.ndarray,
    rewards: np.ndarray,
    target: np.ndarray,
    reward_predictions: np.ndarray,
    *,
    level: float = 0.95,
) -> Estimate:
    """Direct method: mean_i sum_a pi(a|x_i) rhat(x_i, a); ``reward_predictions`` is (n, k).

    The interval covers only the sampling variance over contexts, not the model's bias.
    """
    level = check_level(level)
    a, p, r, target = check_events(actions, propensities, rewards, target)
    q = _check_predictions(reward_predictions, target.shape)
    terms = np.einsum("ij,ij->i", target, q)
    return _interval(float(terms.mean()), terms, level)


def doubly_robust(
    actions: np.ndarray,
    propensities: np.ndarray,
    rewards: np.ndarray,
    target: np.ndarray,
    reward_predictions: np.ndarray,
    *,
    level: float = 0.95,
) -> Estimate:
    """Doubly robust: DM + mean_i w_i (r_i - rhat(x_i, a_i)); unbiased if p is correct."""
    level = check_level(level)
    a, p, r, target = check_events(actions, propensities, rewards, target)
    q = _check_predictions(reward_predictions, target.shape)
    rows = np.arange(a.shape[0])
    terms = np.einsum("ij,ij->i", target, q) + _weights(a, p, target) * (r - q[rows, a])
    return _interval(float(terms.mean()), terms, level)


#: The estimators :func:`estimate_all` runs by name; ``dm`` and ``dr`` need reward predictions.
ESTIMATORS: dict[str, Callable[..., Estimate]] = {
    "ips": ips,
    "clipped_ips": clipped_ips,
    "snips": snips,
    "dm": direct_method,
    "dr": doubly_robust,
}
_MODEL_BASED = ("dm", "dr")


def estimate_all(
    actions: np.ndarray,
    propensities: np.ndarray,
    rewards: np.ndarray,
    target: np.ndarray,
    reward_predictions: np.ndarray | None = None,
    *,
    estimators: Sequence[str] = ("ips", "snips", "dr"),
    level: float = 0.95,
) -> tuple[dict[str, Estimate], dict[str, str]]:
    """Several estimators of :data:`ESTIMATORS` on the same logged events (the meta-estimator
    of Open Bandit Pipeline): ``(estimates by name in the order asked, undefined)``.

    The inputs are checked once (ValueError). An estimator whose value is undefined on these
    events (SNIPS when the target gives no logged action positive probability) gets
    :meth:`Estimate.undefined` and its reason in ``undefined``.

    >>> a = np.array([0, 1]); p = np.full(2, 0.5); r = np.array([1.0, 0.0])
    >>> est, undefined = estimate_all(a, p, r, np.array([[0.0, 1.0]] * 2), estimators=("snips",))
    >>> est["snips"].value, undefined
    (0.0, {})
    >>> est, undefined = estimate_all(a[:1], p[:1], r[:1], np.array([[0.0, 1.0]]),
    ...                               estimators=("ips", "snips"))
    >>> est["ips"].value, undefined["snips"]
    (0.0, 'snips needs the target to give positive probability to a logged action')
    """
    unknown = [name for name in estimators if name not in ESTIMATORS]
    if unknown:
        raise ValueError(f"unknown estimator {unknown[0]!r}; choose from {', '.join(ESTIMATORS)}")
    level = check_level(level)
    a, p, r, target = check_events(actions, propensities, rewards, target)
    if reward_predictions is None and any(name in _MODEL_BASED for name in estimators):
        raise ValueError("dm and dr need reward_predictions")
    estimates: dict[str, Estimate] = {}
    undefined: dict[str, str] = {}
    for name in estimators:
        extra = (reward_predictions,) if name in _MODEL_BASED else ()
        try:
            estimates[name] = ESTIMATORS[name](a, p, r, target, *extra, level=level)
        except ValueError as exc:
            estimates[name] = Estimate.undefined(level, a.shape[0])
            undefined[name] = str(exc)
    return estimates, undefined


def cross_fitted_predictions(
    X: np.ndarray,
    actions: np.ndarray,
    propensities: np.ndarray,
    rewards: np.ndarray,
    fit: Callable[..., Callable[[np.ndarray], np.ndarray]],
    *,
    seed: int = 0,
) -> np.ndarray | None:
    """Reward predictions (n, k) for DM and DR with no event scored by a model that saw it:
    the rows are split in two seeded halves, each predicted by a model fitted on the other.

    ``fit(X, actions, propensities, rewards)`` fits a reward model and returns its prediction
    function (m rows -> (m, k)). None when a half has fewer than 2 rows to fit on or none to
    predict.

    >>> def fit(X, a, p, r):                  # the mean reward of each action, whatever x
    ...     means = np.array([r[a == j].mean() for j in range(2)])
    ...     return lambda rows: np.tile(means, (len(rows), 1))
    >>> X = np.zeros((8, 1)); a = np.array([0, 1] * 4); r = np.array([1.0, 0.0] * 4)
    >>> cross_fitted_predictions(X, a, np.full(8, 0.5), r, fit, seed=1)[:2]
    array([[1., 0.],
           [1., 0.]])
    """
    n = actions.shape[0]
    fold = np.random.default_rng([int(seed), 0xD2]).integers(2, size=n)
    q: np.ndarray | None = None
    for f in (0, 1):
        train, test = fold != f, fold == f
        if train.sum() < 2 or test.sum() < 1:
            return None
        predict = fit(X[train], actions[train], propensities[train], rewards[train])
        scores = np.asarray(predict(X[test]), dtype=np.float64)
        if q is None:
            q = np.empty((n, scores.shape[1]))
        q[test] = scores
    return q
