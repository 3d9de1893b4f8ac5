"""Exact boost-by-majority potentials and BanditBBM cost matrices (Zhang et al. 2019).

More: docs/boosters.md, "boosters/online/potentials.py".

>>> pot = BBMPotentials(k=3, gamma=0.1)
>>> round(pot.value(0, 5, (0, 0, 0)), 3), round(pot.value(0, 20, (0, 0, 0)), 3)
(0.553, 0.435)
>>> C = pot.cost_matrix(2, (1, 0, 0))
>>> bool((C.argmin(axis=0) == [0, 1, 2]).all())   # each column is minimal on its own label
True
"""

from __future__ import annotations

import math
from collections import Counter, OrderedDict
from functools import cache
from itertools import combinations_with_replacement

import numpy as np

__all__ = ["BBMPotentials", "potential_by_binomial_dp"]

#: a canonical state: (gap, multiplicity) pairs, gaps ascending and clamped
Runs = tuple[tuple[int, int], ...]


class BoundedCache(OrderedDict):
    """Map with at most ``max_items`` entries and ``max_bytes`` of arrays; oldest in, first out.

    Lookups are plain (C-speed) ``get`` calls; an entry larger than ``max_bytes`` is not kept.

    >>> cache = BoundedCache(max_items=2)
    >>> cache.put("a", 1.0); cache.put("b", 2.0); _ = cache.get("a"); cache.put("c", 3.0)
    >>> list(cache)
    ['b', 'c']
    """

    def __init__(self, max_items: float, max_bytes: float = math.inf):
        super().__init__()
        self.max_items = max_items
        self.max_bytes = max_bytes
        self.nbytes = 0

    def put(self, key, value) -> None:
        if key in self:
            self.nbytes -= getattr(self.pop(key), "nbytes", 0)
        self[key] = value
        self.nbytes += getattr(value, "nbytes", 0)
        while self and (len(self) > self.max_items or self.nbytes > self.max_bytes):
            self.nbytes -= getattr(self.popitem(last=False)[1], "nbytes", 0)

    def clear(self) -> None:
        super().clear()
        self.nbytes = 0

    def __reduce__(self):  # pickled empty: a cache
        return (type(self), (self.max_items, self.max_bytes))


class LRUCache(BoundedCache):
    """:class:`BoundedCache` evicting the least recently *used* entry (a hit refreshes it).

    >>> cache = LRUCache(max_items=2)
    >>> cache.put("a", 1.0); cache.put("b", 2.0); _ = cache.get("a"); cache.put("c", 3.0)
    >>> list(cache)
    ['a', 'c']
    """

    def get(self, key, default=None):
        value = super().get(key, default)
        if value is not default:
            self.move_to_end(key)
        return value


def _move_down(runs: Runs, i: int) -> Runs:
    """``runs`` with one unit of its ``i``-th gap lowered by one (a vote for that label)."""
    g, c = runs[i]
    head = list(runs[:i])
    if head and head[-1][0] == g - 1:
        head[-1] = (g - 1, head[-1][1] + 1)
    else:
        head.append((g - 1, 1))
    if c > 1:
        head.append((g, c - 1))
    return (*head, *runs[i + 1 :])


def _gap_runs(top: int, others: Counter) -> Runs:
    """Sorted runs of the gaps ``top - v`` over the multiset ``others`` of vote counts."""
    return tuple(sorted((top - v, c) for v, c in others.items() if c))


