"""River-based trees (``tree_core="river"``) into the compiled core (learners/migrate.py)."""

from __future__ import annotations

import pickle
from collections import Counter

import numpy as np
import pytest
from river.tree.nodes.branch import DTBranch, NominalBinaryBranch, NumericBinaryBranch

from boosters.online.adabandit import AdaBandit
from learners._layout import KIND, LAST, LEAF, MCC, NBC, SLOT, SMAX, SMEAN, SMIN, SS, SW, WEIGHT
from learners.migrate import ensemble_from_river
from learners.vfdt import ArrayHoeffdingTreeClassifier, FastHoeffdingTreeClassifier
from service.sim.datasets import load_dataset


def _river_splits(tree) -> list[tuple]:
    """A River tree's branches in pre-order, as :meth:`TreeEnsemble.splits` gives them."""
    out, stack = [], [tree._root] if tree._root is not None else []
    while stack:
        node = stack.pop()
        if not isinstance(node, DTBranch):
            continue
        if isinstance(node, NumericBinaryBranch):
            out.append((node.depth, node.feature, 1, node.threshold))
        elif isinstance(node, NominalBinaryBranch):
            out.append((node.depth, node.feature, 2, node.value))
        else:
            out.append((node.depth, node.feature, 3, "multiway"))
        stack.extend(reversed(node.children))
    return out


def _pre_order(tree) -> list:
    out, stack = [], [tree._root] if tree._root is not None else []
    while stack:
        node = stack.pop()
        out.append(node)
        if isinstance(node, DTBranch):
            stack.extend(reversed(node.children))
    return out


def _trained_booster(name: str, rounds: int, **kwargs):
    """(booster with River trees after ``rounds`` bandit rounds, dataset, shuffled order)."""
    ds = load_dataset(name)
    booster = AdaBandit(n_actions=ds.n_classes, tree_core="river", seed=3,
                        nominal_attributes=ds.nominal or None, **kwargs)
    order = np.random.default_rng(0).permutation(len(ds))
    for i in order[:rounds]:
        decision = booster.decide_one(ds.X[i])
        booster.learn_one(ds.X[i], decision, reward=float(decision.action == ds.y[i]))
    return booster, ds, order


def _migrated(booster):
    return ensemble_from_river(booster.learners, booster.n_actions, booster.nominal_attributes,
                               booster.leaf_prediction)


def _max_gap(booster, trees, contexts) -> np.ndarray:
    """Per context, the largest gap between the River trees' and the ensemble's probabilities."""
    return np.array([np.abs(booster.tree_proba(x) - trees.predict_proba(trees.transform(x))).max()
                     for x in contexts])


def _same_trees(rivers, trees) -> None:
    assert trees.n_leaves().tolist() == [t.summary["n_leaves"] for t in rivers]
    assert trees.n_active_leaves().tolist() == [t.summary["n_active_leaves"] for t in rivers]
    for t, tree in enumerate(rivers):
        assert trees.splits(t) == _river_splits(tree)


def _continue(booster, trees, ds, rows, seed=1) -> tuple[int, int]:
    """Both learn the same labels and weights on ``rows``; (River's splits, splits that differ:
    a differing split counts its subtree's too)."""
    rng = np.random.default_rng(seed)
    rivers = [wl.tree for wl in booster.learners]
    n, k = len(rivers), ds.n_classes
    for i in rows:
        x = ds.X[i]
        labels = np.where(rng.random(n) < 0.7, int(ds.y[i]), rng.integers(0, k, n))
        weights = rng.exponential(3.0, n)
        for tree, label, w in zip(rivers, labels.tolist(), weights.tolist()):
            tree.learn_one(x, label, w=w)
        trees.learn(trees.transform(x, learn=True), labels, weights)
    ours = Counter((t, *s) for t in range(n) for s in trees.splits(t))
    theirs = Counter((t, *s) for t, tree in enumerate(rivers) for s in _river_splits(tree))
    return sum(theirs.values()), sum(((ours - theirs) + (theirs - ours)).values())


@pytest.mark.slow
@pytest.mark.parametrize("leaf", ["nba", "mc"])
def test_car_array_leaves_migrate_exactly_and_learn_on(leaf):
    """Car (nominal, multiway and binary splits), array leaves: the same trees, predictions to
    1e-9, then the same splits up to the compiled core's near-ties."""
    booster, ds, order = _trained_booster("car", 300, leaf_prediction=leaf)
    trees = _migrated(booster)
    rivers = [wl.tree for wl in booster.learners]
    _same_trees(rivers, trees)
    assert any(s[2] == 3 for t in range(trees.n_trees) for s in trees.splits(t))
    contexts = [ds.X[i] for i in order[:300]]
    assert _max_gap(booster, trees, contexts).max() < 1e-9
    splits, differ = _continue(booster, trees, ds, order[300:600])
    print(f"car {leaf}: {differ} of {splits} splits differ after 300 more examples")
    assert splits > 300 and differ <= 0.05 * splits
    assert (_max_gap(booster, trees, contexts) < 1e-9).mean() > 0.8


@pytest.mark.slow
def test_river_leaves_majority_class():
    """River's own leaves and splitters (``fast_trees=False``): exact, and learning on."""
    booster, ds, order = _trained_booster("car", 300, fast_trees=False, leaf_prediction="mc")
    trees = ensemble_from_river([wl.tree for wl in booster.learners], 4)  # bare trees
    rivers = [wl.tree for wl in booster.learners]
    assert isinstance(rivers[0], FastHoeffdingTreeClassifier)
    _same_trees(rivers, trees)
    contexts = [ds.X[i] for i in order[:300]]
    assert _max_gap(booster, trees, contexts).max() < 1e-9
    splits, differ = _continue(booster, trees, ds, order[300:600])
    print(f"car, River's leaves: {differ} of {splits} splits differ after 300 more examples")
    assert differ <= 0.05 * splits


