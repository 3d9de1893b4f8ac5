"""Tests of the baselines: UniformPolicy, EpsilonGreedyTree and RiverPolicy (the protocol
properties they share with every booster are in tests/boosters/test_booster_protocol.py)."""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest
from river import bandit
from river.datasets import synth

from boosters.base import Decision
from boosters.online.baselines import EpsilonGreedyTree, RiverPolicy, UniformPolicy

RIVER_POLICIES = RiverPolicy.POLICIES


def _update(policy: RiverPolicy, arm: int, reward: float) -> None:
    """Feed ``reward`` on ``arm`` through a uniform decision (for hand-built states)."""
    k = policy.n_actions
    policy.learn_one({}, Decision(arm, np.full(k, 1.0 / k)), reward=reward)


# --- EpsilonGreedyTree ----------------------------------------------------------------------


def test_egreedy_tree_learns_a_contextual_problem():
    booster = EpsilonGreedyTree(3, epsilon=0.1, seed=0)
    uniform = UniformPolicy(3, seed=0)
    ours, theirs = [], []
    for i in range(3000):
        x = {"f": i % 3}
        for policy, rewards in ((booster, ours), (uniform, theirs)):
            d = policy.decide_one(x)
            r = float(d.action == i % 3)
            policy.learn_one(x, d, reward=r)
            rewards.append(r)
    assert np.mean(ours[-1000:]) > 0.8  # best possible: 1 - 0.1 + 0.1 / 3 ~ 0.93
    assert np.mean(theirs[-1000:]) < 0.4


def _rbf_stream(n_classes: int, rounds: int, seed: int) -> list[tuple[dict, int]]:
    """A plain numeric stream: River's RandomRBF (10 numeric features, 50 centroids)."""
    gen = synth.RandomRBF(
        seed_model=seed, seed_sample=seed, n_classes=n_classes, n_features=10, n_centroids=50
    )
    return list(gen.take(rounds))


@pytest.mark.slow
def test_egreedy_tree_learns_from_numeric_features():
    """The importance-weighted classifier tree it replaced (River's grace period 200,
    delta 1e-7, majority-class leaves) stayed below the majority rate here (0.31-0.33 on the
    last quarter for seeds 0-2); the per-action reward trees reach 0.55-0.57."""
    stream = _rbf_stream(4, 3000, seed=7)
    labels = np.array([y for _, y in stream])
    majority = np.bincount(labels).max() / labels.size  # 0.34; chance is 0.25
    booster = EpsilonGreedyTree(4, seed=0)
    hits = []
    for x, y in stream:
        d = booster.decide_one(x)
        hits.append(d.action == y)
        booster.learn_one(x, d, reward=float(hits[-1]))
    assert np.mean(hits[-750:]) > majority + 0.12


@pytest.mark.slow
@pytest.mark.parametrize("seed", [3, 4, 5])
def test_egreedy_tree_splits_on_correlated_features(seed):
    """Wine duplicated x5 (13 correlated numeric features). With a
    tie threshold of 0.05 a leaf waited ~920 rewards for the Hoeffding bound, and on these seeds
    two of the three trees stayed one leaf (last 20%: 0.60, 0.57, 0.57); splitting every 20
    rewards (the defaults) reaches 0.84, 0.87, 0.82."""
    from service.sim.loop import simulate
    from service.sim.streams import load_stream

    data = load_stream("wine", 500)

    def last20(**params):
        booster = EpsilonGreedyTree(3, seed=seed, **params)
        return simulate(booster, data, dup=5, seed=seed).last20_accuracy

    assert last20(grace_period=50, tau=0.05) < 0.65 < 0.8 < last20()


