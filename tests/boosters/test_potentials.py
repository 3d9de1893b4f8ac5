"""Tests of the boost-by-majority potentials and of both cost matrices (Zhang et al. 2019, eq. (9)
and (10)).

The reference values come from a brute-force enumeration of all ``k^n`` vote sequences written
here, independent of the library's recursion and of its binomial dynamic programme.
"""

from __future__ import annotations

import itertools
import pickle

import numpy as np
import pytest

from boosters.online.adabandit import logistic_cost_matrices
from boosters.online.banditbbm import BanditBBM
from boosters.online.potentials import (
    BBMPotentials,
    BoundedCache,
    LRUCache,
    potential_by_binomial_dp,
)

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
    # a rounded 0.661 was quoted for k = 8, N = 10; the exact value is 0.66048
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
    pot.cost_matrices(np.zeros((2, 4), dtype=np.int64), 5)
    assert pot._memo and pot._tables and pot._stacks
    blob = pickle.dumps(pot)
    restored = pickle.loads(blob)
    assert restored.k == 4 and restored.gamma == GAMMA
    assert not restored._memo and not restored._tables and not restored._stacks
    assert len(blob) < 500  # caches are not serialised
    assert [restored.value(y, 6, s) for s in states for y in range(4)] == values
    for s, C in zip(states, matrices, strict=True):
        assert np.array_equal(restored.cost_matrix(5, s), C)


@pytest.mark.parametrize("k, gamma", [(1, 0.1), (3, -0.1), (3, 1.5)])
def test_bad_parameters(k, gamma):
    with pytest.raises(ValueError):
        BBMPotentials(k, gamma)


# --- many actions: class tables against the entry-by-entry reference, bounded caches ------------


