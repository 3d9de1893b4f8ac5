"""The ridge reward model's compiled path for mixed contexts (learners/ridge_mixed.py) gives the
floats of the feature-by-feature path: same estimates, same learned state, bit for bit."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from learners.ridge import RidgeRewards


class _OneByOne(RidgeRewards):
    """The model without the mixed path."""

    def _encode_mixed(self, x, learn):
        return None


def _contexts(rng: np.random.Generator, n: int, ids: int, extra: bool):
    for t in range(n):
        x = {"x0": float(rng.normal()), "x1": round(float(rng.normal()), 1),
             "segment": ["a", "b", "c"][int(rng.integers(3))]}
        if extra:
            x["n"] = int(rng.integers(5))  # a nominal attribute with number values
            x["id"] = f"u{int(rng.integers(ids))}"  # past its cap after a while: offsets
            x["flag"] = bool(rng.integers(2))
            x["zero"] = 0.0
        if t % 7 == 0:
            x["rare"] = float(rng.normal())  # another layout
        yield x


def _state(model: RidgeRewards) -> bytes:
    return pickle.dumps({k: v for k, v in sorted(vars(model).items())
                         if not k.startswith("_")})


@pytest.mark.parametrize(("max_dim", "ids", "extra", "quadratic"), [
    (256, 3, False, True), (24, 3, False, True), (256, 2, True, True), (64, 2, True, True),
    (256, 60, True, True), (40, 60, True, True), (256, 2, True, False),
])
@pytest.mark.slow
def test_the_mixed_path_gives_the_floats_of_the_one_by_one_path(max_dim, ids, extra, quadratic):
    kwargs = {"n_actions": 4, "max_dim": max_dim, "quadratic": quadratic,
              "nominal_attributes": ["n"] if extra else None, "max_values": 8}
    fast, slow = RidgeRewards(**kwargs), _OneByOne(**kwargs)
    rng = np.random.default_rng(max_dim + ids)
    for t, x in enumerate(_contexts(rng, 600, ids, extra)):
        a, b = fast.predict_one(x), slow.predict_one(x)
        assert a.tobytes() == b.tobytes(), t
        action, correct = int(rng.integers(4)), bool(rng.integers(2))
        fast.learn_one(x, action, correct)
        slow.learn_one(x, action, correct)
    assert _state(fast) == _state(slow)
    taken = any(entry[0] is not None for entry in fast._mixed.values())
    assert taken or ids > 8  # an id past its cap in every context: one by one


def test_the_mixed_layouts_are_not_saved_and_a_copy_predicts_the_same():
    model = RidgeRewards(n_actions=3)
    rng = np.random.default_rng(0)
    for x in _contexts(rng, 200, 3, False):
        model.learn_one(x, int(rng.integers(3)), bool(rng.integers(2)))
    assert model._mixed and "_mixed" not in model.__getstate__()
    copy = pickle.loads(pickle.dumps(model))
    x = {"x0": 0.5, "x1": -1.0, "segment": "b"}
    assert copy.predict_one(x).tobytes() == model.predict_one(x).tobytes()


def test_a_feature_that_is_not_a_number_is_refused_as_before():
    model = RidgeRewards(n_actions=2)
    for _ in range(40):
        model.learn_one({"x": 1.0, "s": "a"}, 0, True)
        model.learn_one({"x": -1.0, "s": "a"}, 0, False)
    with pytest.raises((TypeError, ValueError)):
        model.predict_one({"x": [1.0, 2.0], "s": "a"})


class _Slowest(RidgeRewards):
    """The model without any compiled or array path: feature by feature."""

    def _encode_mixed(self, x, learn):
        return None

    def _encode_compiled(self, x, learn):
        return None

    def _numeric_features(self, x, learn):
        return None


@pytest.mark.parametrize(("max_dim", "n_features"), [(512, 6), (40, 6), (512, 20)])
def test_numeric_layouts_take_the_compiled_path_with_the_same_floats(max_dim, n_features):
    kwargs = {"n_actions": 3, "max_dim": max_dim}
    fast, slow = RidgeRewards(**kwargs), _Slowest(**kwargs)
    rng = np.random.default_rng(max_dim + n_features)
    for t in range(400):
        x = {f"x{j}": float(rng.normal()) for j in range(n_features)}
        if t % 5 == 0:
            x["x0"] = 0.0  # a zero feature: left out of the products
        assert fast.predict_one(x).tobytes() == slow.predict_one(x).tobytes(), t
        action, correct = int(rng.integers(3)), bool(rng.integers(2))
        fast.learn_one(x, action, correct)
        slow.learn_one(x, action, correct)
    assert _state(fast) == _state(slow)
    assert any(entry[0] is not None for entry in fast._mixed.values())
