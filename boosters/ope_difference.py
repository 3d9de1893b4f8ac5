"""The paired difference of two policies' values on the same logged events, with a one-sided
lower bound by betting: the worker's publish gate (docs/training.md, step 5). Its public names
are re-exported by :mod:`boosters.ope`, which holds the estimators and checks it builds on.

- :func:`paired_difference`: value(target) - value(baseline) on the *same* events, from per-event
  differences of the two policies' DR (or linearised SNIPS) terms, with a one-sided lower
  confidence bound by betting: the test "is the target better than the baseline?" at a stated
  level, valid whatever the terms' distribution above their lowest possible value.
- :class:`Difference`: its result; :data:`DIFFERENCE_ESTIMATORS`: the estimators it can pair.

**The bound: a test by betting, with the lowest term possible.** The per-event differences d_i
of :func:`paired_difference` are independent (the events are; the policies and ``rhat`` come
from other events) with mean the true difference D. The bets are placed on x_i = d_i + c_i,
c_i a control variate of mean 0 (below), none of which is below ``term_min`` = m_lo. Bet
on each term in turn, in the events' order: with a stake lambda_i >= 0 fixed before x_i is seen
and small enough that 1 + lambda_i (x_i - m) >= 0 for every possible term, the capital
K_t(m) = prod_{i <= t} (1 + lambda_i (x_i - m)) is a nonnegative supermartingale starting at
1 whenever D <= m (each factor has conditional mean 1 + lambda_i (D - m) <= 1), so by
Ville's inequality P(max_t K_t(m) >= 1 / delta) <= delta, delta = 1 - ``level``: rejecting
"D <= m" when the capital reaches 1 / delta at any point of the hold-out is wrong with
probability at most delta, whatever the distribution of the terms (Waudby-Smith and Ramdas
2024, *Estimating means of bounded random variables by betting*). ``low`` is the largest m
so rejected (every K_t decreases in m), capped at the estimate itself; the publish test is
m = 0 (``low > 0``) and ``p_value`` = min(1, 1 / max_t K_t(0)) (1 when the estimate is not
above 0). The stakes are the predictable plug-in for n events,
lambda_i = min(sqrt(2 ln(1/delta) / (n s_i^2)), c / (m - m_lo)),
c = 3/4, s_i^2 the running variance of x_1..x_{i-1} (with one prior term of variance
(m_lo / 2)^2): close to the stake that makes the capital grow fastest when D > m, never
more than the lowest possible term allows (it costs at most 3/4 of the capital).

**The lift: a control variate for the bets.** Where the logger rarely plays what the target
plays, the target's weights target(a|x) / logging(a|x) reach 1 / floor, and a DR term of
such an action with a reward at the low end of the range, (w - 1)(lo - rhat), is the lowest
term: the stake cap c / (m - m_lo) then binds and the test needs many explored rounds. The
bets therefore add, on each event, c_i = h(x_i, a_i) - sum_a logging(a|x_i) h(x_i, a), of
mean 0 under the logger whatever the rewards, with h(x, a) = ``LIFT`` (0.3) x (centre(x) -
the term of (x, a) at the low end of the range) on the actions the target weights more than
the baseline (0 elsewhere; centre: the term of a reward at the estimator's own prediction,
sum_a (target - baseline)(a|x) rhat(x, a) for DR, V_target - V_baseline for SNIPS). For DR
these are exactly the DR terms with the reward model pulled 30% of the way to the low end
of the range on those actions: their lowest term is 30% less negative, their variance a
little larger, and the capital grows faster where the cap binds. Among bets on one event
these are close to the best: in the simulation's cell at a floor of 0.02 (reward model 0.9
on an action that pays 0.8), the growth-optimal bet among *all* valid bets linear in the
reward, computed knowing the true rewards, grows the log-capital by 0.0038 per event, the DR
terms with the model pulled 30% of the way (to 0.63) by 0.0036, unpulled by 0.0027, pulled
all the way (IPS terms, lowest term about -range) by 0.0015. In the simulation (floors 0.1
to 0.01, reward models 0.2 below to 0.2 above the truth) the share 0.3 published within 7
points of the best share tried in every case, within 3 where the model is right; where the
cap does not bind (weights near 1, a good model) the lift costs a little. ``value``,
``stderr`` and ``normal_low`` are the estimator's own (without c_i).

Why this holds where the normal bound did not: the rare explored rounds carry the large
weights target(a|x) / logging(a|x) (up to 1 / floor), and a hold-out without them shows a
small sample variance and a mean off by their share of D, so the normal bound
``mean(d) - z sqrt(V / n)`` (``normal_low``, the rule before) published a policy that is
no better far more often than 1 - level (about half the time at a floor of 0.002 on 300
events, for a target that plays the rarely explored action; benchmarks/paper/
publish_gate.py). Here every stake is sized for the worst term the logger could still
produce, seen or not, so a hold-out that misses those rounds cannot make the capital grow:
the test needs enough events for the terms' mean to beat the stakes' cap, i.e. enough
rounds that explored what the target plays. Only the lower
end of the terms enters: rare large *positive* terms (a rarely explored action that pays)
cost nothing. The price is power where the normal bound was (nearly) right: at a floor of
0.02 on 1,000 events the normal bound publishes the better policy of the simulation 88% of
the time, the bets about 70%; the bets' final capital alone, even with the growth-optimal
bets for the true rewards, publishes 62% there: what remains is the price of a bound that
holds whatever the terms' distribution (Ville's inequality against a normal quantile).

``m_lo`` is not read off the observed terms (the rare terms are exactly what is missing) but
from every term the hold-out's contexts could have produced: for each event, every action
the logger could play there (``logging[i, a] > 0``, the played one at its propensity p_i;
``logging`` defaults to ``baseline``) with a reward at either end of ``reward_range``
(each term is linear in the reward; the observed range when None, widened to the observed
rewards), through the same formula as x_i (for SNIPS with the normalisers mean(w) and the
values at their estimates). Two approximations remain, both milder than the normal one:
the lowest term is the lowest over the hold-out's contexts (each shows the weights of all
its actions, played or not), and SNIPS's terms (and its centre) are its first-order
linearisation (the ratio's remainder is O(1/n)). The bets also subtract the floating-point
error of the means (n x eps x the largest |t_i| + |b_i| + 2 |h|) from every term, and the
bound is at most the estimate less that allowance, so an exactly zero difference, or one at
round-off level, is never positive. With fewer than 2 events the bound is -inf.

>>> import numpy as np
>>> a = np.array([0, 1, 0, 1]); p = np.full(4, 0.5); r = np.array([1.0, 0.0, 1.0, 0.0])
>>> target = np.array([[1.0, 0.0]] * 4)              # always play action 0
>>> diff = paired_difference(a, p, r, target, np.full((4, 2), 0.5), estimator="snips")
>>> diff.value, diff.target_value, diff.baseline_value    # always-0 vs the uniform logger
(0.5, 1.0, 0.5)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from boosters.ope import Estimate, check_events, check_level

__all__ = ["BET_CAP", "DIFFERENCE_ESTIMATORS", "LIFT", "Difference", "paired_difference"]

#: Estimators :func:`paired_difference` can pair.
DIFFERENCE_ESTIMATORS: tuple[str, ...] = ("dr", "snips")


@dataclass(frozen=True, slots=True)
class Difference:
    """value(target) - value(baseline), paired on the same events, with a one-sided interval.

    ``low`` is the one-sided lower confidence bound at ``level`` (the interval is
    ``[low, +inf)``): the betting bound of :func:`paired_difference`, so that
    P(true difference < low) <= 1 - level for any distribution of the terms it bets on (the
    per-event differences plus a control variate of mean 0) that stays above ``term_min``,
    with no normal approximation; never above ``value``. ``p_value`` is the one-sided
    p-value of "the difference is <= 0" by the same test (1 / the largest capital of the bets
    at 0), so ``low > 0`` when ``p_value <= 1 - level`` and not otherwise (but for ties at
    round-off).
    ``normal_low`` is the normal-approximation bound ``value - z_level * stderr`` (the rule of
    earlier versions, anti-conservative when rare explored rounds carry large weights), kept for
    reference only.
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
    term_min: float = math.nan
    normal_low: float = math.nan

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


