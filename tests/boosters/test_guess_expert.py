"""Tests of the exploration schedule of the tree boosters, the reward model
as AdaBandit's extra expert, the discounted Hedge and the reward model's quadratic features."""

from __future__ import annotations

import dataclasses
import logging
import pickle

import numpy as np
import pytest

from boosters.exploration import MISS_REFERENCE, decayed_rate, dr_loss_estimate
from boosters.online.adabandit import AdaBandit, AdaBoostOLM
from boosters.online.banditbbm import BanditBBM, OnlineMBBM
from boosters.online.oco_bandit import OCOBandit, OCOFull
from boosters.registry import make_booster
from learners.frozen import dumps_serving
from learners.linear import LinearRewards


def _stream(n: int, seed: int = 0):
    """Two numbers; the label is a quadrant of the diagonals (oblique: easy for the reward
    model, a staircase for axis-aligned trees)."""
    rng = np.random.default_rng(seed)
    for _ in range(n):
        a, b = rng.normal(size=2)
        yield {"a": float(a), "b": float(b)}, int(a + b > 0) + 2 * int(a - b > 0)


def _run(booster, n, seed=0, allowed=None):
    hits, decisions = [], []
    for x, y in _stream(n, seed):
        d = booster.decide_one(x, allowed=allowed)
        decisions.append(d)
        hits.append(d.action == y)
        booster.learn_one(x, d, reward=float(d.action == y))
    return np.array(hits), decisions


# --- the exploration schedule --------------------------------------------------------------------


@pytest.mark.parametrize("cls", [AdaBandit, BanditBBM, OCOBandit])
def test_decayed_exploration_is_logged_and_keeps_its_floor(cls):
    booster = cls(4, n_learners=3, rho=0.2, seed=1, rho_decay=20.0, rho_floor=0.05,
                  rho_by_misses=False)
    _, decisions = _run(booster, 400)
    for t, d in enumerate(decisions):  # the decision's rate follows the learning rounds before it
        rho = max(0.05, 0.2 / np.sqrt(1.0 + t / 20.0))
        assert d.probabilities.min() == pytest.approx(rho / 3)
        assert d.probabilities.max() == pytest.approx(1.0 - rho)
    assert decisions[-1].probabilities.min() == pytest.approx(0.05 / 3)  # at the floor


@pytest.mark.parametrize("cls", [AdaBandit, BanditBBM, OCOBandit])
def test_the_rate_shrinks_with_the_predictions_misses(cls):
    booster = cls(4, n_learners=3, rho=0.2, seed=1, rho_decay=20.0, rho_floor=0.02)
    assert booster.rho_by_misses and booster.miss_rate == MISS_REFERENCE  # the schedule's rate
    misses = MISS_REFERENCE
    for x, y in _stream(400):
        d = booster.decide_one(x)
        decayed = 0.2 / np.sqrt(1.0 + booster.n_updates / 20.0)
        floor = min(0.02, max(0.002, misses))  # the floor follows the misses to rho_min
        rate = max(floor, decayed * min(1.0, misses / MISS_REFERENCE))
        assert d.probabilities.max() == pytest.approx(1.0 - rate)
        booster.learn_one(x, d, reward=float(d.action == y))
        if d.action == d.internals["yhat"]:  # only the rounds that play the prediction count
            misses = 0.95 * misses + 0.05 * (d.action != y)
        assert booster.miss_rate == pytest.approx(misses)
    assert misses < MISS_REFERENCE / 2  # the stream is learned: below half the schedule's rate


