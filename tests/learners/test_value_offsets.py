"""Tests of learners/value_offsets.py: the nominal values' offsets of ``egreedy_tree``."""

from __future__ import annotations

import numpy as np
import pytest

from learners.value_offsets import MAX_VALUE_ENTRIES, ValueOffsets, value_capacity


def test_a_value_seen_alone_is_its_shrunk_mean():
    """With the residual taken against its own estimate, a value seen n times with reward 1 is
    at n / (n + l2): the ridge constant of penalty l2."""
    offsets = ValueOffsets(n_actions=2, l2=2.0)
    rows = offsets.rows({"user": "ann"}, learn=True)
    for n in range(1, 6):
        offsets.learn(rows, 0, 1.0 - offsets.predict(rows)[0])
        assert offsets.predict(rows)[0] == pytest.approx(n / (n + 2.0))
    assert offsets.predict(rows)[1] == 0.0  # the other action learned nothing


def test_a_residual_is_shared_in_proportion_to_the_variances():
    """Kalman step with the cross-covariances left out: new values (variance 1 / l2 each) split a
    residual evenly, and a value seen before takes less of it than a new one."""
    offsets = ValueOffsets(n_actions=1, l2=1.0)
    both = offsets.rows({"user": "ann", "device": "phone"}, learn=True)
    offsets.learn(both, 0, 0.9)
    np.testing.assert_allclose(offsets.weights[both, 0], [0.3, 0.3])  # 1 / (1 + 2) each
    np.testing.assert_allclose(offsets.variance[both, 0], [2 / 3, 2 / 3])
    rows = offsets.rows({"user": "bob", "device": "phone"}, learn=True)
    before = offsets.weights[rows, 0].copy()
    offsets.learn(rows, 0, 1.0)
    gained = offsets.weights[rows, 0] - before
    assert gained[0] > gained[1] > 0  # bob (new) over phone (seen once)
    assert gained.sum() == pytest.approx((1 + 2 / 3) / (1 + 1 + 2 / 3))


def test_numbers_are_values_only_when_declared_nominal():
    offsets = ValueOffsets(n_actions=2, nominal_attributes=["store"])
    assert offsets.rows({"x": 3.0, "flag": True}, learn=True) == []
    row = offsets.rows({"store": 3}, learn=True)
    assert row == offsets.rows({"store": 3.0}, learn=False) == offsets.rows(
        {"store": np.int64(3)}, learn=False)  # told apart by equality
    assert offsets.rows({"store": None}, learn=True) == []


def test_predicting_adds_no_row_and_an_unseen_value_is_zero():
    offsets = ValueOffsets(n_actions=3)
    assert offsets.rows({"user": "ann"}, learn=False) == []
    assert offsets.keys == {} and offsets.predict([]).tolist() == [0.0, 0.0, 0.0]


def test_the_table_is_bounded_and_shares_rows_once_full():
    assert value_capacity(10_000) * 10_000 <= MAX_VALUE_ENTRIES
    offsets = ValueOffsets(n_actions=2)
    offsets.capacity = 8  # a small table (the same rules as the real one)
    for i in range(20):
        offsets.learn(offsets.rows({"user": f"u{i}"}, learn=True), 0, 1.0)
    assert len(offsets.keys) == 8 and offsets.weights.shape == (8, 2)
    late = offsets.rows({"user": "u19"}, learn=False)  # past the capacity: a shared row,
    assert len(late) == 1 and 0 <= late[0] < 8  # which it learned in
    again = ValueOffsets(n_actions=2)
    again.capacity = 8
    for i in range(20):
        again.learn(again.rows({"user": f"u{i}"}, learn=True), 0, 1.0)
    np.testing.assert_array_equal(offsets.weights, again.weights)  # deterministic sharing
    assert offsets.rows({"user": "u19"}, learn=False) == again.rows({"user": "u19"}, False)
