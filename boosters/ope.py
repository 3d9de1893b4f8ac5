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
  confidence bound: the test "is the target better than the baseline?" at a stated level.
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
>>> diff = paired_difference(a, p, r, target, np.full((4, 2), 0.5), estimator="snips")
>>> diff.value, diff.target_value, diff.baseline_value    # always-0 vs the uniform logger
(0.5, 1.0, 0.5)
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
    "DIFFERENCE_ESTIMATORS",
    "ESTIMATORS",
    "Difference",
    "Estimate",
    "check_level",
    "clipped_ips",
    "cross_fitted_predictions",
    "direct_method",
    "doubly_robust",
    "estimate_all",
    "ips",
    "mean_estimate",
    "paired_difference",
    "snips",
]

#: Estimators :func:`paired_difference` can pair.
DIFFERENCE_ESTIMATORS: tuple[str, ...] = ("dr", "snips")


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


def _check(
    actions: np.ndarray, propensities: np.ndarray, rewards: np.ndarray, target: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
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
    a, p, r, target = _check(actions, propensities, rewards, target)
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
    a, p, r, target = _check(actions, propensities, rewards, target)
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
    a, p, r, target = _check(actions, propensities, rewards, target)
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
    a, p, r, target = _check(actions, propensities, rewards, target)
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
    a, p, r, target = _check(actions, propensities, rewards, target)
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
    a, p, r, target = _check(actions, propensities, rewards, target)
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


@dataclass(frozen=True, slots=True)
class Difference:
    """value(target) - value(baseline), paired on the same events, with a one-sided interval.

    ``low`` is the one-sided lower confidence bound at ``level`` (the interval is
    ``[low, +inf)``): under the normal approximation, P(true difference < low) <= 1 - level.
    ``p_value`` is the one-sided p-value of "the difference is <= 0".
    """

    value: float
    stderr: float
    low: float
    level: float
    n: int
    estimator: str
    target_value: float
    baseline_value: float
    p_value: float

    @property
    def high(self) -> float:
        """The upper end of the one-sided interval: +inf."""
        return math.inf

    @property
    def positive(self) -> bool:
        """Whether the lower bound is above 0 (the target is better at level ``level``)."""
        return self.low > 0.0

    #: JSON-ready form, as :meth:`Estimate.to_dict` (``high``, +inf, becomes None)
    to_dict = Estimate.to_dict


def _snips_influence(w: np.ndarray, r: np.ndarray, name: str) -> tuple[float, np.ndarray]:
    """SNIPS value V = sum w r / sum w and its per-event linearisation V + w_i (r_i - V)/mean(w),
    whose mean is exactly V and whose sample variance is the delta-method one of :func:`snips`."""
    total = w.sum()
    if total <= 0:
        raise ValueError(f"snips needs the {name} to give positive probability to a logged action")
    value = float(np.dot(w, r) / total)
    return value, value + w * (r - value) / w.mean()


def paired_difference(
    actions: np.ndarray,
    propensities: np.ndarray,
    rewards: np.ndarray,
    target: np.ndarray,
    baseline: np.ndarray,
    reward_predictions: np.ndarray | None = None,
    *,
    estimator: str = "dr",
    level: float = 0.95,
) -> Difference:
    """Paired estimate of value(``target``) - value(``baseline``) with a one-sided lower bound.

    ``target`` and ``baseline`` are (n, k) probability matrices on the logged contexts; for the
    usual question, "does a new policy beat the logging policy?", ``baseline`` is the logged
    probability vectors. Per event i the two policies' terms are computed on the same logged
    event and differenced, d_i = t_i - b_i, so everything the two estimates share (the context,
    the reward noise of the logged action) cancels instead of being counted twice or ignored:

    - ``"dr"`` (needs ``reward_predictions`` (n, k)): t_i and b_i are the doubly robust terms
      sum_a pi(a|x_i) rhat(x_i, a) + w_i (r_i - rhat(x_i, a_i)) of each policy. When the
      baseline is the logging policy (propensity p_i = baseline[i, a_i]) its weight is 1 and
      b_i = r_i + sum_a pi_log(a|x_i) rhat(x_i, a) - rhat(x_i, a_i): the logged reward plus a
      control variate of mean zero, so mean(d) is DR applied to the signed difference of the
      two policies; it is unbiased for the difference whenever the propensities are right and
      ``rhat`` does not depend on these events (fit it elsewhere).
    - ``"snips"``: each policy's SNIPS value V = sum w r / sum w, and as its per-event term the
      delta-method linearisation V + w_i (r_i - V) / mean(w) (mean exactly V, the influence
      function of the ratio), so mean(d) is exactly V_target - V_baseline and the sample
      variance of d is the delta-method variance of the difference, covariance included. With
      the logging policy as baseline b_i = r_i: its on-policy mean reward.

    The interval is the normal approximation with the sample standard deviation of d:
    ``low = mean(d) - z_level * std(d, ddof=1) / sqrt(n)``, z_level the one-sided quantile
    (1.645 at 0.95). With fewer than 2 events the bound is -inf.

    >>> import numpy as np
    >>> a = np.array([0, 1, 0, 1, 0, 1]); p = np.full(6, 0.5)
    >>> r = np.array([1.0, 0.0, 1.0, 0.0, 1.0, 1.0])
    >>> logging = np.full((6, 2), 0.5); new = np.array([[0.9, 0.1]] * 6)
    >>> q = np.array([[0.9, 0.3]] * 6)                   # a reward model fitted elsewhere
    >>> d = paired_difference(a, p, r, new, logging, q, level=0.9)
    >>> round(d.value, 4), round(d.target_value - d.baseline_value, 4), round(d.low, 4)
    (0.2667, 0.2667, 0.1108)
    >>> d.positive, d.level
    (True, 0.9)
    """
    level = check_level(level)
    if estimator not in DIFFERENCE_ESTIMATORS:
        raise ValueError(
            f"estimator must be one of {', '.join(DIFFERENCE_ESTIMATORS)}, got {estimator!r}"
        )
    a, p, r, target = _check(actions, propensities, rewards, target)
    base = np.asarray(baseline, dtype=np.float64)
    if base.shape != target.shape:
        raise ValueError(f"baseline must have shape {target.shape}, got {base.shape}")
    w_t, w_b = _weights(a, p, target), _weights(a, p, base)
    if estimator == "dr":
        if reward_predictions is None:
            raise ValueError("the dr difference needs reward_predictions")
        q = _check_predictions(reward_predictions, target.shape)
        residual = r - q[np.arange(a.shape[0]), a]
        t_terms = np.einsum("ij,ij->i", target, q) + w_t * residual
        b_terms = np.einsum("ij,ij->i", base, q) + w_b * residual
        t_value, b_value = float(t_terms.mean()), float(b_terms.mean())
    else:
        t_value, t_terms = _snips_influence(w_t, r, "target")
        b_value, b_terms = _snips_influence(w_b, r, "baseline")
    return _one_sided(t_terms - b_terms, t_value, b_value, estimator, level)


def _one_sided(
    d: np.ndarray, t_value: float, b_value: float, estimator: str, level: float
) -> Difference:
    """The :class:`Difference` of the per-event differences ``d`` (mean t_value - b_value)."""
    n = d.shape[0]
    value = t_value - b_value  # = mean(d), without its rounding
    stderr = float(np.std(d, ddof=1) / math.sqrt(n)) if n > 1 else math.inf
    low = value - NormalDist().inv_cdf(level) * stderr if math.isfinite(stderr) else -math.inf
    if not math.isfinite(stderr):
        p_value = 1.0  # one event: nothing is shown
    elif stderr > 0:
        p_value = 1.0 - NormalDist().cdf(value / stderr)
    else:  # no spread: the difference is exactly what it is
        p_value = 0.0 if value > 0 else 1.0
    return Difference(
        float(value), stderr, float(low), level, n, estimator, t_value, b_value, float(p_value)
    )