@pytest.mark.parametrize("cls", [AdaBandit, BanditBBM, OCOBandit])
def test_the_floor_follows_the_misses_down_to_rho_min(cls):
    booster = cls(4, n_learners=3, seed=4, rho_decay=5.0)
    assert (booster.rho_floor, booster.rho_min) == (0.01, 0.002)
    fixed = cls(4, n_learners=3, seed=4, rho_decay=5.0, rho_min=None)  # the floor holds
    lows = {}
    for name, b in (("follows", booster), ("fixed", fixed)):
        _, decisions = _run(b, 600)
        lows[name] = min(d.probabilities.min() for d in decisions)
    assert lows["fixed"] == pytest.approx(0.01 / 3)  # a stream the prediction learns
    assert lows["follows"] < 0.01 / 3 and lows["follows"] >= 0.002 / 3 - 1e-15
    m = booster.miss_rate
    scheduled = 0.1 / np.sqrt(1.0 + booster.n_updates / 5.0) * min(1.0, m / MISS_REFERENCE)
    assert booster.current_rho() == pytest.approx(max(min(0.01, max(0.002, m)), scheduled))
    old = cls(4, n_learners=3, seed=4)
    del old.__dict__["rho_min"]  # a model pickled before the option: the floor holds
    old = pickle.loads(pickle.dumps(old))
    assert old.rho_min is None
    with pytest.raises(ValueError, match=r"rho_min must be in \(0.0, 0.01\], got 0.05"):
        cls(3, rho_min=0.05)


def test_a_rate_without_misses_is_the_schedule_and_a_label_counts_every_round():
    noise = np.random.default_rng(5)
    booster = AdaBandit(4, n_learners=3, rho=0.2, seed=1, rho_decay=20.0)
    for x, _ in _stream(300):  # labels carry no signal: misses near 3/4, the schedule's rate
        d = booster.decide_one(x)
        booster.learn_one(x, d, reward=float(d.action == noise.integers(4)))
    assert booster.miss_rate > MISS_REFERENCE
    assert booster.current_rho() == pytest.approx(0.2 / np.sqrt(1.0 + 300 / 20.0))
    x, y = next(_stream(1, seed=7))
    d = booster.decide_one(x)
    before = booster.miss_rate
    booster.learn_one(x, d, label=(d.internals["yhat"] + 1) % 4)  # a label: the prediction missed
    assert booster.miss_rate == pytest.approx(0.95 * before + 0.05)
    old = AdaBandit(4, n_learners=3, rho=0.2, seed=1)
    for name in ("rho_by_misses", "miss_rate"):  # a model pickled before the option
        del old.__dict__[name]
    old = pickle.loads(pickle.dumps(old))
    assert not old.rho_by_misses and old.current_rho() == 0.2
    for x, y in _stream(30):
        d = old.decide_one(x)
        old.learn_one(x, d, reward=float(d.action == y))
    assert old.miss_rate == MISS_REFERENCE  # the schedule alone, as before


def test_constant_rate_without_a_schedule_and_a_floor_above_rho():
    booster = AdaBandit(3, n_learners=3, rho=0.1, seed=2, rho_decay=None)
    _, decisions = _run(booster, 50)
    assert all(d.probabilities.min() == pytest.approx(0.05) for d in decisions)
    assert decayed_rate(0.005, 10**6, 1.0, 0.01) == 0.005  # never above rho
    with pytest.raises(ValueError, match="rho_decay"):
        AdaBandit(3, rho_decay=0.0)
    with pytest.raises(ValueError, match="rho_floor"):
        BanditBBM(3, rho_floor=1.0)


# --- the reward model as an expert ---------------------------------------------------------------


def test_guess_expert_is_the_last_expert_and_hedge_learns_its_losses():
    booster = AdaBandit(4, n_learners=5, rho=0.1, seed=3, guess_expert=True)
    hits, decisions = _run(booster, 600)
    d = decisions[-1]
    assert booster.log_v.shape == (6,) and d.internals["experts"].shape == (6,)
    x = next(_stream(1, seed=99))[0]
    probe = booster.decide_one(x, rng=np.random.default_rng(0))
    guess = int(booster.reward_model.predict_one(x).argmax())
    assert probe.internals["experts"][-1] == guess
    # the rule is linear: the reward model's expert leads the Hedge and is played
    assert booster.log_v.argmax() == 5
    assert sum(d.internals["expert"] == 5 for d in decisions[-100:]) > 80
    assert hits[-300:].mean() > 0.7  # chance 0.25; the ceiling of rho = 0.1 is 0.9


