"""Boosting by improper game playing (BCHM20 Algorithm 3, boosters/batch/game.py) and
Algorithm 2's realizable branch (StatisticalAgnosticBooster(realizable=True)): hand-worked
rounds, Proposition 6's bound on a finite game, and the branch boosting a sample that no stump
separates."""

from __future__ import annotations

import math

import numpy as np
import pytest

from boosters.batch.game import BoxOGD, algorithm2_gradient, algorithm2_player, play_game
from boosters.batch.sample_efficient import StatisticalAgnosticBooster


def test_proposition_6_on_a_finite_game():
    """With an exact best response (eps_0 = 0, gamma = 1: B proper), the average answer's
    correlation is within R_A(T) / (m T) = 4 / (gamma sqrt T) of the best hypothesis's."""
    rng = np.random.default_rng(0)
    m, rounds = 30, 2500
    y = rng.choice([-1.0, 1.0], size=m)
    hypotheses = rng.choice([-1.0, 1.0], size=(12, m))
    best = float((hypotheses @ y).max() / m)

    def best_response(p, t):
        return hypotheses[int(np.argmax(hypotheses @ (p * y)))]

    answers = play_game(algorithm2_player(m, 1.0, realizable=False), best_response,
                        algorithm2_gradient(y, 1.0), rounds)
    average = float(np.mean(answers, axis=0) @ y / m)
    assert average >= best - 4.0 / math.sqrt(rounds)
    assert average > float(hypotheses[0] @ y / m) or best == float(hypotheses[0] @ y / m)


def test_box_ogd_projects_and_steps_by_one_over_sqrt_t():
    player = BoxOGD(np.array([0.5, 0.5]), low=0.0, high=1.0, scale=0.2)
    player.update(np.array([1.0, -1.0]), t=4)  # step 0.2 / 2 = 0.1
    np.testing.assert_allclose(player.p, [0.4, 0.6])
    player.update(np.array([10.0, -10.0]), t=1)
    np.testing.assert_allclose(player.p, [0.0, 1.0])
    with pytest.raises(ValueError, match="low < high"):
        BoxOGD(np.zeros(1), 1.0, 0.0, 1.0)


class Fixed:
    """A weak learner that answers a fixed hypothesis and records what it was given."""

    def __init__(self, answers):
        self.answers, self.seen = list(answers), []

    def fit(self, X, labels, weights, seed):
        self.seen.append((X[:, 0].copy(), labels.copy(), weights.copy()))
        answer = self.answers[min(len(self.seen), len(self.answers)) - 1]
        return type("H", (), {"predict": lambda _, Z: answer[Z[:, 0].astype(int)]})()


def test_the_realizable_branch_by_hand():
    X = np.arange(4.0)[:, None]  # the point's index as its feature
    y = np.array([0, 1, 1, 0])  # -1, +1, +1, -1
    h = np.array([-1.0, 1.0, -1.0, -1.0])  # right on 0, 1, 3; wrong on 2
    weak = Fixed([h])
    gamma = 0.4
    booster = StatisticalAgnosticBooster(n_rounds=2, weights="oco", realizable=True, gamma=gamma,
                                         holdout=0.0, weak_learner=weak, random_state=0)
    booster.fit(X, y)
    # round 1: p_1 = 1, the true labels weighted equally
    rows, labels, weights = weak.seen[0]
    np.testing.assert_array_equal(labels, [-1, 1, 1, -1])
    np.testing.assert_allclose(weights, 0.25)
    # round 2: p_2 = clip(1 + (gamma - h y) / 2): 0.7 where h was right, 1 where wrong
    p2 = np.clip(1.0 + (gamma - h * np.array([-1, 1, 1, -1])) / 2.0, 0.0, 1.0)
    np.testing.assert_allclose(p2, [0.7, 0.7, 1.0, 0.7])
    np.testing.assert_allclose(weak.seen[1][2], p2 / p2.sum())
    assert [s[2] for s in booster.steps_] == [1 / (gamma * 2)] * 2


def test_a_weighting_that_reaches_zero_repeats_the_last_hypothesis():
    X = np.arange(4.0)[:, None]
    y = np.array([0, 1, 1, 0])
    perfect = np.array([-1.0, 1.0, 1.0, -1.0])  # h y = 1 > gamma everywhere: p falls to 0
    weak = Fixed([perfect])
    booster = StatisticalAgnosticBooster(n_rounds=40, weights="oco", realizable=True,
                                         gamma=0.1, holdout=0.0, weak_learner=weak,
                                         random_state=0).fit(X, y)
    fitted = len(weak.seen)
    assert len(booster.steps_) == 40 and fitted < 40  # the later rounds fitted nothing
    assert all(s[1] is booster.steps_[fitted - 1][1] for s in booster.steps_[fitted:])
    assert booster.score(X, y) == 1.0


def test_the_realizable_branch_boosts_an_interval_no_stump_separates():
    rng = np.random.default_rng(1)
    X = rng.uniform(-1, 1, size=(400, 1))
    y = (np.abs(X[:, 0]) < 0.5).astype(int)  # +1 inside, -1 outside: two thresholds
    for mode in ("fractional", "sampling"):
        booster = StatisticalAgnosticBooster(n_rounds=40, weights="oco", realizable=True,
                                             gamma=0.2, mode=mode, holdout=0.0,
                                             random_state=0).fit(X, y)
        assert booster.score(X, y) >= 0.95, mode  # a single stump: at most 0.75
    with pytest.raises(ValueError, match="realizable"):
        StatisticalAgnosticBooster(realizable=True).fit(X, y)


def test_theorem_9_trades_rounds_for_rows_against_theorem_4():
    from boosters.batch.sample_efficient import SampleEfficientBooster
    from boosters.batch.theorems import settings, stump_class_size

    gamma, eps, size = 0.5, 0.5, stump_class_size(4000, 2)
    t4, t9 = settings(4, gamma, eps, size), settings(9, gamma, eps, size)
    log_b = math.log(size)
    assert t4.n_rounds == math.ceil(log_b / (gamma * eps) ** 2)  # oracle calls
    assert t9.n_rounds == math.ceil(1 / (gamma * eps) ** 2) < t4.n_rounds
    assert t9.chunk_rows == math.ceil(log_b / (gamma * eps) + log_b**3)
    assert (t4.eta, t9.eta) == pytest.approx((gamma**2 * eps / log_b, gamma**2 * eps))
    assert t4.tau == t9.tau == gamma * eps and t9.sigma == pytest.approx(t9.eta / gamma)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(t9.rows_needed, 2))
    y = (X[:, 0] + X[:, 1] > 0).astype(int)
    booster = SampleEfficientBooster(**t9.params(), holdout=t9.holdout_rows / t9.rows_needed,
                                     random_state=0).fit(X, y)
    assert len(booster.steps_) == t9.n_rounds  # one weak-learner call a round
    final = list(booster.staged_decision_function(X))[-1]  # H_{T+1}: the 4 hold-out rows of
    assert np.mean((final > 0) == (y == 1)) >= 0.69  # S_0 = 1 / eps^2 choose by chance
    with pytest.raises(ValueError, match="theorem"):
        settings(5, gamma, eps, size)