def test_river_naive_bayes_leaves_keep_structure_and_counters():
    """River's adaptive naive-Bayes leaves: the trees and the adaptive rule's counters carry
    over (they then predict with the project's naive Bayes, not River's)."""
    booster, _, _ = _trained_booster("car", 200, fast_trees=False, leaf_prediction="nba")
    trees = _migrated(booster)
    rivers = [wl.tree for wl in booster.learners]
    _same_trees(rivers, trees)
    start = 0
    for tree in rivers:
        nodes = _pre_order(tree)
        for i, node in enumerate(nodes):
            if not isinstance(node, DTBranch) and node.is_active():
                assert trees.nf[start + i, MCC] == node._mc_correct_weight
                assert trees.nf[start + i, NBC] == node._nb_correct_weight
        start += len(nodes)


@pytest.mark.slow
def test_numeric_statistics_and_predictions():
    """Mice (77 numeric features): thresholds, Gaussian statistics (weight, mean, S, min, max
    per feature and class) and the last split attempt as River's splitters keep them."""
    booster, ds, order = _trained_booster("mice", 150, n_learners=4, tree_profile="bandit",
                                          fast_trees=False, leaf_prediction="mc")
    trees = _migrated(booster)
    rivers = [wl.tree for wl in booster.learners]
    _same_trees(rivers, trees)
    assert any(s[2] == 1 for t in range(trees.n_trees) for s in trees.splits(t))
    start, checked = 0, 0
    for tree in rivers:
        nodes = _pre_order(tree)
        for i, node in enumerate(nodes):
            at = start + i
            assert trees.nf[at, WEIGHT] == pytest.approx(node.total_weight, rel=1e-12)
            if isinstance(node, DTBranch):
                continue
            assert trees.ni[at, KIND] == LEAF and trees.nf[at, LAST] == node.last_split_attempt_at
            s = trees.ni[at, SLOT]
            for name, splitter in node.splitters.items():
                j = trees.features.columns[name]
                for y, g in splitter._att_dist_per_class.items():
                    got = trees.stat[s, [SW, SMEAN, SS, SMIN, SMAX], j, y].tolist()
                    assert got == [g._var.mean.n, g._var.mean._mean, g._var._S,
                                   splitter._min_per_class[y], splitter._max_per_class[y]]
                    checked += 1
        start += len(nodes)
    assert checked > 1000
    assert _max_gap(booster, trees, [ds.X[i] for i in order[:200]]).max() < 1e-9


def test_numeric_naive_bayes_leaves():
    """Mice with array naive-Bayes leaves: the same predictions up to the rounding of sums of
    large log densities (77 features; the compiled core sums them in another order)."""
    booster, ds, order = _trained_booster("mice", 150, n_learners=4, tree_profile="bandit")
    trees = _migrated(booster)
    _same_trees([wl.tree for wl in booster.learners], trees)
    gaps = _max_gap(booster, trees, [ds.X[i] for i in order[:200]])
    assert gaps.max() < 1e-6 and (gaps < 1e-9).mean() > 0.9


@pytest.mark.parametrize("kind", [ArrayHoeffdingTreeClassifier, FastHoeffdingTreeClassifier])
def test_inactive_leaves(kind):
    """Leaves deactivated at the depth limit stay inactive, predict their class weights and
    keep doing so while both go on learning."""
    ds = load_dataset("car")
    rivers = [kind(grace_period=g, delta=0.2, tau=0.1, max_depth=2,
                   nominal_attributes=ds.nominal, leaf_prediction="nba") for g in (5, 20)]
    for i in range(400):
        for tree in rivers:
            tree.learn_one(ds.X[i], int(ds.y[i]), w=1.0 + i % 3)
    trees = ensemble_from_river(rivers, 4, leaf_prediction="nba")
    _same_trees(rivers, trees)
    inactive = [t.summary["n_inactive_leaves"] for t in rivers]
    assert min(inactive) > 0 and trees.max_depth == 2
    for i in range(400, 700):
        x, y = ds.X[i], int(ds.y[i])
        for tree in rivers:
            tree.learn_one(x, y, w=1.0)
        trees.learn(trees.transform(x, learn=True), np.full(2, y), np.ones(2))
    _same_trees(rivers, trees)
    if kind is ArrayHoeffdingTreeClassifier:  # River's own naive Bayes is not the project's
        for x in ds.X[:300]:
            want = [[tree.predict_proba_one(x).get(c, 0.0) for c in range(4)] for tree in rivers]
            assert np.abs(trees.predict_proba(trees.transform(x)) - want).max() < 1e-9


def test_untrained_trees_and_pickling():
    """Untrained trees stay untrained; the migrated ensemble pickles as any other."""
    booster = AdaBandit(n_actions=3, n_learners=3, tree_core="river", seed=0)
    trees = _migrated(booster)
    assert not trees.trained().any() and trees.predict_proba(trees.transform({})).sum() == 0
    booster, ds, order = _trained_booster("car", 100)
    trees = pickle.loads(pickle.dumps(_migrated(booster)))
    contexts = [ds.X[i] for i in order[:100]]
    assert _max_gap(booster, trees, contexts).max() < 1e-9