def test_egreedy_tree_propensities():
    booster = EpsilonGreedyTree(4, epsilon=0.2, seed=0)
    x = {"f": 1.0}
    assert booster.decide_one(x).probabilities.tolist() == [0.25] * 4  # untrained: all tie
    booster.learn_one(x, Decision(2, np.full(4, 0.25)), reward=0.5)  # action 2's mean: 0.5
    np.testing.assert_allclose(booster.decide_one(x).probabilities, [0.05, 0.05, 0.85, 0.05])
    np.testing.assert_allclose(booster.scores(x), [0.0, 0.0, 0.5, 0.0])
    booster.learn_one(x, Decision(1, np.full(4, 0.25)), reward=0.5)  # 0.5 vs 0.5: a tie
    np.testing.assert_allclose(booster.decide_one(x).probabilities, [0.05, 0.45, 0.45, 0.05])
    booster.learn_one(x, Decision(1, np.full(4, 0.25)), reward=0.0)  # action 1's mean: 0.25
    np.testing.assert_allclose(booster.decide_one(x).probabilities, [0.05, 0.05, 0.85, 0.05])


def test_egreedy_tree_estimates_mean_rewards_without_weights():
    """Each action's tree averages its own rewards; the propensity does not weight them."""
    booster = EpsilonGreedyTree(3, epsilon=0.3, seed=0)
    x = {"f": 0.0}
    booster.learn_one(x, Decision(0, np.array([0.8, 0.1, 0.1])), reward=1.0)
    booster.learn_one(x, Decision(0, np.array([0.8, 0.1, 0.1])), reward=0.0)
    booster.learn_one(x, Decision(1, np.array([0.1, 0.1, 0.8])), reward=0.25)
    np.testing.assert_allclose(booster.scores(x), [0.5, 0.25, 0.0])
    assert sorted(booster.trees) == [0, 1]  # action 2 never learned: no tree yet


def test_egreedy_tree_label_trains_every_action():
    booster = EpsilonGreedyTree(3, epsilon=0.0, seed=0)
    x = {"f": 0.0}
    booster.learn_one(x, Decision(0, np.full(3, 1 / 3)), label=2)  # rewards 0, 0, 1
    booster.learn_one(x, Decision(0, np.full(3, 1 / 3)), label=1)  # rewards 0, 1, 0
    booster.learn_one(x, Decision(2, np.full(3, 1 / 3)), label=2)
    np.testing.assert_allclose(booster.scores(x), [0.0, 1 / 3, 2 / 3])
    assert booster.decide_one(x).probabilities.tolist() == [0.0, 0.0, 1.0]


def test_egreedy_tree_pickled_with_the_old_classifier_tree_is_refused():
    booster = EpsilonGreedyTree(3, seed=0)
    assert pickle.loads(pickle.dumps(booster)).trees == {}
    old = EpsilonGreedyTree.__new__(EpsilonGreedyTree)
    old.__dict__.update({k: v for k, v in vars(booster).items() if k != "trees"}, tree=None)
    with pytest.raises(TypeError, match="rebuild the model from its events"):
        pickle.loads(pickle.dumps(old))


def _id_stream(seed: int, users: int = 100, rounds: int = 1500, k: int = 3) -> list:
    """Each of ``users`` ids has a best action of its own; ``x`` is noise."""
    rng = np.random.default_rng(seed)
    group = rng.integers(0, k, users)
    stream = []
    for _ in range(rounds):
        user = int(rng.integers(users))
        stream.append(({"user": f"u{user}", "x": float(rng.random())}, int(group[user])))
    return stream


def _play(booster, stream) -> list[bool]:
    hits = []
    for x, y in stream:
        d = booster.decide_one(x)
        hits.append(d.action == y)
        booster.learn_one(x, d, reward=float(hits[-1]))
    return hits


