"""Exact boost-by-majority potentials and BanditBBM cost matrices (seed 001).

Implements ../shared/specs/bandit_boosting.md §3.2 (the potential
``phi^y_n(s) = E_{X ~ Multinomial(n, u^y_gamma)} phi^y_0(s + X)`` with argmax ties counted as a
uniform random break, ``phi^y_0(s) = 1 - I(y in A)/|A|``) and §3.3 (eq. 9, the cost matrix
``C[l, r] = phi^r_n(s + e_l)``).

The spec's reference code estimates the potentials by Monte Carlo; the spec also gives an exact
method ([derived], checked against brute force). This module computes them exactly by the
defining recursion
``phi_n(s) = q phi_{n-1}(s + e_y) + sum_{l != y} (1-gamma)/k phi_{n-1}(s + e_l)``
(with ``q = (1-gamma)/k + gamma``), memoised on a canonical state: the potential depends on ``s``
only through the sorted gaps ``s_y - s_l`` (l != y), and a gap larger than ``n`` cannot be closed,
so gaps are clamped to ``n + 1``. A gap below ``-n`` cannot be closed by ``y`` either: the
potential is then 1. :func:`potential_by_binomial_dp` is the spec's independent closed-form
dynamic programme, kept to cross-check.

>>> pot = BBMPotentials(k=3, gamma=0.1)
>>> round(pot.value(0, 5, (0, 0, 0)), 3), round(pot.value(0, 20, (0, 0, 0)), 3)
(0.553, 0.435)
>>> C = pot.cost_matrix(2, (1, 0, 0))
>>> bool((C.argmin(axis=0) == [0, 1, 2]).all())   # each column is minimal on its own label
True
"""

from __future__ import annotations

import math
from functools import cache
from itertools import combinations_with_replacement

import numpy as np

__all__ = ["BBMPotentials", "potential_by_binomial_dp"]


class BBMPotentials:
    """Memoised exact potentials ``phi^y_n(s)`` for ``k`` labels and edge ``gamma``.

    The memo tables are a cache: they are dropped when pickled and rebuilt on demand (the values
    are exact, so a restored booster computes the very same numbers).
    """

    def __init__(self, k: int, gamma: float):
        if k < 2:
            raise ValueError(f"k must be >= 2, got {k}")
        if not 0.0 <= gamma <= 1.0:
            raise ValueError(f"gamma must be in [0, 1], got {gamma}")
        self.k = k
        self.gamma = gamma
        self._q = (1.0 - gamma) / k + gamma  # probability of a vote for the true label
        self._p = (1.0 - gamma) / k  # probability of a vote for one given other label
        self._memo: dict[tuple[int, tuple[int, ...]], float] = {}
        self._matrices: dict[tuple[int, ...], np.ndarray] = {}
        self._stacks: dict[tuple[int, bytes], np.ndarray] = {}

    def __getstate__(self):
        return {"k": self.k, "gamma": self.gamma}

    def __setstate__(self, state):
        self.__init__(state["k"], state["gamma"])

    @staticmethod
    def _canon(n: int, gaps) -> tuple[int, ...] | None:
        """Sorted, clamped gaps, or ``None`` when the true label can no longer win."""
        lo = min(gaps)
        if lo < -n:
            return None
        cap = n + 1
        return tuple(sorted(g if g < cap else cap for g in gaps))

    def _phi(self, n: int, gaps: tuple[int, ...]) -> float:
        key = (n, gaps)
        value = self._memo.get(key)
        if value is not None:
            return value
        if n == 0:
            if gaps[0] < 0:
                value = 1.0
            else:
                ties = gaps.count(0)
                value = 1.0 - 1.0 / (1.0 + ties)
        else:
            m = n - 1
            up = self._canon(m, [g + 1 for g in gaps])
            value = self._q * (1.0 if up is None else self._phi(m, up))
            i = 0
            size = len(gaps)
            while i < size:  # one child per distinct gap value, weighted by its multiplicity
                g = gaps[i]
                j = i
                while j < size and gaps[j] == g:
                    j += 1
                child = self._canon(m, gaps[:i] + (g - 1,) + gaps[i + 1 :])
                value += (j - i) * self._p * (1.0 if child is None else self._phi(m, child))
                i = j
        self._memo[key] = value
        return value

    def value(self, y: int, n: int, s) -> float:
        """``phi^y_n(s)``: expected final 0-1 loss, ``n`` votes to come (integer votes ``s``)."""
        gaps = [s[y] - s[l] for l in range(self.k) if l != y]
        canon = self._canon(n, gaps)
        return 1.0 if canon is None else self._phi(n, canon)

    def cost_matrix(self, n: int, s) -> np.ndarray:
        """Eq. 9: ``C[l, r] = phi^r_n(s + e_l)`` as a (k, k) array, cached per state."""
        key = (n, *(int(v) for v in s))
        C = self._matrices.get(key)
        if C is None:
            k = self.k
            C = np.empty((k, k))
            votes = list(key[1:])
            for l in range(k):
                votes[l] += 1
                for r in range(k):
                    C[l, r] = self.value(r, n, votes)
                votes[l] -= 1
            C.setflags(write=False)
            self._matrices[key] = C
        return C


    def precompute(self, n_learners: int, budget: int = 2_000_000) -> bool:
        """Fill the cost-matrix table for every vote state of an ``n_learners`` booster.

        The states before learner ``j`` (0-based) are the integer vote vectors summing to ``j``;
        there are ``comb(n_learners - 1 + k, k)`` of them. Done only when that many matrices hold
        at most ``budget`` potentials (a second or so); otherwise they stay computed on demand.
        The values are the same either way: this only moves work out of the first rounds.
        """
        if math.comb(n_learners - 1 + self.k, self.k) * self.k**2 > budget:
            return False
        for j in range(n_learners):
            for combo in combinations_with_replacement(range(self.k), j):
                self.cost_matrix(n_learners - 1 - j, np.bincount(combo, minlength=self.k).tolist())
        return True

    def cost_matrices(self, votes: np.ndarray, n_first: int) -> np.ndarray:
        """Eq. 9 for every row of the integer vote matrix ``votes`` (M, k), as (M, k, k).

        Row ``m`` has ``n_first - m`` votes to come. The stacked result is cached per whole
        ``votes`` matrix (a round's learners mostly agree, so few distinct matrices occur).
        """
        key = (n_first, votes.tobytes())
        stack = self._stacks.get(key)
        if stack is None:
            matrices = self._matrices
            rows = []
            for m, row in enumerate(votes.tolist()):
                C = matrices.get((n_first - m, *row))
                rows.append(self.cost_matrix(n_first - m, row) if C is None else C)
            stack = np.stack(rows)
            if len(self._stacks) * stack.nbytes > 64e6:  # bound it; entries are exact to rebuild
                self._stacks.clear()
            self._stacks[key] = stack
        return stack