def _booster_states(k: int, n_learners: int, count: int, seed: int) -> list[np.ndarray]:
    """Vote vectors a booster meets: ``j`` unit votes over a few labels, ``j < n_learners``."""
    rng = np.random.default_rng(seed)
    states = []
    for _ in range(count):
        j = int(rng.integers(0, n_learners))
        labels = rng.integers(0, min(k, 6), size=j) * (k // min(k, 6))
        states.append(np.bincount(labels, minlength=k))
    return states


@pytest.mark.parametrize("k", [2, 3, 4, 5, 8])
def test_class_tables_equal_the_pairwise_reference_bit_for_bit(k):
    rng = np.random.default_rng(k)
    fast, reference = BBMPotentials(k, GAMMA), BBMPotentials(k, GAMMA)
    states = [rng.integers(-3, 5, size=k) for _ in range(25)] + _booster_states(k, 10, 25, k)
    for s in states:
        n = int(rng.integers(0, 10))
        assert np.array_equal(fast.cost_matrix(n, s), reference.cost_matrix_by_pairs(n, s))


def test_class_tables_at_fifty_actions_against_pairs_and_binomial_dp():
    k, n_learners = 50, 10
    pot = BBMPotentials(k, GAMMA)
    for m, s in enumerate(_booster_states(k, n_learners, 3, seed=5)):
        n = n_learners - 1 - int(s.sum())
        C = pot.cost_matrix(n, s)
        assert np.array_equal(C, BBMPotentials(k, GAMMA).cost_matrix_by_pairs(n, s))
        for l, r in [(0, 0), (0, k - 1), (k - 1, 0), (m, 2 * m + 1)]:
            shifted = s.copy()
            shifted[l] += 1
            expected = potential_by_binomial_dp(r, n, shifted.tolist(), GAMMA)
            assert C[l, r] == pytest.approx(expected, abs=1e-12)


def test_bounded_caches_evict_by_count_and_bytes():
    for kind, kept in ((BoundedCache, [3, 4, 5]), (LRUCache, [4, 2, 5])):
        cache = kind(max_items=10, max_bytes=3 * 8 * 4)
        for key in range(5):
            cache.put(key, np.zeros(4))  # 32 bytes each: three fit
        assert list(cache) == [2, 3, 4] and cache.nbytes == 96
        cache.get(2)  # refreshes 2 in the LRU cache only
        cache.put(5, np.zeros(4))
        assert list(cache) == kept
        cache.put(6, np.zeros(100))  # larger than the whole budget: not kept
        assert 6 not in cache and cache.nbytes <= cache.max_bytes
        assert (
            not pickle.loads(pickle.dumps(cache))
            and pickle.loads(pickle.dumps(cache)).max_items == 10
        )


def _play(booster, rounds: int, k: int) -> list[int]:
    rng = np.random.default_rng(3)
    actions = []
    for _ in range(rounds):
        x = {"a": float(rng.uniform()), "b": float(rng.uniform())}
        d = booster.decide_one(x)
        booster.learn_one(x, d, reward=float(d.action == int(k * (x["a"] + x["b"]) / 2)))
        actions.append(d.action)
    return actions


def test_banditbbm_decides_as_with_the_pairwise_reference(monkeypatch):
    k = 4
    fast = _play(BanditBBM(n_actions=k, n_learners=5, rho=0.1, seed=2), 150, k)
    monkeypatch.setattr(BBMPotentials, "cost_matrix", BBMPotentials.cost_matrix_by_pairs)
    reference = BanditBBM(n_actions=k, n_learners=5, rho=0.1, seed=2)
    assert _play(reference, 150, k) == fast


@pytest.mark.slow
def test_banditbbm_memory_stays_bounded_at_fifty_actions():
    k, rounds = 50, 500
    unbounded = BanditBBM(n_actions=k, n_learners=10, rho=0.1, seed=7)
    unbounded.potentials = BBMPotentials(k, 0.1, 10**9, 10**9, 1e12, 1e12)
    capped = BanditBBM(n_actions=k, n_learners=10, rho=0.1, seed=7)
    capped.potentials = BBMPotentials(
        k, 0.1, max_potentials=100, max_tables=30, max_stack_bytes=1e6, max_matrix_bytes=1e6
    )
    assert _play(capped, rounds, k) == _play(unbounded, rounds, k)  # evictions change nothing
    pot = capped.potentials
    assert len(pot._memo) <= 100 and len(pot._tables) <= 30 and pot._stacks.nbytes <= 1e6
    assert len(unbounded.potentials._memo) > 100  # the caps did bite
    assert len(unbounded.potentials._tables) > 30
    assert unbounded.potentials._stacks.nbytes > 1e6
    assert pot._matrices.nbytes <= 1e6 < unbounded.potentials._matrices.nbytes


@pytest.mark.parametrize("k", [3, 50, 200])
def test_class_costs_match_dense_matrices(k):
    rng = np.random.default_rng(k)
    pot = BBMPotentials(k, GAMMA)
    for s in _booster_states(k, 10, 6, seed=k):
        votes = np.cumsum(
            np.vstack([np.zeros(k, dtype=np.int64), np.eye(k, dtype=np.int64)[:3]]), 0
        )
        votes = votes + s  # four consecutive states, as a round's learners see them
        omega = np.where(rng.random(k) < 0.5, 1.0, 1.0 - (k - 1) / 0.1)  # eq. 4 magnitudes
        dense = pot.cost_matrices(votes, 9) @ omega
        assert np.allclose(pot.costs(votes, 9, omega), dense, rtol=1e-13, atol=1e-9)


def test_banditbbm_at_a_thousand_actions_skips_dense_matrices():
    booster = BanditBBM(n_actions=1000, n_learners=5, rho=0.1, seed=1)
    x = {"a": 0.3}
    for _ in range(3):
        d = booster.decide_one(x)
        booster.learn_one(x, d, reward=0.0)
    assert not booster.potentials._stacks and not booster.potentials._matrices  # no (k, k)
    assert len(booster.potentials._tables) <= 5 * 3