def test_banditbbm_plays_the_guess_while_its_hits_lead():
    # the schedule of 10 rounds per action: with 5 the importance-weighted
    # hits of this stream never let the guess lead, and both experts should play here
    booster = BanditBBM(4, n_learners=5, rho=0.1, seed=3, guess_expert=True, switch_weight=None,
                        rho_decay=40, rho_by_misses=False)
    _, decisions = _run(booster, 400)
    chosen = {int(d.internals["expert"]) for d in decisions}
    assert chosen == {4, 5}  # the vote of all five learners, or the reward model's expert
    x = next(_stream(1, seed=99))[0]
    for hits, expert in (([1.0, 2.0], 5), ([2.0, 1.0], 4), ([1.0, 1.0], 4)):
        booster.guess_hits[:] = hits  # a strict lead of the guess plays it
        d = booster.decide_one(x, rng=np.random.default_rng(0))
        assert d.internals["expert"] == expert
        assert d.internals["yhat"] == d.internals["experts"][expert]


def test_banditbbm_plays_the_guess_while_its_estimated_losses_are_lower():
    booster = BanditBBM(4, n_learners=5, rho=0.1, seed=3)
    assert booster.switch_weight == 5.0
    _, decisions = _run(booster, 400)
    assert {int(d.internals["expert"]) for d in decisions} == {4, 5}
    x = next(_stream(1, seed=99))[0]
    for losses, expert in (([2.0, 1.0], 5), ([1.0, 2.0], 4), ([1.0, 1.0], 4)):
        booster.switch_losses[:] = losses  # strictly lower losses play the reward model
        booster.guess_hits[:] = losses[::-1]  # the hit counts no longer decide
        d = booster.decide_one(x, rng=np.random.default_rng(0))
        assert d.internals["expert"] == expert
    # the losses fade as the hit counts do, and take the clipped estimate of the two experts
    before = booster.switch_losses.copy()
    d = booster.decide_one(x)
    booster.learn_one(x, d, reward=0.0)
    assert np.all(booster.switch_losses <= before * 0.998 + 6.0)
    assert BanditBBM(3, guess_expert=False).switch_losses is None
    assert OnlineMBBM(3).switch_losses is None
    with pytest.raises(ValueError, match="switch_weight"):
        BanditBBM(3, switch_weight=0.0)


def test_guess_expert_defaults_to_having_a_reward_model():
    assert AdaBandit(3).guess_expert and not AdaBandit(3, estimator="proposed").guess_expert
    assert BanditBBM(3).guess_expert and not BanditBBM(3, estimator="proposed").guess_expert
    assert not BanditBBM(3, estimator="dr", guess_expert=False).guess_expert


def test_schedule_defaults_and_the_twins_keep_the_papers_constant_rate():
    assert AdaBandit(3).rho_decay == BanditBBM(3).rho_decay == OCOBandit(3).rho_decay == "auto"
    for twin in (AdaBoostOLM(3), OnlineMBBM(3)):
        assert twin.rho_decay is None and not twin.guess_expert and twin.reward_model is None
    assert OCOFull(3).rho_decay is None and OCOFull(3).current_rho() == 0.0
    with pytest.raises(ValueError, match="rho_floor"):
        OCOBandit(3, rho_decay=10, rho_floor=0.0)
    with pytest.raises(ValueError, match="'auto' or None, got 'fast'"):
        AdaBandit(3, rho_decay="fast")


@pytest.mark.parametrize("cls", [AdaBandit, BanditBBM, OCOBandit])
def test_auto_schedule_is_five_rounds_per_action_up_to_100(cls):
    """``rho_decay="auto"`` is ``min(5 k, 100)`` rounds: 4 actions decay as ``rho_decay=20``, 10
    as ``rho_decay=50``, 26 as ``rho_decay=100`` (docs/boosters.md, "Exploration schedule")."""
    for k, rounds in ((4, 20), (7, 35), (10, 50), (20, 100), (26, 100)):
        auto, fixed = cls(k, n_learners=2, seed=0), cls(k, n_learners=2, seed=0, rho_decay=rounds)
        for t in (0, rounds, 3 * rounds, 10**6):
            auto.n_updates = fixed.n_updates = t
            assert auto.current_rho() == fixed.current_rho()
        auto.n_updates = 3 * rounds
        assert auto.current_rho() == pytest.approx(0.05)  # halved after 3 * rounds