@pytest.mark.parametrize("seed", [0, 1])
def test_egreedy_tree_learns_an_id_from_its_values_offsets(seed):
    """100 ids seen 15 times each; trees alone stay near the chance
    of 1/3 (0.30-0.36 on the last 500 rounds, seeds 0-2), with the values' offsets 0.92."""
    stream = _id_stream(seed)
    with_offsets = np.mean(_play(EpsilonGreedyTree(3, seed=seed), stream)[-500:])
    trees_alone = np.mean(_play(EpsilonGreedyTree(3, seed=seed, offset_l2=None), stream)[-500:])
    assert with_offsets > 0.85 and with_offsets > trees_alone + 0.4


def test_egreedy_tree_estimate_is_the_tree_plus_the_offsets():
    """Backfitting: the offsets take the residual, the tree the reward less the offsets, so the
    two add up to the action's mean reward (here one context: 3 rewards in 4)."""
    booster = EpsilonGreedyTree(2, epsilon=0.0, seed=0)
    x = {"user": "ann", "f": 1.0}
    for i in range(400):
        booster.learn_one(x, Decision(1, np.array([0.5, 0.5])), reward=float(i % 4 != 0))
    rows = booster.offsets.rows(x, learn=False)
    tree_part = booster.trees[1].predict_one(x)
    offset_part = booster.offsets.predict(rows)[1]
    assert booster.scores(x)[1] == pytest.approx(tree_part + offset_part)
    assert booster.scores(x)[1] == pytest.approx(0.75, abs=0.05)
    assert abs(offset_part) > 0.0 and len(booster.offsets.keys) == 1  # the one string value


def test_egreedy_tree_without_nominal_values_learns_as_trees_alone():
    """No nominal value, no offset: on a numeric stream the decisions are those of
    ``offset_l2=None`` to the bit."""
    stream = _rbf_stream(4, 600, seed=3)
    a, b = EpsilonGreedyTree(4, seed=2), EpsilonGreedyTree(4, seed=2, offset_l2=None)
    for x, y in stream:
        da, db = a.decide_one(x), b.decide_one(x)
        assert da.action == db.action
        np.testing.assert_array_equal(da.probabilities, db.probabilities)
        for booster, d in ((a, da), (b, db)):
            booster.learn_one(x, d, reward=float(d.action == y))
    assert a.offsets.keys == {}


def test_egreedy_tree_pickled_before_the_values_offsets_learns_as_trees_alone():
    old, fresh = EpsilonGreedyTree(3, seed=4), EpsilonGreedyTree(3, seed=4, offset_l2=None)
    state = {k: v for k, v in vars(old).items() if k not in ("offsets", "offset_l2")}
    old = EpsilonGreedyTree.__new__(EpsilonGreedyTree)
    old.__dict__.update(state)
    old = pickle.loads(pickle.dumps(old))
    assert old.offsets is None and old.offset_l2 is None
    stream = _id_stream(4, rounds=300)
    assert _play(old, stream) == _play(fresh, stream)


# --- RiverPolicy ----------------------------------------------------------------------------


@pytest.mark.parametrize("policy", RIVER_POLICIES)
def test_river_policy_learns_the_best_arm(policy):
    booster = RiverPolicy(3, policy=policy, seed=1)
    played = []
    for _ in range(500):
        d = booster.decide_one({"ignored": 1.0})
        booster.learn_one({"ignored": 1.0}, d, reward=float(d.action == 2))
        played.append(d.action)
    assert np.mean(np.array(played[-200:]) == 2) > 0.85


def test_river_epsilon_greedy_propensities_by_hand():
    policy = RiverPolicy(4, policy="epsilon_greedy", epsilon=0.2, seed=0)
    np.testing.assert_allclose(policy.probabilities(), [0.25] * 4)
    _update(policy, 1, 1.0)
    np.testing.assert_allclose(policy.probabilities(), [0.05, 0.85, 0.05, 0.05])
    _update(policy, 3, 1.0)  # arms 1 and 3 tie at mean 1: the 0.8 is shared
    np.testing.assert_allclose(policy.probabilities(), [0.05, 0.45, 0.05, 0.45])
    _update(policy, 3, 0.5)  # arm 3 mean 0.75
    np.testing.assert_allclose(policy.probabilities(), [0.05, 0.85, 0.05, 0.05])


