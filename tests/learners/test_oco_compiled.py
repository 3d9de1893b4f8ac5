"""The OCO boosters on the compiled tree core: ``tree_core="compiled"`` (the default)
against River's trees (``"river"``, the reference), pickling, old models and determinism."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from boosters.online.oco import OCOBooster
from boosters.online.oco_bandit import OCOBandit, OCOFull
from learners.binary import binary_trees, forest_margins, forest_teach
from learners.compiled import TreeEnsemble
from service.sim.datasets import load_dataset
from service.sim.loop import simulate
from tests.boosters.test_oco import _run as play


@pytest.fixture(scope="module")
def car():
    ds = load_dataset("car")
    order = np.random.default_rng(0).permutation(len(ds))
    return ds, [ds.X[i] for i in order], [int(ds.y[i]) for i in order]


def _makers(ds, core):
    nominal = ds.nominal
    return {
        "binary": lambda s: OCOBooster(n_learners=4, seed=s, nominal_attributes=nominal,
                                       tree_core=core),
        "binary-realizable": lambda s: OCOBooster(
            n_learners=4, seed=s, realizable=True, nominal_attributes=nominal, tree_core=core
        ),
        "bandit-weighted": lambda s: OCOBandit(4, n_learners=3, seed=s,
                                               nominal_attributes=nominal, tree_core=core),
        "bandit-rounding": lambda s: OCOBandit(4, n_learners=3, seed=s, update="rounding",
                                               rho=0.4, nominal_attributes=nominal,
                                               tree_core=core),
        "full": lambda s: OCOFull(4, n_learners=3, seed=s, nominal_attributes=nominal,
                                  tree_core=core),
    }


KINDS = ["binary", "binary-realizable", "bandit-weighted", "bandit-rounding", "full"]


def _run(booster, X, y, start, stop):
    """tests/boosters/test_oco.py's loop, recording each decision's weak predictions."""
    return play(booster, X, y, start, stop, record=lambda d: d.internals["weak"].tolist())


def _margins(booster, X):
    return [booster._margins(x).tolist() for x in X]


def test_compiled_is_the_default_and_river_selectable():
    for make in (lambda c: OCOBooster(n_learners=3, seed=0, **c),
                 lambda c: OCOBandit(3, n_learners=3, seed=0, **c),
                 lambda c: OCOFull(3, n_learners=3, seed=0, **c)):
        compiled, river = make({}), make({"tree_core": "river"})
        assert compiled.tree_core == "compiled" and isinstance(compiled.forest, TreeEnsemble)
        assert compiled.learners == [] and compiled._trees == []
        assert river.tree_core == "river" and river.forest is None
        assert len(river.learners) == compiled.forest.n_trees
        assert compiled.forest.n_classes == 2
        assert compiled.forest.leaf_prediction == river.leaf_prediction
        # the same hyperparameter draws, tree by tree (grace period, delta, tau)
        drawn = [[wl.grace_period, wl.delta, wl.tau] for wl in river.learners]
        assert compiled.forest.tree_f.tolist() == drawn
    with pytest.raises(ValueError, match="tree_core"):
        OCOBooster(tree_core="numba")
    with pytest.raises(ValueError, match="tree_core"):
        OCOBandit(3, tree_core="x")


@pytest.mark.parametrize("kind", KINDS)
def test_compiled_and_river_agree_on_car(kind, car):
    """The same draws in the same order: on this stream the two cores' trees make the same
    decisions (the compiled core reproduces River's trees here; near-ties could differ)."""
    ds, X, y = car
    river, compiled = _makers(ds, "river")[kind](3), _makers(ds, "compiled")[kind](3)
    a, b = _run(river, X, y, 0, 300), _run(compiled, X, y, 0, 300)
    same = np.mean([r == c for r, c in zip(a, b)])
    assert same >= 0.9


@pytest.mark.slow
def test_compiled_and_river_accuracies_are_close(car):
    ds = car[0]
    results = {}
    for core in ("river", "compiled"):
        booster = OCOBandit(ds.n_classes, n_learners=5, seed=0, nominal_attributes=ds.nominal,
                            tree_core=core)
        results[core] = simulate(booster, ds, dup=1, seed=0).accuracy
    assert results["compiled"] > 0.5
    assert abs(results["compiled"] - results["river"]) < 0.03


@pytest.mark.parametrize("kind", KINDS)
def test_same_seed_same_decisions_and_pickle_continues_identically(kind, car):
    ds, X, y = car
    make = _makers(ds, "compiled")[kind]
    a, b, c = make(7), make(7), make(8)
    assert _run(a, X, y, 0, 120) == _run(b, X, y, 0, 120)
    assert _run(c, X, y, 0, 120) != _run(make(7), X, y, 0, 120)
    clone = pickle.loads(pickle.dumps(a))
    assert isinstance(clone.forest, TreeEnsemble) and clone.tree_core == "compiled"
    assert _run(clone, X, y, 120, 220) == _run(a, X, y, 120, 220)
    assert _margins(clone, X[220:240]) == _margins(a, X[220:240])
    # the trees' saved form (the whole booster's pickle also holds sets, whose order follows
    # the hash seed)
    again = [pickle.loads(pickle.dumps(m.forest)) for m in (clone, a)]
    assert pickle.dumps(again[0]) == pickle.dumps(again[1])


@pytest.mark.parametrize("kind", ["binary", "bandit-weighted", "full"])
def test_a_model_pickled_before_the_option_keeps_rivers_trees(kind, car):
    """A model pickled before ``tree_core`` existed has River's trees and no ``tree_core`` or
    ``forest`` of its own: it loads with the class's ``"river"`` and goes on as before."""
    ds, X, y = car
    old = _makers(ds, "river")[kind](5)
    _run(old, X, y, 0, 80)
    del old.__dict__["tree_core"], old.__dict__["forest"]
    reference = pickle.loads(pickle.dumps(old))
    loaded = pickle.loads(pickle.dumps(old))
    assert loaded.tree_core == "river" and loaded.forest is None and loaded.learners
    assert _run(loaded, X, y, 80, 160) == _run(reference, X, y, 80, 160)
    fresh = _makers(ds, "river")[kind](5)
    _run(fresh, X, y, 0, 80)
    assert _run(fresh, X, y, 80, 160) == _run(pickle.loads(pickle.dumps(old)), X, y, 80, 160)


def test_a_bandit_update_teaches_only_the_played_arms_trees(car):
    ds, X, y = car
    k, n = ds.n_classes, 3
    booster = OCOBandit(k, n_learners=n, seed=2, nominal_attributes=ds.nominal,
                        guess_model=None)
    d = booster.decide_one(X[0])
    booster.learn_one(X[0], d, reward=1.0)
    trained = booster.forest.trained().reshape(k, n)
    assert trained[d.action].all() and not np.delete(trained, d.action, axis=0).any()
    full = OCOFull(k, n_learners=n, seed=2, nominal_attributes=ds.nominal)
    d = full.decide_one(X[0])
    full.learn_one(X[0], d, label=y[0])
    assert full.forest.trained().all()


def test_no_update_leaves_the_forest_untouched():
    """Algorithm 4's 0 labels (and a 0 weight) teach nothing: no tree, no feature index."""
    forest, _ = binary_trees("compiled", [{"grace_period": 5.0, "delta": 0.1, "tau": 0.05}] * 3)
    before = pickle.dumps(forest)
    forest_teach(forest, {"a": 1.0, "c": "x"}, np.zeros(3, dtype=int), 1.0)
    forest_teach(forest, {"a": 1.0, "c": "x"}, np.array([1, -1, 1]), 0.0)
    assert pickle.dumps(forest) == before
    forest_teach(forest, {"a": 1.0}, np.array([-1, 0]), 2.0, first=1)
    assert forest.trained().tolist() == [False, True, False]
    assert forest_margins(forest, {"a": 1.0}).tolist() == [0.0, -1.0, 0.0]


def test_custom_learners_ignore_the_tree_core():
    class Constant:
        def __init__(self):
            self.calls = []

        def margin_one(self, x):
            return 1.0

        def learn_one(self, x, y, w=1.0):
            self.calls.append((y, w))

    learners = [Constant() for _ in range(3)]
    booster = OCOBooster(learners=learners, seed=0)
    assert booster.forest is None and booster.learners == learners
    d = booster.decide_one({"f": 1.0})
    assert d.internals["weak"].tolist() == [1, 1, 1]
    booster.learn_one({"f": 1.0}, d, label=0)
    assert all(wl.calls for wl in learners[1:])


def test_drift_restart_builds_new_compiled_trees(car):
    ds, X, y = car
    booster = OCOBandit(ds.n_classes, n_learners=3, seed=4, nominal_attributes=ds.nominal)
    _run(booster, X, y, 0, 50)
    old = booster.forest
    booster._forget()
    assert isinstance(booster.forest, TreeEnsemble) and booster.forest is not old
    assert not booster.forest.trained().any() and booster.learners == []
