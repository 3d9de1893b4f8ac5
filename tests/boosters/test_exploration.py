"""Tests of eq. 2 (exploration), eqs. 3-4 (loss estimators) and eq. 5 (estimated costs).

Paper: Zhang et al. 2019, *Online Multiclass Boosting with Bandit Feedback*, Sec. 2.2.
Expectations are computed exactly by enumerating the played label
``ytilde`` under ``p``, never by sampling.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from boosters.exploration import (
    dr_loss_estimate,
    estimated_costs,
    exploration_distribution,
    full_information_loss,
    loss_estimate,
    naive_loss_estimate,
)

KS = (2, 3, 5)
RHOS = (0.01, 0.3)


def _proposed(yhat, ytilde, correct, p):
    return loss_estimate(yhat, ytilde, correct, p)


def _naive(yhat, ytilde, correct, p):
    return naive_loss_estimate(ytilde, correct, p)


def _one_minus_e(y, k):
    v = np.ones(k)
    v[y] = 0.0
    return v


# --- eq. 2 -------------------------------------------------------------------------------------


@pytest.mark.parametrize("k", KS)
@pytest.mark.parametrize("rho", RHOS)
def test_exploration_distribution(k, rho):
    for yhat in range(k):
        p = exploration_distribution(yhat, k, rho)
        assert p.shape == (k,)
        assert np.isclose(p.sum(), 1.0)
        assert np.isclose(p[yhat], 1.0 - rho)
        others = np.delete(p, yhat)
        assert np.allclose(others, rho / (k - 1))
        assert (p > 0).all()


# --- eqs. 3 and 4: exact unbiasedness ------------------------------------------------------------


@pytest.mark.parametrize("estimator", [_proposed, _naive], ids=["eq4", "eq3"])
@pytest.mark.parametrize("k", KS)
@pytest.mark.parametrize("rho", RHOS)
def test_estimator_is_unbiased_exactly(estimator, k, rho):
    for y, yhat in itertools.product(range(k), repeat=2):
        p = exploration_distribution(yhat, k, rho)
        expectation = np.zeros(k)
        for ytilde in range(k):
            expectation += p[ytilde] * estimator(yhat, ytilde, ytilde == y, p)
        assert np.allclose(expectation, _one_minus_e(y, k)), (y, yhat)
        assert np.allclose(expectation, full_information_loss(y, k))


@pytest.mark.parametrize("k", KS)
@pytest.mark.parametrize("rho", RHOS)
def test_doubly_robust_estimate_is_unbiased_exactly_for_any_baseline(k, rho):
    rng = np.random.default_rng(k)
    for y, yhat in itertools.product(range(k), repeat=2):
        p = exploration_distribution(yhat, k, rho)
        baseline = rng.uniform(-0.5, 1.5, k)  # any guess, even outside [0, 1]
        expectation = sum(
            p[a] * dr_loss_estimate(yhat, a, a == y, p, baseline) for a in range(k)
        )
        assert np.allclose(expectation, _one_minus_e(y, k), rtol=0, atol=1e-9), (y, yhat)


@pytest.mark.parametrize("k", KS)
def test_doubly_robust_estimate_with_zero_baseline_is_eq4(k):
    for yhat, a, correct in itertools.product(range(k), range(k), (False, True)):
        p = exploration_distribution(yhat, k, 0.2)
        got = dr_loss_estimate(yhat, a, correct, p, np.zeros(k))
        assert np.array_equal(got, loss_estimate(yhat, a, correct, p)), (yhat, a, correct)


def test_doubly_robust_estimate_keeps_the_baseline_where_nothing_is_seen():
    """A wrong round reveals only the played label: elsewhere the estimate is the guess."""
    p = exploration_distribution(1, 4, 0.2)
    baseline = np.array([0.3, 0.6, 0.9, 0.1])
    explored = dr_loss_estimate(1, 3, False, p, baseline)  # explored, wrong: nothing on yhat
    assert np.array_equal(explored, baseline)
    exploited = dr_loss_estimate(1, 1, False, p, baseline)
    assert np.array_equal(np.delete(exploited, 1), np.delete(baseline, 1))
    assert np.isclose(exploited[1], 0.6 + 0.4 / 0.8)


@pytest.mark.parametrize("k", KS)
@pytest.mark.parametrize("rho", RHOS)
def test_naive_estimator_is_zero_in_mistake_rounds(k, rho):
    for yhat, ytilde in itertools.product(range(k), repeat=2):
        p = exploration_distribution(yhat, k, rho)
        assert not naive_loss_estimate(ytilde, False, p).any()
        correct = naive_loss_estimate(ytilde, True, p)
        expected = _one_minus_e(ytilde, k) / p[ytilde]
        assert np.allclose(correct, expected)


# --- the four cases of eq. (4) -----------------------------------------------------------------


@pytest.mark.parametrize("k", KS)
@pytest.mark.parametrize("rho", RHOS)
def test_four_cases_of_the_table(k, rho):
    for y, yhat in itertools.product(range(k), repeat=2):
        p = exploration_distribution(yhat, k, rho)
        for ytilde in range(k):
            correct = ytilde == y
            lhat = loss_estimate(yhat, ytilde, correct, p)
            omega = 1.0 - lhat
            expected_l = np.zeros(k)
            expected_w = np.ones(k)
            if ytilde == yhat and correct:  # case A
                expected_l[:] = 1.0 / (1.0 - rho)
                expected_l[y] = 0.0
                expected_w[:] = -rho / (1.0 - rho)
                expected_w[y] = 1.0
            elif ytilde == yhat:  # case B
                expected_l[yhat] = 1.0 / (1.0 - rho)
                expected_w[yhat] = -rho / (1.0 - rho)
            elif correct:  # case C
                expected_l[:] = (k - 1) / rho
                expected_l[[y, yhat]] = 0.0
                expected_w[:] = 1.0 - (k - 1) / rho
                expected_w[[y, yhat]] = 1.0
            # else case D: lhat = 0, omega = 1
            assert np.allclose(lhat, expected_l), (y, yhat, ytilde)
            assert np.allclose(omega, expected_w), (y, yhat, ytilde)
            # boundedness: largest entry (k - 1) / rho, deviation <= k / rho
            assert lhat.max() <= (k - 1) / rho + 1e-9
            assert np.abs(lhat - _one_minus_e(y, k)).max() <= k / rho + 1e-9


def test_case_values_by_hand():
    """k = 3, rho = 0.25, y = 0: the table's entries spelled out."""
    k, rho = 3, 0.25
    p = exploration_distribution(1, k, rho)  # yhat = 1
    assert p.tolist() == [0.125, 0.75, 0.125]
    # case B: played yhat = 1, wrong
    assert np.allclose(loss_estimate(1, 1, False, p), [0.0, 4 / 3, 0.0])
    # case C: explored to y = 0, correct: (k-1)/rho = 8 on label 2 only
    assert np.allclose(loss_estimate(1, 0, True, p), [0.0, 0.0, 8.0])
    # case D: explored to 2, wrong
    assert np.allclose(loss_estimate(1, 2, False, p), [0.0, 0.0, 0.0])
    p0 = exploration_distribution(0, k, rho)
    # case A: yhat = y = 0 played and correct
    assert np.allclose(loss_estimate(0, 0, True, p0), [0.0, 4 / 3, 4 / 3])


# --- eq. 5 ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("k", KS)
@pytest.mark.parametrize("rho", RHOS)
def test_estimated_costs_unbiased(k, rho):
    rng = np.random.default_rng(1000 * k + int(rho * 100))
    n_learners = 4
    C = rng.normal(size=(n_learners, k, k))
    for y, yhat in itertools.product(range(k), repeat=2):
        p = exploration_distribution(yhat, k, rho)
        expectation = np.zeros((n_learners, k))
        for ytilde in range(k):
            lhat = loss_estimate(yhat, ytilde, ytilde == y, p)
            costs = estimated_costs(C, lhat)
            assert costs.shape == (n_learners, k)
            # C (1 - lhat) column by column, written out
            by_hand = sum((1.0 - lhat[r]) * C[:, :, r] for r in range(k))
            assert np.allclose(costs, by_hand)
            expectation += p[ytilde] * costs
        assert np.allclose(expectation, C[:, :, y]), (y, yhat)


def test_full_information_loss():
    assert full_information_loss(2, 4).tolist() == [1.0, 1.0, 0.0, 1.0]
