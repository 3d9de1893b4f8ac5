"""Tests of the boost-by-majority potentials and of both cost matrices (spec §3.2-3.3, §4.1).

The reference values come from a brute-force enumeration of all ``k^n`` vote sequences written
here, independent of the library's recursion and of its binomial dynamic programme.
"""

from __future__ import annotations

import itertools
import pickle

import numpy as np
import pytest

from boosters.adabandit import logistic_cost_matrices
from boosters.potentials import BBMPotentials, potential_by_binomial_dp

GAMMA = 0.1


def brute_force_potential(y: int, n: int, s, gamma: float) -> float:
    """``E phi_0(s + X)`` over every sequence of ``n`` votes drawn i.i.d. from ``u^y_gamma``."""
    k = len(s)
    u = [(1.0 - gamma) / k + (gamma if j == y else 0.0) for j in range(k)]
    total = 0.0
    for seq in itertools.product(range(k), repeat=n):
        prob = 1.0
        final = list(s)
        for vote in seq:
            prob *= u[vote]
            final[vote] += 1
        best = max(final)
        winners = [j for j in range(k) if final[j] == best]
        loss = 1.0 - (1.0 / len(winners) if y in winners else 0.0)
        total += prob * loss
    return total


def _start_vectors(k: int) -> list[tuple[int, ...]]:
    rng = np.random.default_rng(k)
    vectors = [
        (0,) * k,
        (1,) + (0,) * (k - 1),  # label 0 one ahead
        (6,) + (0,) * (k - 1),  # label 0 far ahead, every other label far behind
        (0,) + (5,) * (k - 1),  # label 0 far behind
        (-2,) + (3,) + (0,) * (k - 2),  # negative entries too
        tuple(int(v) for v in range(k)),  # all distinct
    ]
    vectors += [tuple(int(v) for v in rng.integers(-3, 4, size=k)) for _ in range(3)]
    return vectors


@pytest.mark.parametrize("k", [2, 3, 4])
@pytest.mark.parametrize("n", range(6))
def test_value_matches_brute_force(k, n):
    pot = BBMPotentials(k, GAMMA)
    for s in _start_vectors(k):
        for y in range(k):
            expected = brute_force_potential(y, n, s, GAMMA)
            assert pot.value(y, n, s) == pytest.approx(expected, abs=1e-12), (y, n, s)
            by_dp = potential_by_binomial_dp(y, n, s, GAMMA)
            assert by_dp == pytest.approx(expected, abs=1e-12), (y, n, s)


@pytest.mark.parametrize("gamma", [0.0, 0.35, 1.0])
def test_value_matches_brute_force_other_edges(gamma):
    k = 3
    pot = BBMPotentials(k, gamma)
    for s in [(0, 0, 0), (2, 0, 1), (0, 3, 3)]:
        for y in range(k):
            for n in (1, 4):
                expected = brute_force_potential(y, n, s, gamma)
                assert pot.value(y, n, s) == pytest.approx(expected, abs=1e-12)


def test_hopeless_and_certain_states():
    pot = BBMPotentials(3, GAMMA)
    # y = 0 is 4 behind with 3 votes to come: surely wrong
    assert pot.value(0, 3, (0, 4, 0)) == 1.0
    # y = 0 is 4 ahead with 3 votes to come: surely right
    assert pot.value(0, 3, (4, 0, 0)) == 0.0
    # n = 0: a three-way tie counts 1 - 1/3
    assert pot.value(1, 0, (2, 2, 2)) == pytest.approx(2 / 3)


@pytest.mark.parametrize(
    "k, n, expected",
    [
        (3, 5, 0.553),
        (3, 10, 0.502),
        (3, 20, 0.435),
        (8, 5, 0.728),
        (8, 10, 0.66048),
        (8, 20, 0.553),
    ],
)
def test_spec_sanity_values(k, n, expected):
    # spec §3.2 prints 0.661 for k = 8, N = 10; the exact value is 0.66048 (a rounding slip)
    pot = BBMPotentials(k, GAMMA)
    for y in (0, k - 1):
        assert abs(pot.value(y, n, (0,) * k) - expected) < 1e-3
    assert abs(potential_by_binomial_dp(0, n, (0,) * k, GAMMA) - expected) < 1e-3
    # below the paper's loose bound (k - 1) exp(-gamma^2 N / 2)
    assert pot.value(0, n, (0,) * k) < (k - 1) * np.exp(-(GAMMA**2) * n / 2)


