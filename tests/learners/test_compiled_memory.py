"""The memory of the compiled tree core (learners/compiled.py): split statistics in blocks per
(leaf, class seen), as River's leaves keep them, and the saved form of the ensemble unchanged."""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest

from learners._layout import SLOT
from learners.compiled import FORMAT, TreeEnsemble, from_state

inf = math.inf  # the literal below prints infinity so

#: the data-only form (FORMAT 1) of ``_legacy_model()`` as the code before the pool of blocks
#: saved it (a dense statistics slot per active leaf, every class and numeric feature); arrays
#: as ("array", dtype, shape, values)
LEGACY = {'format': 1, 'params': {'n_trees': 2, 'n_classes': 3, 'leaf_prediction': 'nba',
    'grace_by': 'weight', 'max_depth': None, 'max_size': 100.0, 'frozen': False},
    'features': {'nominal_attributes': [], 'max_nominal_values': 64, 'max_multiway_values': 32,
    'names': ['v', 'g', 'u'], 'kinds': [0, 1, 0], 'values': [[], [('a', 0), ('b', 1), ('c', 2)],
    []], 'other': [-1, -1, -1], 'distinct': [0, 3, 0], 'row_feature': [1, 1, 1],
    'row_other': [False, False, False]}, 'cfg': ('array', '<f8', [8], [0.01, 0.99, inf, 1.0, 1.0,
    10.0, 0.0, 0.0]), 'tree_i': ('array', '<i8', [2, 4], [0, 6, 0, 91022, 1, 2, 0, 91022]),
    'tree_f': ('array', '<f8', [2, 3], [8.0, 0.3, 0.3, 12.0, 0.3, 0.3]), 'ni': ('array', '<i8',
    [13, 8], [3, 1, 0, -1, 0, -1, 0, -1, 1, 0, 5, 6, 0, -1, 1, -1, 1, 0, 9, 10, 1, -1, 0, 0, 1,
    0, 11, 12, 1, -1, 0, 0, 1, 2, 7, 8, 1, -1, 0, 0, 0, -1, -1, -1, 1, 0, 1, 1, 0, -1, -1, -1, 1,
    1, 1, 1, 0, -1, -1, -1, 2, 2, 0, 4, 0, -1, -1, -1, 2, 3, 0, 4, 0, -1, -1, -1, 2, 4, 0, 2, 0,
    -1, -1, -1, 2, 5, 0, 2, 0, -1, -1, -1, 2, 6, 0, 3, 0, -1, -1, -1, 2, 7, 0, 3]),
    'nf': ('array', '<f8', [13, 8], [-1.0, 30.0, 0.0, 2.0, 5.0, 0.0, 0.0, 8.0, 5.454545454545454,
    59.0, 0.0, 7.5, 6.0, 0.0, 0.0, 9.0, 5.545454545454545, 11.0, 3.0, 3.0, 7.0, 0.0, 0.0, 8.0,
    3.6363636363636362, 10.0, 3.0, 3.0, 6.0, 0.0, 0.0, 8.0, 5.454545454545454, 9.0, 2.0, 3.0,
    6.0, 0.0, 0.0, 8.0, 0.0, 31.5, 29.5, 27.0, 27.0, 18.0, 27.0, 18.0, 0.0, 27.5, 22.5, 18.5,
    18.5, 13.0, 18.5, 13.0, 0.0, 8.0, 5.0, 0.0, 0.0, 3.0, 3.0, 3.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0,
    0.0, 0.0, 0.0, 6.0, 3.0, 3.0, 3.0, 3.0, 3.0, 3.0, 0.0, 5.0, 5.0, 0.0, 0.0, 0.0, 0.0, 0.0,
    0.0, 4.0, 4.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 6.0, 4.0, 0.0, 0.0, 2.0, 2.0, 2.0]),
    'cls': ('array', '<f8', [13, 3], [4.0, 0.0, 4.0, 4.5, 9.0, 0.0, 6.0, 5.0, 0.0, 5.0, 0.0, 6.0,
    0.0, 6.0, 4.0, 31.5, 0.0, 0.0, 0.0, 27.5, 0.0, 0.0, 5.0, 3.0, 0.0, 0.0, 1.0, 6.0, 0.0, 0.0,
    0.0, 5.0, 0.0, 0.0, 0.0, 4.0, 4.0, 0.0, 2.0]), 'present': ('array', '|u1', [13, 3], [1, 0, 2,
    1, 2, 0, 1, 2, 0, 1, 0, 2, 0, 2, 1, 1, 0, 0, 0, 1, 0, 0, 1, 2, 0, 0, 1, 1, 0, 0, 0, 1, 0, 0,
    0, 1, 1, 0, 2]), 'edges': ('array', '<i8', [3, 3], [0, 2, 1, 1, 3, 2, 2, 4, -1]),
    'stat': ('array', '<f8', [5, 5, 2], [27.0, 22.0, 2.4999999999999996, 3.2499999999999996,
    78.75000000000001, 70.125, 0.0, 0.0, 5.0, 6.0, 18.5, 14.0, 7.891891891891893,
    2.857142857142857, 28.783783783783793, 64.71428571428571, 6.0, 0.0, 10.0, 6.0, 3.0, 2.0, 8.0,
    2.0, 2.0, 8.0, 7.0, 0.0, 9.0, 4.0, 3.0, 2.0, 1.0, 2.5, 2.0, 0.5, 0.0, 2.0, 2.0, 3.0, 2.0,
    2.0, 4.5, 3.0, 0.5, 8.0, 4.0, 1.0, 5.0, 5.0]), 'stat_features': [0, 2], 'stat_slots': [8, 5],
    'stat_seen': ('array', '<i8', [5], [0, 4, 8, 12, 23]), 'counts': {'shape': [8, 4, 3],
    'at': ('array', '<i8', [9], [0, 3, 6, 13, 16, 19, 32, 48, 89]), 'values': ('array', '<f8',
    [9], [3.0, 9.0, 15.0, 2.5, 6.0, 10.0, 3.0, 3.0, 2.0])}, 'seen': ('array', '|u1', [8, 3], [1,
    0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1])}