def _snips_influence(
    w: np.ndarray, r: np.ndarray, name: str
) -> tuple[float, np.ndarray, float]:
    """SNIPS value V = sum w r / sum w, its per-event linearisation V + w_i (r_i - V)/mean(w)
    (mean exactly V; its sample variance is the delta-method one of :func:`snips`) and mean(w)."""
    total = w.sum()
    if total <= 0:
        raise ValueError(f"snips needs the {name} to give positive probability to a logged action")
    value = float(np.dot(w, r) / total)
    mean_w = float(w.mean())
    return value, value + w * (r - value) / mean_w, mean_w


def _matrix(values: np.ndarray, shape: tuple[int, ...], name: str) -> np.ndarray:
    out = np.asarray(values, dtype=np.float64)
    if out.shape != shape:
        raise ValueError(f"{name} must have shape {shape}, got {out.shape}")
    return out


def _reward_ends(r: np.ndarray, reward_range: tuple[float, float] | None) -> np.ndarray:
    """The ends [lo, hi] of the rewards' range: ``reward_range`` widened to the observed rewards
    (the observed range alone when None)."""
    if reward_range is None:
        return np.array([r.min(), r.max()])
    lo, hi = (float(x) for x in reward_range)
    if not (math.isfinite(lo) and math.isfinite(hi) and lo <= hi):
        raise ValueError(f"reward_range must be finite (lo, hi), lo <= hi; got {reward_range!r}")
    return np.array([min(lo, r.min()), max(hi, r.max())])