class BBMPotentials:
    """Exact potentials ``phi^y_n(s)`` for ``k`` labels and edge ``gamma``, in bounded caches.

    Four capped caches hold what was computed: least-recently-used ones for the potentials per
    canonical state (``max_potentials`` entries, the recursion's working set) and the per-class
    tables of cost matrices (``max_tables``); first-in-first-out ones, for their C-speed hits, for
    the cost matrices per vote vector (``max_matrix_bytes``) and the stacked cost matrices per
    vote matrix (``max_stack_bytes``). Values are exact, so an evicted entry is recomputed to the
    very same number; caches are not pickled. With the defaults the caches hold at most about
    160 MB (a potential ~0.6 kB, a table at most ~3.5 kB at N = 20), typically a few MB: BanditBBM
    at k = 50, N = 10 uses 169 potentials and ~100 tables. ``max_potentials`` must exceed the
    recursion's working set (a few thousand at N = 20), or the recursion recomputes its children.
    """

    def __init__(
        self,
        k: int,
        gamma: float,
        max_potentials: int = 100_000,
        max_tables: int = 10_000,
        max_stack_bytes: float = 32e6,
        max_matrix_bytes: float = 32e6,
    ):
        if k < 2:
            raise ValueError(f"k must be >= 2, got {k}")
        if not 0.0 <= gamma <= 1.0:
            raise ValueError(f"gamma must be in [0, 1], got {gamma}")
        self.k = k
        self.gamma = gamma
        self._q = (1.0 - gamma) / k + gamma  # probability of a vote for the true label
        self._p = (1.0 - gamma) / k  # probability of a vote for one given other label
        self._limits = (max_potentials, max_tables, max_stack_bytes, max_matrix_bytes)
        self._memo = LRUCache(max_potentials)
        self._tables = LRUCache(max_tables)
        self._stacks = BoundedCache(math.inf, max_stack_bytes)
        self._matrices = BoundedCache(math.inf, max_matrix_bytes)

    def __getstate__(self):
        return {"k": self.k, "gamma": self.gamma, "limits": self._limits}

    def __setstate__(self, state):
        self.__init__(state["k"], state["gamma"], *state.get("limits", ()))

    # ---- potentials on canonical states -------------------------------------------------------

    @staticmethod
    def _canon(n: int, runs: Runs) -> Runs | None:
        """Gaps above ``n + 1`` merged into ``n + 1``; ``None`` when the true label cannot win."""
        if runs[0][0] < -n:
            return None
        cap = n + 1
        if runs[-1][0] < cap:
            return runs
        kept = tuple(r for r in runs if r[0] < cap)
        return (*kept, (cap, sum(c for g, c in runs if g >= cap)))

    def _phi(self, n: int, runs: Runs) -> float:
        """The recursion (docs/boosters.md) on a canonical state; memoised."""
        key = (n, runs)
        value = self._memo.get(key)
        if value is not None:
            return value
        if n == 0:
            g, c = runs[0]
            value = 1.0 if g < 0 else 1.0 - 1.0 / (1.0 + (c if g == 0 else 0))
        else:
            m = n - 1
            up = self._canon(m, tuple((g + 1, c) for g, c in runs))
            value = self._q * (1.0 if up is None else self._phi(m, up))
            for i, (_, c) in enumerate(runs):  # one child per distinct gap, times its multiplicity
                child = self._canon(m, _move_down(runs, i))
                value += c * self._p * (1.0 if child is None else self._phi(m, child))
        self._memo.put(key, value)
        return value

    def _potential(self, n: int, runs: Runs) -> float:
        canon = self._canon(n, runs)
        return 1.0 if canon is None else self._phi(n, canon)

    def value(self, y: int, n: int, s) -> float:
        """``phi^y_n(s)``: expected final 0-1 loss, ``n`` votes to come (integer votes ``s``)."""
        votes = [int(v) for v in s]
        others = Counter(votes[:y] + votes[y + 1 :])
        return self._potential(n, _gap_runs(votes[y], others))

    # ---- cost matrices by classes of equal votes ----------------------------------------------

    def _table(self, n: int, values: tuple[int, ...], counts: tuple[int, ...]) -> np.ndarray:
        """Eq. 9 per class: labels with equal votes are interchangeable, so ``C[l, r]`` depends
        only on the classes ``a`` of ``l`` and ``b`` of ``r`` (and on whether ``l = r``).

        Returns ``T`` (d + 1, d): ``T[a, b]`` for ``l != r`` and ``T[d, b]`` for ``l = r``.
        """
        key = (n, values, counts)
        table = self._tables.get(key)
        if table is not None:
            return table
        d = len(values)
        table = np.full((d + 1, d), np.nan)
        base = Counter(dict(zip(values, counts, strict=True)))
        for b, vb in enumerate(values):
            rest = base.copy()
            rest[vb] -= 1  # r itself is not among the others
            table[d, b] = self._potential(n, _gap_runs(vb + 1, rest))
            for a, va in enumerate(values):
                if rest[va] == 0:  # no label l != r in class a
                    continue
                moved = rest.copy()
                moved[va] -= 1
                moved[va + 1] += 1
                table[a, b] = self._potential(n, _gap_runs(vb, moved))
        self._tables.put(key, table)
        return table

    def _state_table(self, n: int, s) -> tuple[np.ndarray, np.ndarray]:
        """(class table, class of every label) for the vote vector ``s`` (integers): the classes
        are its distinct values, ascending (``np.unique``'s, in plain Python: ``k`` is small and
        this runs once per learner and round)."""
        row = s.tolist() if isinstance(s, np.ndarray) else s
        counts = Counter(row)
        values = sorted(counts)
        index = {v: i for i, v in enumerate(values)}
        classes = np.fromiter(map(index.__getitem__, row), np.int64, len(row))
        rel = tuple(v - values[0] for v in values)  # potentials are shift invariant
        return self._table(n, rel, tuple(counts[v] for v in values)), classes

    def cost_matrix(self, n: int, s) -> np.ndarray:
        """Eq. 9: ``C[l, r] = phi^r_n(s + e_l)`` as a (k, k) array, from the class table.

        Costs ``(d + 1) d`` potentials for ``d`` distinct vote counts (at most ``n_learners``),
        then one vectorised gather of ``k^2`` entries; equal, bit for bit, to
        :meth:`cost_matrix_by_pairs`, which costs ``k^2`` potentials. Cached per state (read-only).
        """
        return self._matrix(n, [int(v) for v in s])

    def _matrix(self, n: int, row: list[int]) -> np.ndarray:
        key = (n, *row)
        C = self._matrices.get(key)
        if C is None:
            table, classes = self._state_table(n, row)
            C = table[classes[:, None], classes[None, :]]
            diagonal = np.arange(self.k)
            C[diagonal, diagonal] = table[-1, classes]
            C.setflags(write=False)
            self._matrices.put(key, C)
        return C

    def costs(self, votes: np.ndarray, n_first: int, omega: np.ndarray) -> np.ndarray:
        """Eq. 5 with eq. 9, ``C^m omega`` (M, k) for every row of ``votes``, no (k, k) matrix.

        ``O(M k)`` work after the class tables, for many actions. Equal to
        ``cost_matrices(votes, n_first) @ omega`` up to the order of floating-point sums.

        >>> pot = BBMPotentials(k=5, gamma=0.1)
        >>> votes, omega = np.array([[0, 0, 0, 0, 0], [0, 1, 0, 0, 0]]), np.arange(5.0) - 1
        >>> bool(np.allclose(pot.costs(votes, 3, omega), pot.cost_matrices(votes, 3) @ omega))
        True
        """
        out = np.empty(votes.shape)
        for m, row in enumerate(votes):
            table, classes = self._state_table(n_first - m, row)
            d = table.shape[1]
            off = np.nan_to_num(table[:d])  # nan only for l != r in a one-label class: unused
            per_class = np.bincount(classes, weights=omega, minlength=d)
            out[m] = (off @ per_class)[classes] + (table[d] - off.diagonal())[classes] * omega
        return out

    def cost_matrix_by_pairs(self, n: int, s) -> np.ndarray:
        """Eq. 9 entry by entry, ``k^2`` calls of :meth:`value`: the reference for small ``k``."""
        C = np.empty((self.k, self.k))
        votes = [int(v) for v in s]
        for l in range(self.k):
            votes[l] += 1
            for r in range(self.k):
                C[l, r] = self.value(r, n, votes)
            votes[l] -= 1
        return C

    def precompute(self, n_learners: int, budget: int = 2_000_000) -> bool:
        """Fill the cost-matrix cache for every vote state of an ``n_learners`` booster.

        The states before learner ``j`` (0-based) are the integer vote vectors summing to ``j``;
        there are ``comb(n_learners - 1 + k, k)`` of them. Done only when their matrices hold at
        most ``budget`` potentials (16 MB by default, within the matrix cache); otherwise they are
        computed on demand. The values are the same either way: this only moves work out of the
        first rounds.
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
            matrices, rows = self._matrices, []
            for m, row in enumerate(votes.tolist()):  # hits inline: this is the hot path
                C = matrices.get((n_first - m, *row))
                rows.append(self._matrix(n_first - m, row) if C is None else C)
            stack = np.stack(rows)
            stack.setflags(write=False)
            self._stacks.put(key, stack)
        return stack


@cache
def _inv_factorials(r: int) -> tuple[float, ...]:
    return tuple(1.0 / math.factorial(i) for i in range(r + 1))


def potential_by_binomial_dp(y: int, n: int, s, gamma: float) -> float:
    """An independent exact method: condition on the true label's votes ``m ~ Bin(n, q)``.

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
