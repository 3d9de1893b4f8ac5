"""Tests of AdaBandit and Adaboost.OLM (Zhang et al. 2019): gradient, OGD step, clipping, Hedge.

Expected gradients are central finite differences of the logistic loss written with
:func:`logistic_loss`, or closed forms written out here; the library's cost matrices are only
the thing under test.
"""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest

from boosters.exploration import loss_estimate
from boosters.online.adabandit import AdaBandit, AdaBoostOLM, logistic_cost_matrices, logistic_loss

EPS = 1e-5


def _loss_by_hand(s: np.ndarray, y: int) -> float:
    return sum(math.log1p(math.exp(s[l] - s[y])) for l in range(len(s)) if l != y)


def _fd_alpha_gradient(s_prev, h, a, omega) -> float:
    """Central difference of ``sum_j omega_j l_j(s_prev + a e_h)`` in ``a``."""

    def f(b):
        s = np.array(s_prev, dtype=float)
        s[h] += b
        return sum(omega[j] * logistic_loss(s, j) for j in range(len(s)))

    return (f(a + EPS) - f(a - EPS)) / (2 * EPS)


def _ref_code_gradient(s_prev, h, a, omega) -> float:
    """The authors' derivative: the j = h branch uses exp(s_l - a - s_h) (eq. (11))."""
    k = len(s_prev)
    total = 0.0
    for j in range(k):
        if j != h:
            total += omega[j] / (1.0 + math.exp(s_prev[j] - s_prev[h] - a))
        else:
            total -= omega[h] * sum(
                1.0 / (1.0 + math.exp(s_prev[l] - a - s_prev[h])) for l in range(k) if l != h
            )
    return total


def _prefix_votes(weak, alpha, k):
    """s^{i-1} for every learner i (rows 0..N-1), written as a plain loop."""
    rows = []
    s = np.zeros(k)
    for h, a in zip(weak.tolist(), alpha.tolist(), strict=True):
        rows.append(s.copy())
        s[h] += a
    return np.array(rows)


def _context(i: int) -> tuple[dict, int]:
    a = (i * 7) % 5
    b = "red" if i % 3 else "blue"
    return {"a": float(a), "b": b}, (a + (b == "red")) % 3


def _record_gradients(booster):
    calls = []
    cls_method = type(booster)._gradients

    def wrapper(votes, weak, costs, omega_like):
        out = cls_method(booster, votes, weak, costs, omega_like)
        calls.append(np.array(out, copy=True))
        return out

    booster._gradients = wrapper
    return calls


# --- the loss and its gradient -------------------------------------------------------------------


def test_logistic_loss_by_hand():
    rng = np.random.default_rng(0)
    for _ in range(20):
        k = int(rng.integers(2, 7))
        s = rng.uniform(-3, 3, size=k)
        for y in range(k):
            assert logistic_loss(s, y) == pytest.approx(_loss_by_hand(s, y), rel=1e-12)
    assert logistic_loss(np.zeros(4), 1) == pytest.approx(3 * math.log(2))


def test_cost_matrix_column_is_loss_gradient():
    rng = np.random.default_rng(1)
    for _ in range(25):
        k = int(rng.integers(2, 7))
        s = rng.uniform(-3, 3, size=k)
        C = logistic_cost_matrices(s[None, :])[0]
        for r in range(k):
            grad = np.empty(k)
            for l in range(k):
                e = np.zeros(k)
                e[l] = EPS
                grad[l] = (logistic_loss(s + e, r) - logistic_loss(s - e, r)) / (2 * EPS)
            assert np.allclose(C[:, r], grad, atol=1e-8), (s, r)


def test_closed_form_alpha_derivative():
    """[C(s + a e_h) omega]_h equals d/da of the estimated loss (eq. (11))."""
    rng = np.random.default_rng(2)
    for _ in range(60):
        k = int(rng.integers(3, 7))
        s = rng.uniform(-3, 3, size=k)
        h = int(rng.integers(k))
        a = float(rng.uniform(-2, 2))
        omega = rng.normal(scale=3.0, size=k)
        moved = s.copy()
        moved[h] += a
        template = (logistic_cost_matrices(moved[None, :])[0] @ omega)[h]
        expected = _fd_alpha_gradient(s, h, a, omega)
        assert template == pytest.approx(expected, rel=1e-6, abs=1e-7)
        # the closed form g_j, written out
        g = [
            1.0 / (1.0 + math.exp(s[j] - s[h] - a))
            if j != h
            else -sum(1.0 / (1.0 + math.exp(s[h] + a - s[l])) for l in range(k) if l != h)
            for j in range(k)
        ]
        assert template == pytest.approx(float(np.dot(omega, g)), rel=1e-10, abs=1e-12)


# --- AdaBandit's update on actual learn steps ----------------------------------------------------