def test_river_ucb_propensities_by_hand():
    policy = RiverPolicy(3, policy="ucb", delta=1.0, seed=0)
    np.testing.assert_allclose(policy.probabilities(), [1 / 3] * 3)
    _update(policy, 0, 1.0)  # arms 1 and 2 unpulled: infinite bounds
    np.testing.assert_allclose(policy.probabilities(), [0.0, 0.5, 0.5])
    _update(policy, 1, 0.0)
    np.testing.assert_allclose(policy.probabilities(), [0.0, 0.0, 1.0])
    _update(policy, 2, 0.5)
    # n = 3: bounds 1 + sqrt(2 ln 3), 0 + sqrt(2 ln 3), 0.5 + sqrt(2 ln 3)
    np.testing.assert_allclose(policy.probabilities(), [1.0, 0.0, 0.0])
    _update(policy, 0, 0.0)
    _update(policy, 0, 0.0)
    # n = 5: arm 0 mean 1/3 over 3 pulls, arm 1 mean 0 over 1, arm 2 mean 0.5 over 1
    bounds = [
        1 / 3 + math.sqrt(2 * math.log(5) / 3),
        0 + math.sqrt(2 * math.log(5)),
        0.5 + math.sqrt(2 * math.log(5)),
    ]
    assert int(np.argmax(bounds)) == 2
    np.testing.assert_allclose(policy.probabilities(), [0.0, 0.0, 1.0])
    _update(policy, 1, 0.5)
    # n = 6: arm 0 mean 1/3 over 3 pulls, arm 1 mean 0.25 over 2, arm 2 mean 0.5 over 1
    b1 = 0.25 + math.sqrt(2 * math.log(6) / 2)
    b2 = 0.5 + math.sqrt(2 * math.log(6) / 1)
    b0 = 1 / 3 + math.sqrt(2 * math.log(6) / 3)
    expected = np.zeros(3)
    expected[int(np.argmax([b0, b1, b2]))] = 1.0
    np.testing.assert_allclose(policy.probabilities(), expected)


def test_river_ucb_ties_are_uniform():
    policy = RiverPolicy(3, policy="ucb", delta=1.0, seed=0)
    for arm, reward in ((0, 0.2), (1, 0.7), (2, 0.7)):
        _update(policy, arm, reward)
    np.testing.assert_allclose(policy.probabilities(), [0.0, 0.5, 0.5])


def test_river_ucb_support_matches_river():
    """River's own pull on the same statistics always lands in our support."""
    booster = RiverPolicy(4, policy="ucb", delta=0.5, seed=2)
    rng = np.random.default_rng(0)
    means = np.array([0.2, 0.4, 0.6, 0.5])
    for _ in range(200):
        d = booster.decide_one({})
        assert d.probabilities[booster.river_policy.pull(list(range(4)))] > 0
        booster.learn_one({}, d, reward=float(rng.random() < means[d.action]))


def test_river_exp3_matches_river_formula():
    booster = RiverPolicy(3, policy="exp3", gamma=0.2, seed=3)
    reference = bandit.Exp3(gamma=0.2, seed=0)
    for i in range(100):
        d = booster.decide_one({})
        reference.pull([0, 1, 2])
        np.testing.assert_array_equal(d.probabilities, list(reference._probabilities.values()))
        reward = 0.7 * float(d.action == 2) if i % 3 else float(d.action == 0)
        booster.learn_one({}, d, reward=reward)
        reference.update(d.action, reward)


