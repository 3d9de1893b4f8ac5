"""Adaptive naive-Bayes leaves (learners/nb_leaf.py) and the boosters' ``leaf_prediction``."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from sklearn.datasets import load_digits

from boosters.registry import booster_params, make_booster
from learners.frozen import dumps_serving, freeze
from learners.hoeffding import make_vfdt
from learners.nb_leaf import NaiveBayesLeaf
from learners.vfdt import ArrayHoeffdingTreeClassifier, FastHoeffdingTreeClassifier
from tests.learners.test_array_trees import mixed_stream, signature, weights


def digits_stream(n=700, seed=0):
    X, y = load_digits(return_X_y=True)
    order = np.random.default_rng(seed).permutation(len(y))[:n]
    return [{f"p{j}": float(v) for j, v in enumerate(X[i])} for i in order], y[order].tolist()


def prequential(tree, xs, ys, ws=None):
    """Accuracy of predict-then-learn over the last half of the stream."""
    hits = []
    for t, (x, y) in enumerate(zip(xs, ys)):
        proba = tree.predict_proba_one(x)
        hits.append(bool(proba) and max(proba, key=proba.get) == y)
        tree.learn_one(x, y, w=1.0 if ws is None else ws[t])
    return float(np.mean(hits[len(hits) // 2 :]))


def test_naive_bayes_leaves_learn_digits_where_majority_leaves_cannot():
    xs, ys = digits_stream()
    nb = prequential(make_vfdt(50.0, 1e-7, 0.05, leaf_prediction="nba"), xs, ys)
    mc = prequential(make_vfdt(50.0, 1e-7, 0.05), xs, ys)
    assert nb > 0.8 > 0.3 > mc
    # the same with the boosters' spread of importance weights
    assert prequential(
        make_vfdt(50.0, 1e-7, 0.05, leaf_prediction="nba"), xs, ys, weights("logu", len(xs))
    ) > 0.7


@pytest.mark.slow
def test_naive_bayes_leaves_grow_the_same_trees():
    """Leaf predictions do not enter split decisions: River's nba tree grows the same splits."""
    xs, ys = mixed_stream(1500, seed=2)
    ws = weights("logu", len(xs))
    river = FastHoeffdingTreeClassifier(grace_period=10, delta=0.2, leaf_prediction="nba")
    ours = ArrayHoeffdingTreeClassifier(grace_period=10, delta=0.2, leaf_prediction="nba")
    for x, y, w in zip(xs, ys, ws):
        river.learn_one(x, y, w=w)
        ours.learn_one(x, y, w=w)
    assert ours.summary["n_nodes"] > 5
    assert signature(river._root) == signature(ours._root)
    assert all(isinstance(leaf, NaiveBayesLeaf) for leaf in ours._find_leaves())


def test_the_adaptive_rule_falls_back_to_the_majority_class():
    xs, ys = digits_stream(200)
    tree = ArrayHoeffdingTreeClassifier(grace_period=1000, leaf_prediction="nba")
    for x, y in zip(xs, ys):
        tree.learn_one(x, y)
    leaf = tree._root
    assert leaf.nb_correct > leaf.mc_correct
    assert tree.predict_proba_one(xs[0]) == {**dict.fromkeys(tree.classes, 0.0),
                                             **leaf.naive_bayes(xs[0])}
    leaf.mc_correct = leaf.nb_correct + 1.0  # the majority class has been right more often
    total = sum(leaf.stats.values())
    assert tree.predict_proba_one(xs[0]) == {c: w / total for c, w in leaf.stats.items()}


def test_nominal_and_odd_inputs_give_probabilities():
    tree = ArrayHoeffdingTreeClassifier(grace_period=1000, leaf_prediction="nba",
                                        max_nominal_values=3)
    rng = np.random.default_rng(1)
    for t in range(300):
        colour = "rgbcmyk"[t % 7]
        tree.learn_one({"colour": colour, "v": float(rng.normal(t % 2))}, int(colour in "rgb"))
    leaf = tree._root
    for x in [{"colour": "r", "v": 0.0}, {"colour": "never"}, {}, {"v": None, "colour": None},
              {"v": "text", "colour": 3.5}, {"new": 1.0}]:
        proba = leaf.naive_bayes(x)
        assert set(proba) == {0, 1} and abs(sum(proba.values()) - 1) < 1e-9
        assert all(np.isfinite(list(proba.values())))
    assert leaf.naive_bayes({"colour": "r"})[1] > 0.9
    assert leaf.naive_bayes({"colour": "k"})[0] > 0.9  # k is past the cap: the "other" row