def test_potential_invariances():
    pot = BBMPotentials(4, GAMMA)
    s = (2, 0, 1, 3)
    for y in range(4):
        v = pot.value(y, 4, s)
        assert pot.value(y, 4, tuple(x + 7 for x in s)) == pytest.approx(v, abs=1e-15)
    # permuting the labels other than y does not change phi^y
    assert pot.value(0, 4, (2, 0, 1, 3)) == pytest.approx(pot.value(0, 4, (2, 3, 0, 1)))


# --- cost matrices -------------------------------------------------------------------------------


def test_potential_cost_matrix_entries_and_column_minimum():
    rng = np.random.default_rng(7)
    checked = 0
    for _ in range(60):
        k = int(rng.integers(2, 6))
        n = int(rng.integers(0, 7))
        s = tuple(int(v) for v in rng.integers(-3, 4, size=k))
        pot = BBMPotentials(k, GAMMA)
        C = pot.cost_matrix(n, s)
        assert C.shape == (k, k)
        assert ((C >= 0) & (C <= 1)).all()
        for l, r in itertools.product(range(k), repeat=2):
            shifted = list(s)
            shifted[l] += 1
            assert C[l, r] == pytest.approx(pot.value(r, n, shifted), abs=1e-15)
        for r in range(k):
            assert C[r, r] <= C[:, r].min() + 1e-12, (k, n, s, r)
        # cached per state up to a constant shift: same numbers
        assert np.array_equal(pot.cost_matrix(n, tuple(v + 3 for v in s)), C)
        checked += 1
    assert checked == 60


def test_potential_cost_matrix_small_case_by_brute_force():
    k, n, s = 3, 3, (1, 0, 2)
    C = BBMPotentials(k, GAMMA).cost_matrix(n, s)
    for l, r in itertools.product(range(k), repeat=2):
        shifted = list(s)
        shifted[l] += 1
        assert C[l, r] == pytest.approx(brute_force_potential(r, n, shifted, GAMMA), abs=1e-12)


def test_logistic_cost_matrix_columns():
    rng = np.random.default_rng(11)
    for k in (2, 3, 5, 8):
        votes = rng.uniform(-6, 6, size=(20, k))
        C = logistic_cost_matrices(votes)
        assert C.shape == (20, k, k)
        assert np.allclose(C.sum(axis=1), 0.0)  # every column sums to zero
        for m in range(20):
            for r in range(k):
                column = C[m, :, r]
                assert column[r] < 0
                assert np.delete(column, r).min() > 0
                assert column.argmin() == r
            # off-diagonal entries by the formula 1 / (1 + exp(s_r - s_l))
            for l, r in itertools.product(range(k), repeat=2):
                if l != r:
                    want = 1.0 / (1.0 + np.exp(votes[m, r] - votes[m, l]))
                    assert C[m, l, r] == pytest.approx(want, rel=1e-12)


def test_logistic_cost_matrix_extreme_votes_are_finite():
    C = logistic_cost_matrices(np.array([[800.0, -800.0, 0.0]]))
    assert np.isfinite(C).all()
    assert np.allclose(C.sum(axis=1), 0.0)


# --- pickling ------------------------------------------------------------------------------------


def test_pickle_drops_caches_keeps_values():
    pot = BBMPotentials(4, GAMMA)
    states = [(0, 0, 0, 0), (2, 1, 0, 0), (0, 3, 1, 2)]
    values = [pot.value(y, 6, s) for s in states for y in range(4)]
    matrices = [pot.cost_matrix(5, s) for s in states]
    assert pot._memo and pot._matrices
    blob = pickle.dumps(pot)
    restored = pickle.loads(blob)
    assert restored.k == 4 and restored.gamma == GAMMA
    assert not restored._memo and not restored._matrices
    assert len(blob) < 500  # caches are not serialised
    assert [restored.value(y, 6, s) for s in states for y in range(4)] == values
    for s, C in zip(states, matrices, strict=True):
        assert np.array_equal(restored.cost_matrix(5, s), C)


@pytest.mark.parametrize("k, gamma", [(1, 0.1), (3, -0.1), (3, 1.5)])
def test_bad_parameters(k, gamma):
    with pytest.raises(ValueError):
        BBMPotentials(k, gamma)
