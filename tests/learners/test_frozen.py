"""Serving copies (learners/frozen.py): a frozen Hoeffding tree predicts exactly as the tree it
was copied from, and a booster pickled with :func:`dumps_serving` decides exactly as the whole
booster, for every registered booster."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from river.tree import HoeffdingTreeClassifier

from boosters.registry import booster_params, make_booster, names
from learners.frozen import FrozenHoeffdingTree, dumps_serving, freeze
from learners.hoeffding import make_vfdt
from service.sim.datasets import load_dataset


def _row(rng: np.random.Generator, drop: float) -> dict:
    x = {
        "u": float(rng.normal()),
        "v": float(rng.integers(0, 9)),
        "c": "pqrs"[rng.integers(0, 4)],
        "d": "ab"[rng.integers(0, 2)],
    }
    return {k: v for k, v in x.items() if rng.random() >= drop}


def _label(x: dict) -> int:
    return int(x.get("u", 0.0) > 0) + int(x.get("c") in ("p", "q")) + int(x.get("v", 0) > 5)


@settings(max_examples=30, deadline=None)
@given(
    seed=st.integers(0, 2**16),
    n=st.integers(0, 2000),
    grace=st.sampled_from([5.0, 20.0, 50.0]),
    drop=st.sampled_from([0.0, 0.1]),
    kind=st.sampled_from(["ours", "river", "river-binary"]),
)
@pytest.mark.slow
def test_a_frozen_tree_predicts_like_its_tree(seed, n, grace, drop, kind) -> None:
    """Every branch kind River grows here: numeric binary, nominal multiway and (with
    ``binary_split``) nominal binary; missing features and unseen values take River's
    most-common path."""
    rng = np.random.default_rng(seed)
    if kind == "ours":
        tree = make_vfdt(grace, 0.1, 0.05, nominal_attributes=["c", "d"])
    else:
        tree = HoeffdingTreeClassifier(
            grace_period=int(grace),
            delta=0.1,
            leaf_prediction="mc",
            nominal_attributes=["c"],
            binary_split=kind == "river-binary",
        )
    for _ in range(n):
        x = _row(rng, drop)
        tree.learn_one(x, _label(x), w=float(rng.uniform(0.5, 3.0)))
    frozen = pickle.loads(pickle.dumps(freeze(tree)))
    probes = [_row(rng, 0.3) for _ in range(100)]
    probes += [{}, {"c": "unseen", "d": "zz", "u": 0.0, "v": 99.0}]  # missing / new values
    for x in probes:
        assert frozen.predict_proba_one(x) == tree.predict_proba_one(x)
        assert frozen.predict_one(x) == tree.predict_one(x)


def test_freezing_leaves_the_tree_alone_and_refuses_other_trees() -> None:
    tree = make_vfdt(5.0, 0.1, 0.05)
    rng = np.random.default_rng(1)
    for _ in range(2000):
        x = _row(rng, 0.0)
        tree.learn_one(x, _label(x))
    before = pickle.dumps(tree)
    frozen = freeze(tree)
    assert pickle.dumps(tree) == before
    assert tree.summary["n_leaves"] > 1
    with pytest.raises(RuntimeError, match="only predicts"):
        frozen.learn_one({"u": 1.0}, 1)
    with pytest.raises(ValueError, match="majority-class"):
        freeze(HoeffdingTreeClassifier(leaf_prediction="nba"))
    with pytest.raises(TypeError, match="cannot freeze"):
        freeze(object())  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def car():
    ds = load_dataset("car")
    order = np.random.default_rng(5).permutation(len(ds))
    return ds, [ds.X[i] for i in order], [int(ds.y[i]) for i in order]


@pytest.mark.slow
@pytest.mark.parametrize("name", names())
def test_a_serving_copy_of_every_booster_decides_like_it(name, car) -> None:
    ds, X, y = car
    accepted = booster_params(name)
    params = {"seed": 2}
    if "n_learners" in accepted:
        params["n_learners"] = 4
    if "nominal_attributes" in accepted:
        params["nominal_attributes"] = ds.nominal
    booster = make_booster(name, n_actions=ds.n_classes, **params)
    for i in range(600):
        d = booster.decide_one(X[i])
        if booster.full_information:
            booster.learn_one(X[i], d, label=y[i])
        else:
            booster.learn_one(X[i], d, reward=float(d.action == y[i]))
    served = pickle.loads(dumps_serving(booster))
    whole = copy.deepcopy(booster)  # both decide from the same generator state
    for i in range(600, 800):
        a, b = whole.decide_one(X[i]), served.decide_one(X[i])
        assert a.action == b.action
        np.testing.assert_array_equal(a.probabilities, b.probabilities)
    trees = [getattr(wl, "tree", None) for wl in getattr(served, "learners", [])]
    if any(isinstance(t, FrozenHoeffdingTree) for t in trees):
        # naive-Bayes leaves keep their terms (per class and feature), so on this small stream
        # a copy is 0.45-0.52 of the whole pickle (BanditBBM with the doubly robust estimate
        # grows the largest leaves of the boosters here)
        assert len(dumps_serving(booster)) < 0.6 * len(pickle.dumps(booster))
        # the ensemble's shared references to its trees survive (one frozen copy per tree)
        if hasattr(served, "_trees"):
            assert all(a is b for a, b in zip(served._trees, trees))


def test_the_frozen_trees_cover_every_branch_kind_river_grows_here() -> None:
    """The property test above is only as good as the trees it grows: check they branch."""
    from river.tree.nodes.branch import (
        NominalBinaryBranch,
        NominalMultiwayBranch,
        NumericBinaryBranch,
    )

    seen = set()
    for binary in (False, True):
        tree = HoeffdingTreeClassifier(
            grace_period=20, delta=0.1, leaf_prediction="mc", nominal_attributes=["c"],
            binary_split=binary,
        )
        rng = np.random.default_rng(3)
        for _ in range(3000):
            x = _row(rng, 0.1)
            tree.learn_one(x, _label(x))
        seen |= {type(n) for n in tree._root.iter_dfs()}
    assert {NominalBinaryBranch, NominalMultiwayBranch, NumericBinaryBranch} <= seen