def test_river_exp3_uses_the_logged_propensity_by_hand():
    booster = RiverPolicy(2, policy="exp3", gamma=0.5, seed=0)
    old = booster.decide_one({})
    np.testing.assert_allclose(old.probabilities, [0.5, 0.5])
    booster.learn_one({}, Decision(0, np.array([0.5, 0.5])), reward=1.0)
    w0 = math.exp(0.5 * (1.0 / 0.5) / 2)
    p0 = 0.5 * w0 / (w0 + 1) + 0.25
    np.testing.assert_allclose(booster.probabilities(), [p0, 1 - p0])
    # a late reward for a decision logged with other probabilities divides by those
    booster.learn_one({}, Decision(1, np.array([0.8, 0.2])), reward=1.0)
    w1 = math.exp(0.5 * (1.0 / 0.2) / 2)
    p0 = 0.5 * w0 / (w0 + w1) + 0.25
    np.testing.assert_allclose(booster.probabilities(), [p0, 1 - p0])


def test_river_exp3_weights_do_not_overflow():
    booster = RiverPolicy(3, policy="exp3", gamma=0.9, seed=0)
    for _ in range(3000):  # unguarded, the weight of arm 2 overflows after ~2400 rounds
        d = booster.decide_one({})
        booster.learn_one({}, d, reward=float(d.action == 2))
    p = booster.probabilities()
    assert np.all(np.isfinite(p))
    np.testing.assert_allclose(p, [0.3, 0.3, 0.4])


def test_river_thompson_monte_carlo_propensity():
    booster = RiverPolicy(2, policy="thompson", seed=0)
    _update(booster, 0, 1.0)  # posteriors Beta(2, 1) and Beta(1, 1): P(arm 0 wins) = 2/3
    p = booster.probabilities()
    assert p.sum() == pytest.approx(1.0)
    assert p[0] == pytest.approx(2 / 3, abs=0.06)
    assert np.all(p * booster.mc_samples == np.round(p * booster.mc_samples))


def test_river_policy_label_feedback():
    booster = RiverPolicy(3, policy="epsilon_greedy", epsilon=0.0, seed=0)
    d = Decision(1, np.full(3, 1 / 3))
    booster.learn_one({}, d, label=1)  # reward 1 on arm 1
    booster.learn_one({}, Decision(0, np.full(3, 1 / 3)), label=2)  # reward 0 on arm 0
    np.testing.assert_allclose(booster.probabilities(), [0.0, 1.0, 0.0])


# --- parameter validation -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"n_actions": 1}, "n_actions"),
        ({"n_actions": 2.5}, "n_actions"),
        ({"epsilon": 1.5}, "epsilon"),
        ({"epsilon": -0.1}, "epsilon"),
        ({"epsilon": float("nan")}, "epsilon"),
        ({"grace_period": 0}, "grace_period"),
        ({"delta": 0.0}, "delta"),
        ({"delta": 1.0}, "delta"),
        ({"tau": -1.0}, "tau"),
        ({"nominal_attributes": "f"}, "nominal_attributes"),
        ({"offset_l2": 0.0}, "offset_l2"),
        ({"offset_l2": 1e-310}, "offset_l2"),  # 1 / l2 would be infinite
        ({"offset_l2": float("inf")}, "offset_l2"),
        ({"offset_l2": "1"}, "offset_l2"),
    ],
)
def test_egreedy_tree_bad_params(kwargs, name):
    params = {"n_actions": 3, **kwargs}
    with pytest.raises(ValueError, match=name):
        EpsilonGreedyTree(**params)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"n_actions": 0}, "n_actions"),
        ({"policy": "softmax"}, "policy"),
        ({"epsilon": 2.0}, "epsilon"),
        ({"delta": -1.0}, "delta"),
        ({"delta": float("inf")}, "delta"),
        ({"gamma": 1.01}, "gamma"),
        ({"gamma": "0.1"}, "gamma"),
    ],
)
def test_river_policy_bad_params(kwargs, name):
    params = {"n_actions": 3, **kwargs}
    with pytest.raises(ValueError, match=name):
        RiverPolicy(**params)