def _array(value):
    if isinstance(value, tuple) and value and value[0] == "array":
        return np.array(value[3], dtype=value[1]).reshape(value[2])
    if isinstance(value, dict):
        return {k: _array(v) for k, v in value.items()}
    return value


def _stream(start, stop):
    """Numeric, nominal and missing values; two trees, three classes, uneven weights."""
    for i in range(start, stop):
        g = "abc"[(i * 7) % 3]
        v = float((i * 37) % 11)
        y = (i * 5 + (v > 5)) % 3
        x = {"v": v, "g": g, "u": float((i * 13) % 7) if i % 4 else None}
        yield x, np.array([y, (y + i) % 3]), np.array([1.0, 0.5 + (i % 3)])


def _legacy_model():
    trees = TreeEnsemble(2, 3, grace_periods=[8, 12], deltas=0.3, taus=0.3,
                         leaf_prediction="nba")
    for x, y, w in _stream(0, 40):
        trees.learn(trees.transform(x, learn=True), y, w)
    return trees


def _same_state(a, b):
    assert a.keys() == b.keys()
    for key in a:
        if isinstance(a[key], dict):
            _same_state(a[key], b[key])
        elif isinstance(a[key], np.ndarray):
            assert a[key].dtype == b[key].dtype and np.array_equal(a[key], b[key]), key
        else:
            assert a[key] == b[key], key


