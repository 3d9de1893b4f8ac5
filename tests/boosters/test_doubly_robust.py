"""Tests of the doubly robust loss estimate of the tree boosters and its reward model.

The estimate's exact unbiasedness is in tests/boosters/test_exploration.py (any baseline) and
tests/boosters/test_restricted.py (through a booster, restricted decisions included).
"""

from __future__ import annotations

import dataclasses
import pickle

import numpy as np
import pytest

from boosters.exploration import dr_loss_estimate, loss_estimate
from boosters.online.adabandit import AdaBandit
from boosters.online.banditbbm import BanditBBM
from boosters.online.template import GUESS_DECAY
from learners.frozen import dumps_serving
from learners.linear import LinearRewards
from learners.ridge import RidgeRewards


def _stream(n: int, seed: int = 0):
    """Contexts and labels: label 2 for the colour blue, else 0 or 1 by the sign of ``a``."""
    rng = np.random.default_rng(seed)
    for _ in range(n):
        a, colour = float(rng.normal()), str(rng.choice(["red", "green", "blue"]))
        yield {"a": a, "colour": colour}, 2 if colour == "blue" else int(a > 0)


# --- the reward model ----------------------------------------------------------------------------


def test_reward_model_learns_a_linear_rule_from_bandit_feedback():
    model, rng, hits = LinearRewards(3), np.random.default_rng(1), []
    for t, (x, y) in enumerate(_stream(3000)):
        guess = int(model.predict_one(x).argmax())
        action = guess if rng.random() < 0.7 else int(rng.integers(3))
        model.learn_one(x, action, action == y)
        if t >= 2000:
            hits.append(guess == y)
    assert np.mean(hits) > 0.9  # chance is 1/3, the majority class 1/3 to 1/2


def test_reward_model_wrong_round_teaches_only_the_played_action():
    model = LinearRewards(4)
    model.learn_one({"a": 1.0, "b": "x"}, 0, True)
    before = model.weights.copy(), model.bias.copy()
    model.learn_one({"a": 2.0, "b": "x"}, 2, False)
    changed = (model.weights != before[0]).any(axis=0) | (model.bias != before[1])
    assert changed.tolist() == [False, False, True, False]
    model.learn_one({"a": 3.0, "b": "y"}, 1, False, label=3)  # a known label: every action
    assert (model.bias != before[1]).all()


def test_reward_model_memory_is_bounded_and_deterministic():
    def trained():
        model = LinearRewards(2, max_features=8, seed_rows=2)
        for i in range(200):  # 200 distinct ids: more than the 8 rows
            model.learn_one({"id": f"u{i}", "v": float(i % 7)}, i % 2, i % 3 == 0)
        return model

    a, b = trained(), trained()
    assert a.weights.shape == (8, 2) and len(a.index) == 8
    assert np.array_equal(a.weights, b.weights)
    assert np.array_equal(a.predict_one({"id": "u150", "v": 1.0}),
                          b.predict_one({"id": "u150", "v": 1.0}))


def test_reward_model_nominal_attributes_are_indicators():
    model = LinearRewards(2, nominal_attributes=["code"])
    model.learn_one({"code": 3, "v": 1.0}, 0, True)
    assert ("code", 3) in model.index and "code" not in model.index and "v" in model.index


def test_reward_model_stays_finite_on_extreme_numbers():
    model = LinearRewards(3)
    values = [1e308, -1e308, 1e308, 5.0, 2**1023, -(2**1023), 1e-300, 0.0, -3.0, 7.0]
    for i, v in enumerate(values * 3):
        model.learn_one({"a": v, "b": 1.0}, i % 3, i % 2 == 0)
        assert np.isfinite(model.predict_one({"a": v, "b": 1.0})).all(), v
    assert np.isfinite(model.weights).all() and np.isfinite(model.moments).all()


# --- the boosters with estimator="dr" ------------------------------------------------------------


def _trace(booster, n=150):
    actions = []
    for x, y in _stream(n, seed=5):
        d = booster.decide_one(x)
        actions.append(d.action)
        booster.learn_one(x, d, reward=float(d.action == y))
    return actions