def test_oco_rounding_update_stays_a_probability_on_a_schedule(monkeypatch):
    """CB-R's pseudo-label probability uses the current rate's pi_min, never above the played
    arm's logged propensity, also for decisions made at an earlier (higher) rate."""
    import boosters.online.oco_bandit as oco_bandit

    seen = []
    real = oco_bandit.rounding_probability
    monkeypatch.setattr(oco_bandit, "rounding_probability",
                        lambda *args: seen.append(real(*args)) or seen[-1])
    booster = OCOBandit(3, n_learners=2, seed=4, update="rounding", rho_decay=5.0)
    early = [booster.decide_one({"a": float(i)}) for i in range(20)]  # at rho = 0.1
    _run(booster, 100)
    assert booster.current_rho() < 0.03
    for d in early:  # learned late, at a lower rate: rewards 0 and 1
        booster.learn_one({"a": 0.0}, d, reward=float(d.action == 0))
    assert len(seen) == 120 and all(0.0 <= q <= 1.0 for q in seen)
    assert min(seen[-20:]) < 0.5 < max(seen[-20:])


def test_the_removed_options_are_refused_new_and_migrated_when_stored(caplog):
    with pytest.raises(ValueError, match="guess_play of adabandit were removed"):
        make_booster("adabandit", n_actions=3, guess_play="switch")
    with pytest.raises(TypeError, match="hedge_discount"):
        AdaBandit(3, hedge_discount=0.5)
    with pytest.raises(TypeError, match="quadratic_expert"):
        AdaBandit(3, quadratic_expert="false")
    with pytest.raises(TypeError, match="guess_expert"):
        AdaBandit(3, guess_expert="yes")
    # a booster pickled while it played its reward model by the switch and faded its Hedge
    booster = AdaBandit(4, n_learners=5, rho=0.1, seed=3)
    _run(booster, 100)
    booster.__dict__.update(guess_play="switch", hedge_discount=0.9,
                            log_v=booster.log_v[:5].copy())  # the Hedge kept the N trees only
    with caplog.at_level(logging.WARNING, logger="boosters._migrations"):
        restored = pickle.loads(pickle.dumps(booster))
    warned = " ".join(r.getMessage() for r in caplog.records)
    assert "guess_play='switch' was removed" in warned and "hedge_discount=0.9" in warned
    assert "guess_play" not in vars(restored) and "hedge_discount" not in vars(restored)
    assert restored.log_v.shape == (6,) and np.isfinite(restored.log_v).all()
    _, decisions = _run(restored, 50)  # the Hedge plays the reward model's expert now
    assert any(int(d.internals["expert"]) == 5 for d in decisions)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="boosters._migrations"):  # the rule kept
        quiet = pickle.loads(pickle.dumps(_with(AdaBandit(3, seed=1), hedge_discount=1.0)))
    assert not caplog.records and "hedge_discount" not in vars(quiet)


def _with(booster, **attributes):
    booster.__dict__.update(attributes)
    return booster


def test_guess_expert_respects_allowed_actions_and_needs_the_reward_model():
    booster = AdaBandit(4, n_learners=3, rho=0.1, seed=4, guess_expert=True)
    _, decisions = _run(booster, 200, allowed=[1, 3])
    assert all(int(e) in (1, 3) for d in decisions for e in d.internals["experts"])
    assert all(d.action in (1, 3) for d in decisions)
    with pytest.raises(ValueError, match="guess_expert"):
        AdaBandit(3, estimator="proposed", guess_expert=True)


def test_guess_expert_is_deterministic_pickles_and_serves():
    def make():
        return AdaBandit(3, n_learners=4, seed=11, guess_expert=True, quadratic_expert=True,
                         rho_decay=50.0)

    a, b = make(), make()
    assert [d.action for d in _run(a, 150)[1]] == [d.action for d in _run(b, 150)[1]]
    copy = pickle.loads(pickle.dumps(a))
    serving = pickle.loads(dumps_serving(a))
    for x, _ in _stream(30, seed=8):
        ours = a.decide_one(x, rng=np.random.default_rng(0))
        assert serving.decide_one(x, rng=np.random.default_rng(0)).action == ours.action
    assert [d.action for d in _run(copy, 60, 5)[1]] == [d.action for d in _run(a, 60, 5)[1]]


