"""learners/round_loops.py: every compiled loop gives the floats, bit for bit, of the NumPy code
it replaced (kept here as the reference), on random inputs with ties, signed zeros and NaNs."""

import numpy as np
import pytest

from boosters.exploration import dr_loss_estimate
from boosters.online.adabandit import logistic_cost_matrices
from learners import round_loops as rc
from learners.reduction import cost_to_label_weight


def same(a, b) -> bool:
    """Equal bit for bit (NaNs and signs of zero included)."""
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def awkward(rng, shape, scale=3.0):
    """Floats of many magnitudes, with repeats (ties) and signed zeros."""
    x = rng.normal(size=shape) * rng.choice([1e-3, 1.0, scale, 1e3], size=shape)
    x[rng.random(shape) < 0.2] = 0.0
    x[rng.random(shape) < 0.1] = -0.0
    x[rng.random(shape) < 0.2] = 1.25
    return x


def reference_votes(weak, alpha, k):
    votes = np.zeros((weak.size + 1, k), dtype=alpha.dtype)
    votes[np.arange(weak.size) + 1, weak] = alpha
    np.cumsum(votes, axis=0, out=votes)
    return votes


def reference_costs(votes):
    diff = votes[:, :, None] - votes[:, None, :]
    C = 0.5 * (1.0 + np.tanh(0.5 * diff))
    idx = np.arange(votes.shape[1])
    C[:, idx, idx] = 0.0
    C[:, idx, idx] = -C.sum(axis=1)
    return C


@pytest.mark.parametrize("k", [2, 3, 8, 10, 26])
def test_votes_and_logistic_costs(k):
    rng = np.random.default_rng(k)
    for _ in range(50):
        weak, alpha = rng.integers(0, k, 20), awkward(rng, 20)
        votes = rc.prefix_votes(weak, alpha, k)
        assert same(votes, reference_votes(weak, alpha, k))
        assert same(logistic_cost_matrices(votes), reference_costs(votes))
        halves, index = rc.half_differences(votes)  # one row's label moves k - 1 pairs at most
        assert halves.size <= k * (k - 1) // 2 + 20 * (k - 1)
        p, guess = rng.dirichlet(np.ones(k)), rng.random(k)
        start = rc.round_start(weak, alpha, k, 0, 1, False, p, guess, True, 5.0)
        assert same(start[4], votes)
        costs = rc.logistic_costs(np.tanh(start[5]), start[6], k)
        assert same(costs, reference_costs(votes))
    assert rc.prefix_votes(np.array([0, k]), np.ones(2), k) is None


def reference_reduction(c, u, true_label, clip, decimals, scale, weight_floor):
    """cost_to_label_weight's NumPy path (order="reference")."""
    lab = c if clip is None else np.minimum(np.maximum(c, -clip), clip)
    if decimals is not None:
        lab = np.round(lab, decimals)
    shifted = c - c.min(axis=1, keepdims=True)
    if decimals is not None:
        shifted = np.round(shifted, decimals, out=shifted)
    if clip is not None:
        np.minimum(shifted, clip, out=shifted)
    lowest = lab.min(axis=1, keepdims=True)
    weights = shifted.sum(axis=1)
    ties = lab == lowest
    labels = np.argmax(np.where(ties, u, -1.0), axis=1)
    if true_label is not None:
        labels[ties[:, true_label]] = true_label
    if scale != 1.0:
        weights /= scale
    return labels, np.maximum(weights, weight_floor, out=weights)