def test_dr_booster_learns_from_the_estimate_with_the_models_baseline():
    # the schedule of 10 rounds per action, under which these 40 rounds hold every
    # kind of round, the guess in use included
    booster = AdaBandit(3, n_learners=4, rho=0.2, seed=3, estimator="dr", guess_expert=False,
                        rho_decay=30)
    _trace(booster, 60)
    kinds, labels = set(), np.random.default_rng(2).integers(3, size=40)  # every kind of round
    for (x, _), y in zip(_stream(40, seed=9), labels.tolist(), strict=True):
        d = booster.decide_one(x)
        correct = d.action == y
        baseline = 1.0 - booster.reward_model.predict_one(x)
        if not booster.uses_guess():
            baseline[:] = 0.0  # eq. 4
        expected = dr_loss_estimate(d.internals["yhat"], d.action, correct, d.probabilities,
                                    baseline)
        assert np.array_equal(booster.loss_vector(d, correct, x=x), expected)
        kinds.add((d.action == d.internals["yhat"], bool(correct), booster.uses_guess()))
        weights = booster.reward_model.weights.copy()
        steps = booster.learn_steps(x, d, reward=float(correct))
        tree_steps = 1 if booster.forest is not None else booster.n_learners  # compiled: one
        for _ in range(tree_steps):  # the trees learn first ...
            next(steps)
            assert np.array_equal(booster.reward_model.weights, weights)
        for _ in steps:  # ... then the weights and the reward model
            pass
        assert not np.array_equal(booster.reward_model.weights, weights)
    assert {(True, True, True), (True, False, True), (False, False, True)} <= kinds
    # without a context (or without the model: a model pickled before the option) it is eq. 4
    assert np.array_equal(booster.loss_vector(d, True),
                          loss_estimate(d.internals["yhat"], d.action, True, d.probabilities))


def test_the_guess_is_used_while_the_reward_model_predicts_better():
    """The switch counts importance-weighted hits of the booster's prediction and the reward
    model's best action on the correct rounds, forgetting at GUESS_DECAY a round; the guess is
    used before any hit and while the reward model's hits strictly lead."""
    booster = AdaBandit(3, n_learners=4, rho=0.3, seed=4, estimator="dr")
    labels = np.random.default_rng(6).integers(3, size=120)
    used = set()
    for (x, _), y in zip(_stream(120, seed=7), labels.tolist(), strict=True):
        d = booster.decide_one(x)
        correct = d.action == y
        hits = booster.guess_hits.copy() * GUESS_DECAY
        if correct:
            best = int(booster.reward_model.predict_one(x).argmax())
            hits += np.array([d.internals["yhat"] == y, best == y]) / d.probabilities[d.action]
        used.add(booster.uses_guess())
        now = booster.guess_hits
        assert booster.uses_guess() == (now[1] > now[0] or not now.any())
        booster.learn_one(x, d, reward=float(correct))
        assert np.allclose(booster.guess_hits, hits, rtol=1e-12, atol=0)
    assert used == {True, False}  # random labels: the lead changes hands
    booster.guess_hits[:] = [1.0, 0.0]  # the prediction ahead: eq. 4, the guess unread
    d = dataclasses.replace(d, action=(d.internals["yhat"] + 1) % 3)
    assert np.array_equal(booster.loss_vector(d, False, x=x),
                          loss_estimate(d.internals["yhat"], d.action, False, d.probabilities))
    booster.guess_hits[:] = [1.0, 1.0]  # a tie (a prediction copying the guess): eq. 4
    assert np.array_equal(booster.loss_vector(d, False, x=x),
                          loss_estimate(d.internals["yhat"], d.action, False, d.probabilities))
    for hits in ([0.0, 0.0], [1.0, 2.0]):  # no hit counted yet, or the guess strictly ahead
        booster.guess_hits[:] = hits
        assert not np.array_equal(booster.loss_vector(d, False, x=x), loss_estimate(
            d.internals["yhat"], d.action, False, d.probabilities))


@pytest.mark.parametrize("cls", [AdaBandit, BanditBBM])
def test_dr_booster_is_deterministic_and_pickles(cls):
    def make():
        return cls(3, n_learners=4, seed=11, estimator="dr")

    assert _trace(make()) == _trace(make())
    booster = make()
    _trace(booster, 100)
    copy = pickle.loads(pickle.dumps(booster))
    serving = pickle.loads(dumps_serving(booster))
    for x, _ in _stream(30, seed=8):
        ours = booster.decide_one(x, rng=np.random.default_rng(0))
        assert serving.decide_one(x, rng=np.random.default_rng(0)).action == ours.action
    assert _trace(copy, 80) == _trace(booster, 80)


def test_dr_is_checked_and_other_estimators_have_no_model():
    assert AdaBandit(3, estimator="proposed").reward_model is None
    assert isinstance(AdaBandit(3, estimator="dr").reward_model, RidgeRewards)
    assert isinstance(AdaBandit(3, guess_model="linear").reward_model, LinearRewards)
    with pytest.raises(ValueError, match="estimator"):
        AdaBandit(3, estimator="doubly")