def _run_steps(booster, rounds, alpha0, rng):
    """Run ``rounds`` decide/learn steps, return per-step records for checking."""
    booster.alpha[:] = alpha0
    calls = _record_gradients(booster)
    records = []
    for i in range(rounds):
        x, y = _context(int(rng.integers(1000)))
        d = booster.decide_one(x)
        before_alpha = booster.alpha.copy()
        before_logv = booster.log_v.copy()
        booster.learn_one(x, d, reward=float(d.action == y))
        records.append(
            (
                d,
                y,
                before_alpha,
                before_logv,
                booster.alpha.copy(),
                booster.log_v.copy(),
                calls[-1],
                booster.t,
            )
        )
        assert len(calls) == i + 1
    return records


@pytest.mark.parametrize("ref_code", [False, True])
def test_learn_step_gradient_step_size_and_hedge(ref_code):
    k, n, rho = 3, 6, 0.3
    booster = AdaBandit(
        n_actions=k, n_learners=n, rho=rho, seed=5, ref_code_gradient=ref_code, alpha_min=-2.0,
        estimator="proposed", rho_decay=None,
    )
    rng = np.random.default_rng(3)
    alpha0 = rng.uniform(-2, 2, size=n)
    cases = set()
    differs = 0
    for d, y, a_before, lv_before, a_after, lv_after, grads, t in _run_steps(
        booster, 40, alpha0, rng
    ):
        weak = d.internals["weak"]
        alpha = d.internals["alpha"]
        assert np.array_equal(alpha, a_before)
        yhat = d.internals["yhat"]
        correct = d.action == y
        cases.add((d.action == yhat, correct))
        lhat = loss_estimate(yhat, d.action, correct, d.probabilities)
        omega = 1.0 - lhat
        prev = _prefix_votes(weak, alpha, k)
        correct_grad = np.array(
            [_fd_alpha_gradient(prev[i], weak[i], alpha[i], omega) for i in range(n)]
        )
        if ref_code:
            expected = np.array(
                [_ref_code_gradient(prev[i], weak[i], alpha[i], omega) for i in range(n)]
            )
            differs += int(not np.allclose(expected, correct_grad, rtol=1e-4, atol=1e-6))
        else:
            expected = correct_grad
        assert np.allclose(grads, expected, rtol=1e-6, atol=1e-6), (grads, expected)
        # eq. 11: eta_t = rho / (k^2 sqrt t), projection on [-2, 2]
        eta = rho / (k**2 * math.sqrt(t))
        assert np.allclose(a_after, np.clip(a_before - eta * expected, -2.0, 2.0), atol=1e-9)
        assert (np.abs(a_after) <= 2.0).all()
        # Hedge: each expert's log weight drops by lhat of its own label (up to a common shift)
        drop = lv_after - (lv_before - lhat[d.internals["experts"]])
        assert np.allclose(drop, drop[0], atol=1e-9)
        assert lv_after.max() == 0.0
    assert booster.t == 40
    assert cases == {(True, True), (True, False), (False, True), (False, False)}  # A-D
    if ref_code:
        assert differs > 0  # the flipped sign matters once alpha != 0 and votes are unequal


def test_ref_code_branch_differs_by_hand():
    """With unequal votes the ref-code's j = h term differs from the true derivative."""
    s, h, a, omega = np.array([0.5, -0.3, 1.2]), 0, 0.7, np.ones(3)
    true = _fd_alpha_gradient(s, h, a, omega)
    assert _ref_code_gradient(s, h, a, omega) != pytest.approx(true, rel=1e-3)


def test_first_update_from_zero_weights():
    """alpha_1 = 0, so every vote is 0 and the derivative is 0.5 (sum_{j != h} w_j - (k-1) w_h)."""
    for seed in range(6):
        k, n, rho = 4, 5, 0.2
        booster = AdaBandit(
            n_actions=k, n_learners=n, rho=rho, seed=seed, alpha_min=-2.0, estimator="proposed",
            rho_decay=None,
        )
        assert not booster.alpha.any() and not booster.log_v.any() and booster.t == 0
        x, y = {"a": 1.0}, seed % k
        d = booster.decide_one(x)
        booster.learn_one(x, d, reward=float(d.action == y))
        lhat = loss_estimate(d.internals["yhat"], d.action, d.action == y, d.probabilities)
        omega = 1.0 - lhat
        weak = d.internals["weak"]
        grad = 0.5 * (omega.sum() - omega[weak]) - 0.5 * (k - 1) * omega[weak]
        eta1 = rho / k**2
        assert booster.t == 1
        assert np.allclose(booster.alpha, np.clip(-eta1 * grad, -2, 2), atol=1e-12)