def test_quadratic_expert_follows_the_guess_expert_and_learns_every_round():
    booster = AdaBandit(4, n_learners=3, rho=0.1, seed=5, guess_expert=True,
                        quadratic_expert=True)
    assert booster.expert_models() == [booster.reward_model, booster.quadratic_model]
    assert booster.log_v.shape == (5,) and booster.quadratic_model.quadratic
    _, decisions = _run(booster, 100)
    x = next(_stream(1, seed=98))[0]
    d = booster.decide_one(x, rng=np.random.default_rng(1))
    assert d.internals["experts"][-1] == booster.quadratic_model.predict_one(x).argmax()
    assert booster.quadratic_model.pair_weights.any()
    alone = AdaBandit(4, n_learners=3, seed=5, guess_expert=False, quadratic_expert=True)
    assert alone.expert_models() == [alone.quadratic_model] and alone.log_v.shape == (4,)
    with pytest.raises(ValueError, match="quadratic_expert"):
        AdaBandit(3, estimator="proposed", quadratic_expert=True)


def test_a_decision_logged_without_the_guess_expert_still_teaches_the_hedge():
    old = AdaBandit(3, n_learners=3, seed=1, guess_expert=False)
    new = AdaBandit(3, n_learners=3, seed=1)
    x = {"a": 1.0, "b": 0.0}
    d = old.decide_one(x)
    assert d.internals["experts"].shape == (3,) and new.log_v.shape == (4,)
    guess = int(new.reward_model.predict_one(x).argmax())
    before = new.log_v.copy()
    new.learn_one(x, d, reward=0.0)  # the reward model's expert is filled in from the model
    lhat = new.loss_vector(d, False, x=x)
    assert new.n_updates == 1 and np.isfinite(new.log_v).all()
    assert guess in range(3) and not np.array_equal(before, new.log_v)
    short = {**d.internals, "experts": d.internals["experts"][:2]}  # not even the trees'
    broken = AdaBandit(3, n_learners=3, seed=1)
    with pytest.raises(ValueError, match="experts"):
        broken.learn_one(x, dataclasses.replace(d, internals=short), reward=0.0)
    assert broken.n_updates == 0  # refused before anything learned
    assert lhat.shape == (3,)


def test_an_old_pickle_without_the_options_decides_as_before():
    booster = AdaBandit(3, n_learners=3, seed=6, estimator="proposed", rho=0.1)
    _run(booster, 30)
    names = ("guess_expert", "rho_decay", "rho_floor", "guess_model", "hedge_weight")
    for name in names:
        booster.__dict__.pop(name)  # what a model pickled before the options holds
    restored = pickle.loads(pickle.dumps(booster))
    assert restored.guess_expert is False and restored.rho_decay is None
    assert restored.guess_model == "linear" and restored.hedge_weight is None
    assert restored.current_rho() == 0.1
    assert restored.decide_one({"a": 1.0, "b": 0.0}).internals["experts"].shape == (3,)


# --- the Hedge's losses: the reward model's guess, clipped importance weights -------------------


def _explored_correct_round(booster, x, y):
    """Decide until a decision explores onto ``y`` (its propensity ``rho / (k - 1)``), then
    learn it; returns the decision."""
    for _ in range(10_000):
        d = booster.decide_one(x)
        if d.action == y and d.action != d.internals["yhat"]:
            booster.learn_one(x, d, reward=1.0)
            return d
    raise AssertionError("no explored round")


def test_hedge_judges_experts_by_the_clipped_doubly_robust_estimate():
    booster = AdaBandit(26, n_learners=4, seed=1)
    assert booster.hedge_weight == 5.0
    x = {"a": 0.5, "b": -1.0}
    guess = booster.reward_model.predict_one(x)
    d = booster.decide_one(x)
    lhat = booster.loss_vector(d, True, x=x, guess=guess)
    judged = booster._expert_losses(d, True, lhat, guess)
    expected = dr_loss_estimate(d.internals["yhat"], d.action, True, d.probabilities,
                                1.0 - guess, max_weight=5.0)
    np.testing.assert_array_equal(judged, expected)
    paper = AdaBandit(26, n_learners=4, seed=1, hedge_weight=None)
    assert paper._expert_losses(d, True, lhat, guess) is lhat
    restricted = dataclasses.replace(d, internals={**d.internals, "allowed": np.arange(3)})
    assert booster._expert_losses(restricted, True, lhat, guess) is lhat


