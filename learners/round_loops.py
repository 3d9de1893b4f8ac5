"""The compiled loops of a boosting round's small arrays (a few learners by a few actions): the
vote prefix sums, the logistic cost matrices around NumPy's ``tanh``, the (label, weight)
reduction and a ridge model's rank-one step. Each gives the floats of the NumPy code it
replaces, the same operations in the same order (a row sum in NumPy's pairwise order; eq. 10's
lower triangle from the upper one's ``tanh`` negated, which is the same float): a call costs a
microsecond where the array operations cost several each (tests/learners/test_round_loops.py)."""

from __future__ import annotations

import numpy as np
from numba import njit

from learners.reduction import ties_loop

#: :func:`learners.reduction.argmax_random_ties` of float rows (its loops, compiled)
ties = njit(cache=True)(ties_loop)


@njit(cache=True)
def prefix_votes(weak, alpha, k):
    """``S`` (N + 1, k) of :meth:`boosters.online.template.BoostingTemplate._votes`: row ``i``
    the cumulative sum of ``alpha[j] e_{weak[j]}`` over ``j < i`` (every addition made, as
    ``np.cumsum`` makes it); None for a label outside ``0..k-1``."""
    for i in range(weak.shape[0]):
        if weak[i] < 0 or weak[i] >= k:
            return None
    return _prefix_sums(weak, alpha, k)


@njit(cache=True)
def _prefix_sums(weak, alpha, k):
    """:func:`prefix_votes` of labels known to be in ``0..k-1``."""
    n = weak.shape[0]
    votes = np.zeros((n + 1, k))
    for i in range(n):
        for c in range(k):
            votes[i + 1, c] = votes[i, c] + (alpha[i] if c == weak[i] else 0.0)
    return votes