def test_alpha_projection_bites_and_stays_in_range():
    k, n, rho = 3, 8, 0.05
    booster = AdaBandit(n_actions=k, n_learners=n, rho=rho, seed=9, alpha_min=-2.0, rho_decay=None)
    rng = np.random.default_rng(4)
    alpha0 = np.array([2.0, -2.0] * (n // 2))
    clipped = 0
    for _d, _y, a_before, _, a_after, _, grads, t in _run_steps(booster, 40, alpha0, rng):
        raw = a_before - rho / (k**2 * math.sqrt(t)) * grads
        clipped += int((np.abs(raw) > 2.0).sum())
        assert np.array_equal(a_after, np.clip(raw, -2.0, 2.0))
        assert (a_after >= -2.0).all() and (a_after <= 2.0).all()
    assert clipped > 0


def test_hedge_expert_choice_follows_weights():
    booster = AdaBandit(n_actions=3, n_learners=4, rho=0.1, seed=0, guess_expert=False)
    booster.log_v[:] = np.log([1.0, 2.0, 3.0, 4.0]) - math.log(4.0)
    grid = (np.arange(1000) + 0.5) / 1000
    counts = np.bincount([booster._choose_expert(float(u)) for u in grid], minlength=4)
    assert counts.tolist() == [100, 200, 300, 400]
    booster.log_v[:] = [-5000.0, 0.0, -5000.0, -5000.0]  # huge losses: no underflow trouble
    assert {booster._choose_expert(float(u)) for u in grid} == {1}


# --- Adaboost.OLM ------------------------------------------------------------------------------


def test_adaboost_olm_step_and_hedge():
    k, n = 3, 5
    booster = AdaBoostOLM(n_actions=k, n_learners=n, seed=2)
    assert booster.full_information and booster.rho == 0.0
    booster.alpha[:] = np.random.default_rng(6).uniform(-1.5, 1.5, size=n)
    calls = _record_gradients(booster)
    for i in range(25):
        x, y = _context(i)
        d = booster.decide_one(x)
        assert d.action == d.internals["yhat"]  # rho = 0: plays its prediction
        a_before, lv_before = booster.alpha.copy(), booster.log_v.copy()
        booster.learn_one(x, d, label=y)
        weak, alpha = d.internals["weak"], d.internals["alpha"]
        prev = _prefix_votes(weak, alpha, k)
        omega = np.zeros(k)
        omega[y] = 1.0  # full information: lhat = 1 - e_y
        expected = np.array(
            [_fd_alpha_gradient(prev[j], weak[j], alpha[j], omega) for j in range(n)]
        )
        assert np.allclose(calls[-1], expected, rtol=1e-6, atol=1e-7)
        step = 2 * math.sqrt(2) / ((k - 1) * math.sqrt(i + 1))
        assert booster.t == i + 1
        assert np.allclose(booster.alpha, np.clip(a_before - step * expected, -2, 2), atol=1e-9)
        wrong = (d.internals["experts"] != y).astype(float)
        drop = booster.log_v - (lv_before - wrong)  # v <- v e^{-1} for each wrong expert
        assert np.allclose(drop, drop[0], atol=1e-12)


def test_adaboost_olm_tree_weights():
    k, n = 4, 6
    booster = AdaBoostOLM(n_actions=k, n_learners=n, seed=3)
    kappa = booster.kappa
    assert ((kappa[1:] >= 5) & (kappa[1:] <= 20)).all()
    rng = np.random.default_rng(8)
    votes = rng.uniform(-2, 2, size=(n, k))
    y = 2
    C = logistic_cost_matrices(votes)
    costs = C[:, :, y]  # C e_y
    labels, weights = booster._labels_weights(costs, rng.random(n), y)
    assert labels.tolist() == [y] * n
    assert weights[0] == 5.0
    for i in range(1, n):
        assert weights[i] == pytest.approx(-kappa[i] * C[i, y, y] / (k - 1))


# --- loss_clip: clipped importance weights (docs/boosters.md, "Many actions") --------------------


def test_loss_clip_clips_the_estimate_and_sets_the_step():
    """Every round kind A-D: the loss vector learning uses is eq. 4's clipped to [1 - c, c], the
    Hedge drops by it and alpha steps by 1 / (k c sqrt t) along the gradient of its omega."""
    k, n, rho, c = 4, 5, 0.3, 2.5
    booster = AdaBandit(
        n_actions=k, n_learners=n, rho=rho, seed=7, loss_clip=c, alpha_min=-2, estimator="proposed"
    )
    rng = np.random.default_rng(11)
    cases, clipped = set(), 0
    for d, y, a_before, lv_before, a_after, lv_after, grads, t in _run_steps(
        booster, 60, rng.uniform(-1, 1, size=n), rng
    ):
        yhat, correct = d.internals["yhat"], d.action == y
        cases.add((d.action == yhat, correct))
        raw = loss_estimate(yhat, d.action, correct, d.probabilities)
        lhat = np.clip(raw, 1.0 - c, c)
        clipped += int((raw != lhat).any())
        assert np.array_equal(booster.loss_vector(d, correct), lhat)
        prev = _prefix_votes(d.internals["weak"], d.internals["alpha"], k)
        expected = [
            _fd_alpha_gradient(prev[i], d.internals["weak"][i], a_before[i], 1.0 - lhat)
            for i in range(n)
        ]
        assert np.allclose(grads, expected, rtol=1e-6, atol=1e-6)
        eta = 1.0 / (k * c * math.sqrt(t))
        assert np.allclose(a_after, np.clip(a_before - eta * grads, -2.0, 2.0), atol=1e-12)
        drop = lv_after - (lv_before - lhat[d.internals["experts"]])
        assert np.allclose(drop, drop[0], atol=1e-9)
    assert cases == {(True, True), (True, False), (False, True), (False, False)}
    assert clipped > 0  # 1 / p = (k - 1) / rho = 10 > c in every explored right round


def test_loss_clip_default_is_the_paper_and_is_checked():
    paper, clipped = AdaBandit(3, seed=1), AdaBandit(3, seed=1, loss_clip=5.0)
    assert paper.loss_clip is None and clipped.loss_clip == 5.0
    del paper.__dict__["loss_clip"]  # a model pickled before the option: the paper's estimate
    assert pickle.loads(pickle.dumps(paper)).loss_clip is None
    for bad in (0.5, -1.0, float("inf"), "2", True):
        with pytest.raises(ValueError, match="loss_clip"):
            AdaBandit(3, loss_clip=bad)


def test_loss_clip_is_deterministic_by_seed():
    def trace(seed):
        booster = AdaBandit(n_actions=5, n_learners=4, rho=0.05, seed=seed, loss_clip=5.0)
        actions = []
        for i in range(80):
            x, y = {"a": float(i % 5), "b": float(i % 3)}, i % 5
            d = booster.decide_one(x)
            actions.append(d.action)
            booster.learn_one(x, d, reward=float(d.action == y))
        return actions, booster.alpha.tolist(), booster.log_v.tolist()

    assert trace(3) == trace(3)
    assert trace(3) != trace(4)


def test_alpha_min_zero_keeps_weights_nonnegative():
    """alpha_min=0: the paper's step projected on [0, 2]; a projection that bites on the low end."""
    k, n, rho = 4, 6, 0.1
    booster = AdaBandit(n_actions=k, n_learners=n, rho=rho, seed=2, alpha_min=0.0, rho_decay=None)
    rng = np.random.default_rng(8)
    floored = 0
    for _d, _y, a_before, _, a_after, _, grads, t in _run_steps(
        booster, 60, np.full(n, 0.001), rng
    ):
        raw = a_before - rho / (k**2 * math.sqrt(t)) * grads
        floored += int((raw < 0.0).sum())
        assert np.array_equal(a_after, np.clip(raw, 0.0, 2.0))
    assert floored > 0 and (booster.alpha >= 0.0).all()
    for bad in (0.5, -3.0, "0"):
        with pytest.raises(ValueError, match="alpha_min"):
            AdaBandit(3, alpha_min=bad)
    old = AdaBandit(3, seed=1)
    assert old.alpha_min == 0.0  # the default chosen on the quality benchmark
    del old.__dict__["alpha_min"]  # a model pickled before the option: the paper's -2
    assert pickle.loads(pickle.dumps(old)).alpha_min == -2.0


def test_defaults_and_the_papers_settings():
    """The defaults chosen on the quality benchmark (docs/boosters.md, "Defaults"); the paper's
    algorithm stays one parameter away, and the full-information twin keeps the authors' set."""
    booster = AdaBandit(4)
    assert (booster.rho, booster.alpha_min, booster.n_learners) == (0.1, 0.0, 20)
    assert (booster.rho_decay, booster.rho_floor) == ("auto", 0.01)  # decaying
    assert booster.guess_expert and not booster.quadratic_model
    assert booster.tree_profile == "bandit" and booster.loss_clip is None
    assert booster.leaf_prediction == "nba"
    assert booster.estimator == "dr" and booster.reward_model is not None
    assert AdaBoostOLM(4).estimator == "proposed" and AdaBoostOLM(4).reward_model is None
    assert AdaBandit(4, alpha_min=-2.0).alpha_min == -2.0
    assert (AdaBoostOLM(4).alpha_min, AdaBoostOLM(4).leaf_prediction) == (-2.0, "mc")
    old = AdaBandit(4)
    del old.__dict__["leaf_prediction"]  # a model pickled before the option: majority class
    assert pickle.loads(pickle.dumps(old)).leaf_prediction == "mc"