def test_one_explored_round_moves_the_hedge_by_at_most_the_weight():
    """With 26 actions an explored correct round weighs (k - 1) / rho = 250 at rho = 0.1: the
    paper's Hedge takes that loss on every expert that missed it; the clipped estimate at most
    ``hedge_weight + 1``, so one rare round cannot settle the Hedge for the rest of a stream."""
    spreads = {}
    for weight in (None, 5.0):
        booster = AdaBandit(26, n_learners=4, seed=2, hedge_weight=weight)
        d = _explored_correct_round(booster, {"a": 0.3}, 7)
        assert 1.0 / d.probabilities[d.action] > 200
        spreads[weight] = np.ptp(booster.log_v)
    assert spreads[None] > 100 and spreads[5.0] <= 6.0


def test_hedge_weight_is_checked():
    with pytest.raises(ValueError, match="hedge_weight"):
        AdaBandit(3, hedge_weight=0.5)
    assert AdaBoostOLM(3).hedge_weight is None


# --- quadratic features ------------------------------------------------------------------------


def test_quadratic_reward_model_learns_a_product_rule_a_linear_one_cannot():
    """Reward of action 1 iff a * b > 0 (an XOR of signs): no linear rule beats 1/2 by much."""

    def accuracy(model):
        rng, hits = np.random.default_rng(0), []
        for t in range(3000):
            a, b = rng.normal(size=2)
            x, y = {"a": float(a), "b": float(b)}, int(a * b > 0)
            guess = int(model.predict_one(x).argmax())
            action = guess if rng.random() < 0.8 else int(rng.integers(2))
            model.learn_one(x, action, action == y)
            if t >= 2000:
                hits.append(guess == y)
        return np.mean(hits)

    assert accuracy(LinearRewards(2, quadratic=True)) > 0.9
    assert accuracy(LinearRewards(2)) < 0.7


def test_normalized_steps_move_the_scores_less_with_many_features():
    def first_step(normalized):
        model = LinearRewards(2, normalized=normalized)
        x = {f"f{i}": float(i % 2) for i in range(50)}  # 25 ones: norm 5
        model.learn_one(x, 0, True)  # moments only (one value of each feature: z = 0)
        model.learn_one({f"f{i}": float((i + 1) % 2) for i in range(50)}, 0, True)
        return model.weights[:50, 0].copy()

    plain, normed = first_step(False), first_step(True)
    assert np.abs(plain).max() > 0 and np.allclose(normed, plain / np.sqrt(50))


def test_quadratic_table_is_bounded_and_nominal_products_are_hashed():
    model = LinearRewards(2, quadratic=True, max_pairs=16)
    for i in range(100):
        model.learn_one({"id": f"u{i}", "dev": f"d{i % 5}", "v": float(i % 7)}, i % 2, i % 3 == 0)
    assert model.pair_weights.shape == (16, 2) and np.isfinite(model.pair_weights).all()
    assert np.isfinite(model.predict_one({"id": "new", "v": 1e300})).all()


def test_predicting_writes_nothing_and_a_serving_copy_predicts_alike():
    model = LinearRewards(3, quadratic=True, seed_rows=2)
    probe = {"a": 0.3, "colour": "teal", "unseen": 5.0}
    before = pickle.dumps(model)
    assert np.array_equal(model.predict_one(probe), np.full(3, 0.5))  # nothing learned yet
    assert pickle.dumps(model) == before  # no row, no products' table made by a prediction
    for i in range(40):
        model.learn_one({"a": i / 40, "colour": "red" if i % 2 else "blue"}, i % 3, i % 4 == 0)
    before = pickle.dumps(model)
    expected = model.predict_one(probe)
    assert pickle.dumps(model) == before
    served = pickle.loads(dumps_serving(model))
    assert np.array_equal(served.predict_one(probe), expected)
    assert not hasattr(served, "squares") and served.weights.shape[0] == len(model.index)