def test_a_class_without_statistics_is_judged_by_its_prior():
    """A class known from the parent's counts only gets the pooled density: no vote for or
    against it from the features."""
    leaf = NaiveBayesLeaf({0: 1.0, 1: 1.0, 2: 2.0}, 1, make_vfdt(5.0, 0.1, 0.05).splitter)

    class Tree:
        nominal_attributes = None

    for v, y in [(0.0, 0), (0.1, 0), (1.0, 1), (1.1, 1)]:
        leaf.learn_one({"v": v}, y, tree=Tree())
    proba = leaf.naive_bayes({"v": 0.55})  # the pooled mean: each class's density is alike
    assert proba[2] == pytest.approx(2 * proba[0], rel=0.3)
    assert proba[0] == pytest.approx(proba[1], rel=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["adabandit", "banditbbm", "oco", "adaboostolm"])
def test_boosters_take_leaf_prediction_and_pickle_it(name):
    xs, ys = digits_stream(150, seed=3)
    # River's trees, whose leaves are inspected (the compiled core's:
    # tests/learners/test_compiled_core.py)
    core = {"tree_core": "river"} if "tree_core" in booster_params(name) else {}
    models = [make_booster(name, n_actions=10, seed=4, leaf_prediction="nba", **core)
              for _ in range(2)]
    for x, y in zip(xs, ys):
        decisions = [m.decide_one(x) for m in models]
        assert decisions[0].action == decisions[1].action  # deterministic by seed
        for m, d in zip(models, decisions):
            if m.full_information:
                m.learn_one(x, d, label=y)
            else:
                m.learn_one(x, d, reward=float(d.action == y))
    assert all(isinstance(leaf, NaiveBayesLeaf) for leaf in models[0]._trees[0]._find_leaves())
    for copy in (pickle.loads(pickle.dumps(models[0])), pickle.loads(dumps_serving(models[0]))):
        rng = [np.random.default_rng(0), np.random.default_rng(0)]
        assert [copy.decide_one(x, rng=rng[0]).action for x in xs[:30]] == [
            models[0].decide_one(x, rng=rng[1]).action for x in xs[:30]
        ]


def test_unknown_leaf_prediction_names_the_choices():
    with pytest.raises(ValueError, match="leaf_prediction.*mc.*nba"):
        make_booster("adabandit", n_actions=3, leaf_prediction="nb")
    with pytest.raises(ValueError, match="leaf_prediction"):
        make_vfdt(5.0, 0.1, 0.05, leaf_prediction="naive")


def test_a_frozen_copy_predicts_bit_for_bit_and_is_smaller():
    """Serving copies keep each naive-Bayes leaf's terms (learners/frozen.py), not its
    statistics: the same probabilities on numeric, nominal, missing and unseen inputs."""
    xs, ys = mixed_stream(1500, seed=6)
    tree = make_vfdt(8.0, 0.2, 0.05, leaf_prediction="nba")
    for x, y, w in zip(xs, ys, weights("logu", len(xs))):
        tree.learn_one(x, y, w=w)
    leaves = tree._find_leaves()
    assert len(leaves) > 3 and any(leaf.frozen() is not None for leaf in leaves)
    frozen = pickle.loads(dumps_serving(tree))
    assert type(frozen).__name__ == "FrozenHoeffdingTree"
    probe = mixed_stream(300, seed=9)[0] + [{}, {"colour": "never", "size": "xl"}]
    assert all(frozen.predict_proba_one(x) == tree.predict_proba_one(x) for x in probe)
    assert len(dumps_serving(tree)) < len(pickle.dumps(tree)) / 2
    with pytest.raises(ValueError, match="naive-Bayes"):
        freeze(FastHoeffdingTreeClassifier(leaf_prediction="nba"))


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_a_value_past_float_range_does_not_turn_the_leaf_into_nans():
    """1e200 is a valid number whose square overflows: a context with it predicts without that
    feature's vote, and learning it leaves every later prediction a probability vector (it used
    to make the leaf's naive Bayes NaN for good)."""
    tree = ArrayHoeffdingTreeClassifier(grace_period=1000, leaf_prediction="nba")
    rng = np.random.default_rng(1)
    for t in range(200):
        tree.learn_one({"v": float(rng.normal(3 * (t % 2))), "u": float(rng.normal(t % 2))}, t % 2)
    leaf = tree._root
    without_v = leaf.naive_bayes({"u": 0.0})
    assert leaf.naive_bayes({"v": 1e200, "u": 0.0}) == pytest.approx(without_v)
    tree.learn_one({"v": 1e200, "u": 0.0}, 1)
    tree.learn_one({"v": -1e200, "u": 1.0}, 0)
    for x in ({"v": 0.0, "u": 0.0}, {"v": 3.0, "u": 1.0}, {"v": 1e300}):
        proba = leaf.naive_bayes(x)
        assert np.isfinite(list(proba.values())).all() and sum(proba.values()) == pytest.approx(1)
    assert leaf.naive_bayes({"u": 1.5})[1] > 0.6  # u still votes
    frozen = freeze(tree)
    assert frozen.predict_proba_one({"v": 1e200, "u": 0.0}) == tree.predict_proba_one(
        {"v": 1e200, "u": 0.0})