@njit(cache=True)
def half_differences(votes):
    """``(values, index)``: ``0.5 * (votes[m, l] - votes[m, r])`` for ``l < r`` (row ``m``, the
    pairs in row-major order; a pair ``r < l`` is the negative: the same float negated, and
    ``tanh``, NumPy's too, is odd to the bit) is ``values[index[m, i]]``, the arguments of eq.
    10's ``tanh``. A pair equal to its row's predecessor's (the vote prefixes differ by one
    learner's label: all but ``k - 1`` pairs) shares its entry, so ``tanh`` of ``values``
    takes a fraction of the pairs; equal floats have one ``tanh`` (a zero's sign aside, which
    the costs do not see: ``1 + 0.0`` and ``1 - 0.0`` are 1)."""
    m_rows, k = votes.shape
    index = np.empty((m_rows, k * (k - 1) // 2), np.int64)
    values = np.empty(index.size)
    n = 0
    for m in range(m_rows):
        i = 0
        for r in range(k):
            for c in range(r + 1, k):
                half = 0.5 * (votes[m, r] - votes[m, c])
                if m > 0 and half == values[index[m - 1, i]]:
                    index[m, i] = index[m - 1, i]
                else:
                    values[n] = half
                    index[m, i] = n
                    n += 1
                i += 1
    return values[:n], index


@njit(cache=True)
def logistic_costs(tanh, index, k):
    """Eq. 10's matrices (M, k, k) from ``tanh`` of :func:`half_differences`' values (its
    ``index``): ``0.5 * (1 + t)`` off the diagonal (``0.5 * (1 - t)`` below it), the diagonal
    minus its column's sum (summed from the first row on, the diagonal's zero in its place)."""
    m_rows = index.shape[0]
    out = np.empty((m_rows, k, k))
    total = np.empty(k)
    for m in range(m_rows):
        i = 0
        for r in range(k):
            out[m, r, r] = 0.0
            for c in range(r + 1, k):
                t = tanh[index[m, i]]
                out[m, r, c] = 0.5 * (1.0 + t)
                out[m, c, r] = 0.5 * (1.0 - t)
                i += 1
        total[:] = 0.0
        for r in range(k):
            for c in range(k):
                total[c] += out[m, r, c]
        for c in range(k):
            out[m, c, c] = -total[c]
    return out


@njit(cache=True)
def _pairwise(a, n):
    """``a[:n].sum()`` in NumPy's order for ``n <= 128`` (its pairwise summation: eight running
    sums from eight terms on; past 128 it halves, which the callers leave to NumPy)."""
    if n < 8:
        res = 0.0
        for i in range(n):
            res += a[i]
        return res
    r = a[:8].copy()
    i = 8
    while i < n - n % 8:
        for j in range(8):
            r[j] += a[i + j]
        i += 8
    res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
    while i < n:
        res += a[i]
        i += 1
    return res


@njit(cache=True)
def _nan_max(a, b):
    """``np.maximum`` of two floats (a NaN wins; ``b`` on a tie)."""
    if a != a or b != b:
        return a if a != a else b
    return a if a > b else b


@njit(cache=True)
def _nan_min(a, b):
    """``np.minimum`` of two floats (a NaN wins; ``b`` on a tie)."""
    if a != a or b != b:
        return a if a != a else b
    return a if a < b else b


@njit(cache=True)
def _rounded(v, factor):
    """``np.round(v, decimals)`` for ``factor = 10.0 ** decimals`` (negative: no rounding)."""
    return v if factor < 0.0 else np.rint(v * factor) / factor


@njit(cache=True)
def label_weight(c, u, true_label, clip, factor, scale, weight_floor):
    """:func:`learners.reduction.cost_to_label_weight` with ``order="reference"`` for costs
    ``c`` (N, k), ``k <= 128``: ``clip`` inf for None, ``factor`` ``10.0 ** decimals`` (-1
    for None), ``true_label`` -1 for None."""
    n, k = c.shape
    labels = np.zeros(n, np.int64)
    weights = np.empty(n)
    lab = np.empty(k)
    shifted = np.empty(k)
    for i in range(n):
        low = c[i, 0]
        for j in range(k):
            lab[j] = _rounded(_nan_min(_nan_max(c[i, j], -clip), clip), factor)
            low = _nan_min(low, c[i, j])
        for j in range(k):
            shifted[j] = _nan_min(_rounded(c[i, j] - low, factor), clip)
        lowest = lab[0]
        for j in range(k):
            lowest = _nan_min(lowest, lab[j])
        weights[i] = _pairwise(shifted, k)
        best = u[i, 0] if lab[0] == lowest else -1.0
        for j in range(1, k):  # np.argmax: the first largest draw among the ties (a NaN first)
            if best != best:
                break
            w = u[i, j] if lab[j] == lowest else -1.0
            if w != w or w > best:
                best, labels[i] = w, j
        if true_label >= 0 and lab[true_label] == lowest:
            labels[i] = true_label
    if scale != 1.0:
        for i in range(n):
            weights[i] /= scale
    for i in range(n):
        weights[i] = _nan_max(weights[i], weight_floor)
    return labels, weights


@njit(cache=True)
def rank_one_step(inverse, weights, pv, denominator, error):
    """The end of a Sherman-Morrison step of :class:`learners.ridge.RidgeRewards`:
    ``gain = pv / denominator``, ``weights += gain * error``, ``inverse -= outer(gain, pv)``."""
    d = pv.shape[0]
    gain = np.empty(d)
    for r in range(d):
        gain[r] = pv[r] / denominator
    for r in range(d):
        weights[r] += gain[r] * error
    for r in range(d):
        g = gain[r]
        for c in range(d):
            inverse[r, c] -= g * pv[c]


@njit(cache=True)
def _clipped(x, low, high):
    """``np.clip`` of one float: a NaN (of ``x`` or a bound) stays, and ``x`` stays on a tie
    with a bound (its sign of zero with it)."""
    if x != x or low != low or high != high:
        return x if x != x else (low if low != low else high)
    if low > x:
        x = low
    if high < x:
        x = high
    return x


@njit(cache=True)
def _nan_max_of(a):
    """``a.max()`` (NaN if any entry is)."""
    top = a[0]
    for i in range(1, a.shape[0]):
        if top != top:
            break
        if a[i] != a[i] or a[i] > top:
            top = a[i]
    return top


@njit(cache=True)
def shift_down(log_v, out):
    """``out = log_v - log_v.max()`` (the Hedge's weights before ``np.exp``)."""
    top = _nan_max_of(log_v)
    for i in range(log_v.shape[0]):
        out[i] = log_v[i] - top


@njit(cache=True)
def pick_by_weight(w, u):
    """The index ``np.searchsorted(cdf, u * cdf[-1], side="right")``, at most ``len(w) - 1``,
    of ``cdf = np.cumsum(w)`` for weights ``w`` of a finite sum; -1 where the sum is not
    finite (the caller asks NumPy)."""
    n = w.shape[0]
    cdf = np.empty(n)
    total = 0.0
    for i in range(n):
        total += w[i]
        cdf[i] = total
    if not np.isfinite(total):
        return -1
    target = u * total
    for i in range(n):
        if cdf[i] > target:
            return i
    return n - 1


@njit(cache=True)
def hedge_step(log_v, judged, experts, alpha, grads, step, low, high):
    """AdaBandit's update of the weights and the Hedge's (eq. 11): ``alpha = clip(alpha - step *
    grads, low, high)`` (``np.clip``'s rule), then ``log_v -= judged[experts]`` and ``log_v -=
    log_v.max()``; False, with nothing changed, for an expert outside ``0..k-1`` (the caller's
    NumPy path)."""
    k = judged.shape[0]
    for i in range(log_v.shape[0]):
        if experts[i] < 0 or experts[i] >= k:
            return False
    for i in range(alpha.shape[0]):
        alpha[i] = _clipped(alpha[i] - step * grads[i], low, high)
    for i in range(log_v.shape[0]):
        log_v[i] -= judged[experts[i]]
    top = _nan_max_of(log_v)
    for i in range(log_v.shape[0]):
        log_v[i] -= top
    return True


@njit(cache=True)
def dr_losses(yhat, ytilde, correct, p, baseline, max_weight):
    """:func:`boosters.exploration.dr_loss_estimate` (``max_weight`` inf for None) for labels
    in ``0..k-1``."""
    lhat = baseline.copy()
    if correct:
        w = 1.0 / p[ytilde]
        w = max_weight if max_weight < w else w  # Python's min(w, max_weight)
        for j in range(lhat.shape[0]):
            truth = 0.0 if j == ytilde else 1.0
            lhat[j] += (truth - lhat[j]) * w
    lhat[yhat] = baseline[yhat]
    if ytilde == yhat:
        w = 1.0 / p[yhat]
        w = max_weight if max_weight < w else w
        lhat[yhat] += ((0.0 if correct else 1.0) - baseline[yhat]) * w
    return lhat


@njit(cache=True)
def _eq4(yhat, ytilde, correct, p):
    """:func:`boosters.exploration.loss_estimate` of an unrestricted decision."""
    lhat = np.zeros(p.shape[0])
    inv = 1.0 / p[ytilde]
    if correct:
        lhat[:] = inv
        lhat[ytilde] = 0.0
        lhat[yhat] = 0.0
    elif ytilde == yhat:
        lhat[yhat] = inv
    return lhat


@njit(cache=True)
def round_start(weak, alpha, k, yhat, action, correct, p, guess, use_guess, max_weight):
    """The start of AdaBandit's bandit round in one call: ``(ok, lhat, judged, omega, votes,
    halves, index)``: the loss estimate (with ``use_guess`` the doubly robust one of the
    baseline ``1 - guess``, :func:`dr_losses`; else eq. 4,
    :func:`boosters.exploration.loss_estimate`), the Hedge's (the doubly robust one, its weights
    clipped at ``max_weight``), ``1 - lhat``, the votes (:func:`prefix_votes`) and their
    :func:`half_differences`; ``ok`` False (the arrays empty) for a label outside ``0..k-1``."""
    n = weak.shape[0]
    ok = 0 <= yhat < k and 0 <= action < k
    for i in range(n):
        ok = ok and 0 <= weak[i] < k
    if not ok:
        return (False, np.empty(0), np.empty(0), np.empty(0), np.empty((0, k)), np.empty(0),
                np.empty((0, 0), np.int64))
    baseline = np.empty(k)
    for j in range(k):
        baseline[j] = 1.0 - guess[j]
    lhat = (dr_losses(yhat, action, correct, p, baseline, np.inf) if use_guess
            else _eq4(yhat, action, correct, p))
    judged = dr_losses(yhat, action, correct, p, baseline, max_weight)
    omega = np.empty(k)
    for j in range(k):
        omega[j] = 1.0 - lhat[j]
    votes = _prefix_sums(weak, alpha, k)
    halves, index = half_differences(votes)
    return True, lhat, judged, omega, votes, halves, index


@njit(cache=True)
def decision_steps(proba, u, alpha, scores, weights):
    """Steps 1-5 of a decision (:meth:`boosters.online.template.BoostingTemplate.decide_one`)
    in one call, the same labels: ``(weak, experts, chosen)``. The trees' labels are the argmax
    of ``proba``'s rows (N, k) with ties by ``u``'s first N rows of k draws; the experts the
    argmax of each vote prefix ``s^1..s^N`` of ``alpha`` and then of each row of ``scores`` (the
    reward models' estimates), by the next rows; the chosen expert :func:`pick_by_weight` of the
    experts' ``weights`` at ``u[-2]`` (-1 where their sum is not finite)."""
    n, k = proba.shape
    weak = ties(proba, u[: n * k].reshape(n, k))
    votes = _prefix_sums(weak, alpha, k)  # a label of ties is in 0..k-1
    m = scores.shape[0]
    rows = u[n * k : (2 * n + m) * k].reshape(n + m, k)
    experts = np.empty(n + m, np.int64)
    experts[:n] = ties(votes[1:], rows[:n])
    if m:
        experts[n:] = ties(scores, rows[n:])
    return weak, experts, pick_by_weight(weights, u[u.shape[0] - 2])


@njit(cache=True)
def clipped_estimates(prior, scores, offsets):
    """``np.clip(prior + scores + offsets, 0.0, 1.0)`` (a NaN stays)."""
    out = np.empty(scores.shape[0])
    for a in range(scores.shape[0]):
        out[a] = _clipped((prior + scores[a]) + offsets[a], 0.0, 1.0)
    return out


def warm_up() -> None:
    """Load (or compile, once) every kernel above for the types a round passes them."""
    votes = prefix_votes(np.array([1, 0]), np.array([0.5, 1.0]), 2)
    halves, index = half_differences(votes)
    logistic_costs(np.tanh(halves), index, 2)
    label_weight(votes[:2], np.full((2, 2), 0.5), 1, 100.0, 100.0, 1.0, 1e-10)
    inverse, w = np.eye(2), np.zeros(2)
    rank_one_step(inverse, w, np.ones(2), 2.0, 0.5)
    log_v, w = np.zeros(3), np.empty(3)
    shift_down(log_v, w)
    pick_by_weight(np.exp(w, out=w), np.float64(0.5))
    hedge_step(log_v, np.ones(2), np.array([0, 1, 1]), np.zeros(2), np.ones(2), 0.1, 0.0, 2.0)
    dr_losses(0, 1, True, np.full(2, 0.5), np.full(2, 0.5), np.inf)
    round_start(np.array([1, 0]), np.array([0.5, 1.0]), 2, 0, 1, True, np.full(2, 0.5),
                np.full(2, 0.5), True, 5.0)
    for m in (0, 1):
        decision_steps(np.full((2, 2), 0.5), np.full(4 * 2 + 2 * m + 2, 0.5), np.ones(2),
                       np.zeros((m, 2)), np.ones(3))
    clipped_estimates(0.5, np.zeros(2), np.zeros(2))