@pytest.mark.parametrize("k", [2, 3, 7, 8, 9, 10, 16, 26, 100, 128])
def test_label_weight(k):
    rng = np.random.default_rng(k)
    for trial in range(40):
        c = awkward(rng, (20, k), scale=200.0)
        c[rng.random(c.shape) < 0.05] = 0.005  # a rounding tie
        if trial % 10 == 9:
            c[3, 1] = np.nan
        u = rng.random((20, k))
        u[:, 0] = np.where(rng.random(20) < 0.1, u[:, 1], u[:, 0])  # tied draws
        true_label = [None, 0, k - 1][trial % 3]
        clip = [100.0, None, 0.5][trial % 3]
        decimals = [2, None, 0, 3][trial % 4]
        scale = [1.0, 2.5][trial % 2]
        got = cost_to_label_weight(c, u, true_label, clip=clip, decimals=decimals, scale=scale)
        want = reference_reduction(c, u, true_label, clip, decimals, scale, 1e-10)
        assert same(got[0], want[0]) and same(got[1], want[1])


def test_label_weight_falls_back_where_it_does_not_apply():
    c, u = np.ones((2, 129)), np.zeros((2, 129))
    assert same(cost_to_label_weight(c, u)[1], reference_reduction(c, u, None, 100.0, 2, 1.0,
                                                                       1e-10)[1])
    c = np.array([[0.5, -0.2, 0.1]])
    labels, _ = cost_to_label_weight(c, [[0.0, 0.0, 0.0]], order="paper")
    assert labels.tolist() == [1]


def test_rank_one_step():
    rng = np.random.default_rng(0)
    for d in (1, 5, 64):
        inverse, weights, pv = rng.normal(size=(d, d)), rng.normal(size=d), awkward(rng, d)
        denominator, error = 1.0 + rng.random(), rng.normal()
        want_inverse, want_weights = inverse.copy(), weights.copy()
        gain = pv / denominator
        want_weights += gain * error
        want_inverse -= np.outer(gain, pv)
        rc.rank_one_step(inverse, weights, pv, denominator, error)
        assert same(inverse, want_inverse) and same(weights, want_weights)


def test_hedge_pick_and_step():
    rng = np.random.default_rng(1)
    for _ in range(200):
        n = int(rng.integers(1, 25))
        log_v = awkward(rng, n) - 5.0
        w = np.empty(n)
        rc.shift_down(log_v, w)
        assert same(w, log_v - log_v.max())
        np.exp(w, out=w)
        u = rng.random()
        cdf = np.cumsum(w)
        want = min(int(np.searchsorted(cdf, u * cdf[-1], side="right")), n - 1)
        assert rc.pick_by_weight(w, u) == want
        k, alpha = 4, np.clip(awkward(rng, n), -2.0, 2.0)
        costs, weak = awkward(rng, (n + 1, k)), rng.integers(0, k, n)
        judged, experts = awkward(rng, k), rng.integers(0, k, n + 1)
        step, low = float(rng.random()), float(rng.choice([0.0, -2.0, -0.0]))
        want_alpha = np.clip(alpha - step * costs[1:][np.arange(n), weak], low, 2.0)
        want_log_v = log_v - judged[experts[:n]]
        want_log_v -= want_log_v.max()
        got_log_v = log_v.copy()
        grads = costs[1:][np.arange(n), weak]
        assert rc.hedge_step(got_log_v, judged, experts, alpha, grads, step, low, 2.0)
        assert same(alpha, want_alpha) and same(got_log_v, want_log_v)
    assert not rc.hedge_step(np.zeros(2), np.ones(2), np.array([0, 2]), np.zeros(2),
                             np.zeros(2), 0.1, 0.0, 2.0)
    assert rc.pick_by_weight(np.array([1.0, np.nan]), 0.5) == -1


def reference_dr(yhat, ytilde, correct, p, baseline, max_weight):
    def weight(q):
        return 1.0 / q if max_weight is None else min(1.0 / q, max_weight)

    lhat = np.array(baseline, dtype=np.float64)
    if correct:
        truth = np.ones_like(lhat)
        truth[ytilde] = 0.0
        lhat += (truth - lhat) * weight(p[ytilde])
    lhat[yhat] = baseline[yhat]
    if ytilde == yhat:
        lhat[yhat] += ((0.0 if correct else 1.0) - baseline[yhat]) * weight(p[yhat])
    return lhat