def _learn_on(models, start=40, stop=140):
    """The models learn the same examples; every prediction (and a serving copy's) the same."""
    for i, (x, y, w) in enumerate(_stream(start, stop)):
        outs = []
        for trees in models:
            v = trees.transform(x, learn=True)
            outs.append(trees.predict_proba(v))
            if i % 25 == 0:  # a serving copy, and its saved form (three fields) loaded
                serving = trees.serving_copy()
                outs.append(serving.predict_proba(serving.transform(x)))
                state = serving.__getstate__()
                assert state["stat_slots"][1] == 3 and state["stat"].shape[1] == 3
                again = pickle.loads(pickle.dumps(from_state(state)))
                outs.append(again.predict_proba(again.transform(x)))
            trees.learn(v, y, w)
        for out in outs[1:]:
            assert np.array_equal(out, outs[0])
    first = models[0].__getstate__()
    for trees in models[1:]:
        assert trees.n_leaves().tolist() == models[0].n_leaves().tolist()
        state = trees.__getstate__()
        # a loaded model bounds its active leaves by its statistics' width (MAX_ACTIVE), which
        # loading trims to the features: the bound (100 MB per tree) is not reached here
        assert np.array_equal(state.pop("tree_i")[:, :3], first["tree_i"][:, :3])
        _same_state(state, {k: v for k, v in first.items() if k != "tree_i"})


def test_saved_form_is_the_legacy_form():
    assert FORMAT == 1 == LEGACY["format"]
    _same_state(_legacy_model().__getstate__(), _array(LEGACY))


def test_legacy_state_loads_and_learns_on_identically():
    fresh = _legacy_model()
    loaded = from_state(_array(LEGACY))
    assert loaded.n_blocks() == len(LEGACY["stat_seen"][3])
    _learn_on([fresh, loaded, pickle.loads(pickle.dumps(from_state(_array(LEGACY))))])


def test_whole_state_loads_and_learns_on_identically():
    """The older form with every (slot, field, feature, class) saved."""
    state = _array(LEGACY)
    dense = from_state(_array(LEGACY)).stat  # (slots, fields, features, classes)
    assert dense.shape == (8, 5, 3, 3)
    for key in ("stat_features", "stat_slots", "stat_seen"):
        state.pop(key)
    state["stat"] = dense
    _learn_on([from_state(_array(LEGACY)), from_state(state)])


def _pairs_seen(trees):
    nodes = trees.ni[: trees.ctr[0]]
    slots = nodes[nodes[:, SLOT] >= 0, SLOT]
    return int((trees.seen[slots] > 0).sum()), slots.size


def test_memory_follows_the_classes_seen():
    """Ten classes, each leaf below the split on ``g`` sees two of them: the statistics held
    are the (leaf, class) pairs seen, far below leaves x features x 10 classes x 5 fields."""
    rng = np.random.default_rng(3)
    trees = TreeEnsemble(3, 10, grace_periods=[20, 30, 40], deltas=0.01)
    for _ in range(3000):
        g = int(rng.integers(5))
        x = {"g": "abcde"[g], **{f"n{j}": float(rng.normal()) for j in range(20)}}
        y = np.full(3, 2 * g + int(rng.integers(2)))
        trees.learn(trees.transform(x, learn=True), y, np.ones(3))
    pairs, active = _pairs_seen(trees)
    assert active >= 15 and trees.n_leaves().min() >= 5  # every tree split on g
    assert trees.n_blocks() == pairs <= 2 * active
    dense = active * trees.stat_blocks.shape[2] * 10 * 5 * 8
    assert trees.stat_blocks.nbytes < 0.35 * dense
    assert trees.stat.shape[0] == trees.seen.shape[0]  # the dense view, for inspection


@pytest.mark.parametrize("kwargs", [
    {"max_size": 0.002},  # deactivated leaves give their blocks back
    {"max_multiway_values": 3, "leaf_prediction": "nba"},  # undone multiway splits too
    {"max_depth": 2, "binary_split": True},
])
def test_blocks_are_the_pairs_seen_at_active_leaves(kwargs):
    rng = np.random.default_rng(4)
    trees = TreeEnsemble(4, 6, grace_periods=[5, 10, 20, 40], deltas=0.2, taus=0.2, **kwargs)
    for i in range(1500):
        g = int(rng.integers(3 + i // 300))
        x = {"g": g, "v": float(rng.normal() + g), "w": float(rng.exponential())}
        y = np.array([(g + int(rng.integers(2))) % 6] * 4)
        trees.learn(trees.transform(x, learn=True), y, rng.exponential(1.0, 4))
        if i % 100 == 0:
            assert trees.n_blocks() == _pairs_seen(trees)[0]
    assert trees.n_blocks() == _pairs_seen(trees)[0]