def _all_weights(
    a: np.ndarray, p: np.ndarray, policy: np.ndarray, logging: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """policy(a|x_i) / logging(a|x_i) for every event and every action the logger could play
    there (the played one at its propensity p_i), 0 elsewhere; and that support mask."""
    log_p = _logged_probabilities(a, p, logging)
    support = log_p > 0
    return np.divide(policy, log_p, out=np.zeros_like(policy), where=support), support


def _dr_parts(
    a: np.ndarray, r: np.ndarray, policies: tuple[np.ndarray, np.ndarray],
    weights: tuple[np.ndarray, np.ndarray], q: np.ndarray, ends: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """DR terms of the target and the baseline on the logged events, the difference term every
    (event, action) would give at each end of the reward range, (2, n, k), and each event's
    centre, the difference of the direct-method values (the term of a reward equal to rhat)."""
    rows = np.arange(a.shape[0])
    dm_t, dm_b = (np.einsum("ij,ij->i", pi, q) for pi in policies)
    w_t, w_b = weights
    residual = r - q[rows, a]
    t_terms, b_terms = dm_t + w_t[rows, a] * residual, dm_b + w_b[rows, a] * residual
    possible = (dm_t - dm_b)[None, :, None] + (w_t - w_b) * (ends[:, None, None] - q)
    return t_terms, b_terms, possible, dm_t - dm_b


def _snips_parts(
    a: np.ndarray, r: np.ndarray, weights: tuple[np.ndarray, np.ndarray], ends: np.ndarray
) -> tuple[float, np.ndarray, float, np.ndarray, np.ndarray, np.ndarray]:
    """SNIPS values and linearised terms of the target and the baseline, the difference term
    every (event, action) would give at each end of the reward range (the normalisers and
    values at their estimates), (2, n, k), and the centre V_target - V_baseline per event."""
    rows = np.arange(a.shape[0])
    w_t, w_b = weights
    t_value, t_terms, m_t = _snips_influence(w_t[rows, a], r, "target")
    b_value, b_terms, m_b = _snips_influence(w_b[rows, a], r, "baseline")
    end = ends[:, None, None]
    possible = (t_value - b_value) + w_t * (end - t_value) / m_t - w_b * (end - b_value) / m_b
    return t_value, t_terms, b_value, b_terms, possible, np.full(a.shape[0], t_value - b_value)


def _paired_terms(
    estimator: str, a: np.ndarray, r: np.ndarray, policies: tuple[np.ndarray, np.ndarray],
    weights: tuple[np.ndarray, np.ndarray], reward_predictions: np.ndarray | None,
    ends: np.ndarray,
) -> tuple[float, np.ndarray, float, np.ndarray, np.ndarray, np.ndarray]:
    """``estimator``'s values and per-event terms of the target and the baseline, the
    difference term every (event, action) would give at each end of the reward range, (2, n, k),
    and each event's centre (the term of a reward at the estimator's own prediction)."""
    if estimator == "dr":
        if reward_predictions is None:
            raise ValueError("the dr difference needs reward_predictions")
        q = _matrix(reward_predictions, policies[0].shape, "reward_predictions")
        t_terms, b_terms, possible, centre = _dr_parts(a, r, policies, weights, q, ends)
        return float(t_terms.mean()), t_terms, float(b_terms.mean()), b_terms, possible, centre
    return _snips_parts(a, r, weights, ends)


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
    reward_range: tuple[float, float] | None = None,
    logging: np.ndarray | None = None,
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

    ``low`` is the one-sided lower bound at ``level`` by betting (this module's docstring) on
    the d_i plus a control variate of mean 0 (the lift), valid whatever the distribution of
    those terms above ``term_min``, the lowest term the hold-out's contexts could produce:
    every action the logger could play there (``logging[i, a] > 0``; ``logging`` defaults to
    ``baseline``) with a reward at either end of ``reward_range`` (the observed range when
    None, widened to the observed rewards); it is at most ``value``. ``p_value`` is 1 / the
    largest capital the bets at 0 reach, ``normal_low`` the normal bound of the d_i (the rule
    before), for reference only.

    >>> import numpy as np
    >>> a = np.array([0, 1, 0, 1, 0, 1] * 10); p = np.full(60, 0.5)
    >>> r = np.array([1.0, 0.0, 1.0, 0.0, 1.0, 1.0] * 10)
    >>> logging = np.full((60, 2), 0.5); new = np.array([[0.9, 0.1]] * 60)
    >>> q = np.array([[0.9, 0.3]] * 60)                  # a reward model fitted elsewhere
    >>> d = paired_difference(a, p, r, new, logging, q, level=0.9, reward_range=(0, 1))
    >>> round(d.value, 4), round(d.target_value - d.baseline_value, 4), round(d.term_min, 4)
    (0.2667, 0.2667, -0.428)
    >>> round(d.low, 4), round(d.normal_low, 4), d.positive, f"{d.p_value:.1e}"
    (0.1611, 0.2213, True, '2.5e-05')
    """
    level = check_level(level)
    if estimator not in DIFFERENCE_ESTIMATORS:
        raise ValueError(
            f"estimator must be one of {', '.join(DIFFERENCE_ESTIMATORS)}, got {estimator!r}"
        )
    a, p, r, target = check_events(actions, propensities, rewards, target)
    base = _matrix(baseline, target.shape, "baseline")
    log_p = base if logging is None else _matrix(logging, target.shape, "logging")
    ends = _reward_ends(r, reward_range)
    (w_t, support), (w_b, _) = _all_weights(a, p, target, log_p), _all_weights(a, p, base, log_p)
    t_value, t_terms, b_value, b_terms, possible, centre = _paired_terms(
        estimator, a, r, (target, base), (w_t, w_b), reward_predictions, ends
    )
    lift = _lift(possible, centre, support)
    shift = np.einsum("ij,ij->i", _logged_probabilities(a, p, log_p), lift)
    d = t_terms - b_terms
    bets = d + lift[np.arange(a.shape[0]), a] - shift
    possible = possible + (lift - shift[:, None])[None]
    term_min = float(min(possible[:, support].min(), bets.min()))
    slack = a.shape[0] * np.finfo(np.float64).eps * float(
        np.abs(t_terms).max() + np.abs(b_terms).max() + 2.0 * lift.max()
    )
    return _one_sided(d, bets, t_value, b_value, estimator, level, term_min, slack)


#: the share of the way the bets lift the lowest term of each action the target weights more
#: than the baseline towards its event's centre (for DR: the reward model pulled that share of
#: the way to the low end of the reward range on those actions)
LIFT = 0.3


def _lift(possible: np.ndarray, centre: np.ndarray, support: np.ndarray) -> np.ndarray:
    """h(i, a) = LIFT x (centre_i - the term of a reward at the low end), on the supported
    actions whose term rises with the reward (those the target weights more than the
    baseline) and where that term is below the centre; 0 elsewhere. (n, k)

    >>> possible = np.array([[[0.5, -4.0]], [[-0.5, 6.0]]])   # one event, two actions, r = 0, 1
    >>> _lift(possible, np.array([0.5]), np.ones((1, 2), bool)).round(6).tolist()
    [[0.0, 1.35]]
    """
    rising = support & (possible[1] > possible[0])
    return np.where(rising, LIFT * np.maximum(centre[:, None] - possible[0], 0.0), 0.0)


def _logged_probabilities(a: np.ndarray, p: np.ndarray, logging: np.ndarray) -> np.ndarray:
    """The logging probabilities of every action on each event, the played one at its
    propensity p_i (as the weights use them)."""
    out = logging.copy()
    out[np.arange(a.shape[0]), a] = p
    return out


#: c, the largest share of the capital a stake may lose on the lowest possible term
BET_CAP = 0.75


def _plug_in_stakes(x: np.ndarray, span: float, log_alpha: float) -> np.ndarray:
    """The predictable plug-in stakes sqrt(2 ln(1/delta) / (n s_i^2)) (before their cap): s_i^2
    the running variance of x_1..x_{i-1} around their running means, with a prior term 0 of
    variance (span / 2)^2 (Waudby-Smith and Ramdas 2024, Sec. 5, for a fixed n).

    >>> _plug_in_stakes(np.array([0.5, -0.5, 0.5]), 1.0, math.log(20)).round(3).tolist()
    [2.826, 2.826, 2.375]
    """
    n = x.shape[0]
    count = np.arange(1.0, n + 1.0)  # the prior term and the i - 1 before event i
    means = np.concatenate([[0.0], np.cumsum(x)[:-1] / count[1:]])
    spread = np.concatenate([[0.0], np.cumsum((x - means) ** 2)[:-1]])
    return np.sqrt(2.0 * log_alpha * count / (n * (span * span / 4.0 + spread)))


def _log_capital(x: np.ndarray, plug_in: np.ndarray, lowest: float, m: float) -> float:
    """log max_t K_t(m), the largest capital along the way, K_t(m) = prod_{i <= t} (1 +
    lambda_i (x_i - m)), the stakes lambda_i = min(plug-in, c / (m - lowest)) (so no factor
    falls below 1 - c); decreasing in m (every K_t(m) is).

    >>> round(_log_capital(np.array([1.0, 1.0, -1.0]), np.full(3, 0.5), -1.0, 0.0), 4)
    0.8109
    """
    with np.errstate(divide="ignore"):  # m = lowest: no cap
        stakes = np.minimum(plug_in, BET_CAP / (m - lowest))
    return float(np.cumsum(np.log1p(stakes * (x - m))).max())


def _largest_rejected(
    x: np.ndarray, plug_in: np.ndarray, lowest: float, log_alpha: float
) -> float:
    """The largest m in [lowest, max x) where the bets reject "mean <= m" (log K(m) >=
    ln(1/delta)), ``lowest`` when none is: bisection, K being decreasing in m; the left end,
    so the bound errs low.

    >>> x = np.full(20, 1.0)
    >>> m = _largest_rejected(x, np.full(20, 0.5), -1.0, math.log(20))
    >>> round(m, 6), round(_log_capital(x, np.full(20, 0.5), -1.0, m) - math.log(20), 6)
    (0.645483, 0.0)
    """
    if _log_capital(x, plug_in, lowest, 0.0) >= log_alpha:
        left, right = 0.0, float(x.max())  # log K(m) <= 0 once m >= max x
    elif _log_capital(x, plug_in, lowest, lowest) >= log_alpha:
        left, right = lowest, 0.0
    else:
        return lowest
    for _ in range(60):
        mid = 0.5 * (left + right)
        if mid in (left, right):
            break
        if _log_capital(x, plug_in, lowest, mid) >= log_alpha:
            left = mid
        else:
            right = mid
    return left


def _one_sided(
    d: np.ndarray, bets: np.ndarray, t_value: float, b_value: float, estimator: str,
    level: float, term_min: float, slack: float,
) -> Difference:
    """The :class:`Difference` of the per-event differences ``d`` (mean t_value - b_value),
    bounded by betting on ``bets`` (the same differences plus a control variate of mean 0),
    none of which can be below ``term_min``; ``slack`` bounds the round-off of the means. The
    bound is at most the estimate less the slack (an estimate of 0, or 0 up to round-off,
    never publishes)."""
    n = d.shape[0]
    value = t_value - b_value  # = mean(d), without its rounding
    if n < 2:  # one event: nothing is shown
        return Difference(float(value), math.inf, -math.inf, level, n, estimator, t_value,
                          b_value, 1.0, term_min, -math.inf)
    stderr = float(np.std(d, ddof=1) / math.sqrt(n))
    normal_low = value - NormalDist().inv_cdf(level) * stderr
    log_alpha = math.log(1.0 / (1.0 - level))
    x, lowest = bets - slack, min(term_min, 0.0) - slack  # round-off counted against the target
    if lowest == 0.0:  # no term can be below 0 and there is no round-off: every d_i is 0
        low, p_value = 0.0, 1.0
    else:
        plug_in = _plug_in_stakes(x, -lowest, log_alpha)
        low = min(_largest_rejected(x, plug_in, lowest, log_alpha), value - slack)
        p_value = math.exp(-max(_log_capital(x, plug_in, lowest, 0.0), 0.0))  # 1/K, <= 1
        if value - slack <= 0.0:
            p_value = 1.0
    return Difference(
        float(value), stderr, float(low), level, n, estimator, t_value, b_value,
        float(p_value), term_min, float(normal_low),
    )