def test_dr_losses_and_estimates():
    rng = np.random.default_rng(2)
    for _ in range(300):
        k = int(rng.integers(2, 12))
        p, baseline = rng.dirichlet(np.ones(k)), awkward(rng, k)
        yhat, ytilde = int(rng.integers(k)), int(rng.integers(k))
        correct, max_weight = bool(rng.random() < 0.5), [None, 1.0, 20.0][int(rng.integers(3))]
        got = dr_loss_estimate(yhat, ytilde, correct, p, baseline, max_weight)
        assert same(got, reference_dr(yhat, ytilde, correct, p, baseline, max_weight))
        scores, offsets = awkward(rng, k), awkward(rng, k) * 0.1
        scores[0] = np.nan
        assert same(rc.clipped_estimates(0.5, scores, offsets),
                    np.clip(0.5 + scores + offsets, 0.0, 1.0))


def test_clip_keeps_numpy_ties():
    for x, low, high in [(-0.0, 0.0, 1.0), (0.0, -0.0, 1.0), (0.0, -1.0, -0.0),
                         (-0.0, -1.0, 0.0), (np.nan, 0.0, 1.0), (5.0, np.nan, 1.0)]:
        assert same(rc._clipped(x, low, high), np.clip(np.array([x]), low, high)[0])


def reference_ties(values, u):
    """argmax_random_ties's NumPy path."""
    return np.argmax(np.where(values == values.max(axis=1, keepdims=True), u, -1.0), axis=1)


@pytest.mark.parametrize("m", [0, 1, 2])
def test_decision_steps(m):
    """The compiled decision's labels: the trees' argmax, the vote prefixes' and the reward
    models' argmax (ties by the draws' rows in that order), the Hedge's pick."""
    rng = np.random.default_rng(m)
    for k in (2, 3, 10):
        for _ in range(40):
            n = int(rng.integers(1, 25))
            proba = np.round(rng.random((n, k)), 1)  # many ties
            proba[rng.random(n) < 0.2] = 0.0  # untrained trees
            alpha = np.round(awkward(rng, n), 1)
            scores = np.round(rng.random((m, k)), 1)
            weights = rng.random(n + m)
            u = rng.random(2 * n * k + 2 + m * k)
            weak, experts, chosen = rc.decision_steps(proba, u, alpha, scores, weights)
            want_weak = reference_ties(proba, u[: n * k].reshape(n, k))
            rows = u[n * k : -2].reshape(-1, k)
            votes = reference_votes(want_weak, alpha, k)
            want = np.concatenate((reference_ties(votes[1:], rows[:n]),
                                   reference_ties(scores, rows[n:]))).astype(np.int64)
            cdf = np.cumsum(weights)
            pick = min(int(np.searchsorted(cdf, u[-2] * cdf[-1], side="right")), n + m - 1)
            assert same(weak, want_weak) and same(experts, want) and chosen == pick


def test_compiled_decision_is_the_steps(monkeypatch):
    """AdaBandit decides the same with the compiled decision as step by step, and learns the
    same (the reward model's expert included)."""
    from boosters.online.adabandit import AdaBandit
    from boosters.online.template import BoostingTemplate

    rng = np.random.default_rng(5)
    xs = [{f"f{j}": float(v) for j, v in enumerate(rng.normal(size=6).round(1))}
          for _ in range(300)]
    labels = rng.integers(0, 4, 300)

    def run():
        booster, out = AdaBandit(4, 5, seed=3, rho=0.2), []
        for x, y in zip(xs, labels.tolist(), strict=True):
            d = booster.decide_one(x)
            out.append((d.action, d.internals["weak"].tolist(), d.internals["experts"].tolist(),
                        d.internals["expert"], d.probabilities.tolist()))
            booster.learn_one(x, d, reward=float(d.action == y))
        return out

    fused = run()
    monkeypatch.setattr(BoostingTemplate, "_compiled_decision", lambda *a: None)
    assert fused == run()