@cache
def _inv_factorials(r: int) -> tuple[float, ...]:
    return tuple(1.0 / math.factorial(i) for i in range(r + 1))


def potential_by_binomial_dp(y: int, n: int, s, gamma: float) -> float:
    """The spec's exact method (§3.2): condition on the true label's votes ``m ~ Bin(n, q)``.

    The other ``r = n - m`` votes are uniform over the ``k - 1`` other labels; a dynamic
    programme over those labels with state (votes used, number of ties) sums the multinomial
    probabilities, weighting each outcome by ``1 / (1 + ties)``. Slower than
    :class:`BBMPotentials`; used to cross-check it.

    >>> round(potential_by_binomial_dp(0, 10, (0, 0, 0), 0.1), 3)
    0.502
    """
    k = len(s)
    q = (1.0 - gamma) / k + gamma
    others = [l for l in range(k) if l != y]
    total = 0.0
    for m in range(n + 1):
        r = n - m
        top = s[y] + m
        caps = [top - s[l] for l in others]
        if min(caps) < 0:
            continue
        inv_fact = _inv_factorials(r)
        # dp[b][j]: sum over assignments to the labels seen so far using b votes with j ties
        dp = np.zeros((r + 1, len(others) + 1))
        dp[0, 0] = 1.0
        for cap in caps:
            new = np.zeros_like(dp)
            for b in range(r + 1):
                for j in range(len(others) + 1):
                    if dp[b, j] == 0.0:
                        continue
                    for x in range(min(cap, r - b) + 1):
                        new[b + x, j + (x == cap)] += dp[b, j] * inv_fact[x]
            dp = new
        p_correct = (
            math.factorial(r)
            / (k - 1) ** r
            * sum(dp[r, j] / (1.0 + j) for j in range(len(others) + 1))
        )
        total += math.comb(n, m) * q**m * (1.0 - q) ** (n - m) * p_correct
    return float(1.0 - total)
