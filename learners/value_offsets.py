"""Constant offsets per nominal value and action, learned by a Kalman step on a residual: the
part of ``egreedy_tree``'s reward estimate that a tree cannot learn from a user id seen a few
times.

Each value (feature name and value) has, per action, a ridge constant of penalty ``l2``: a new
one is 0 with variance ``1 / l2``. A round's residual is shared among the example's values in
proportion to their variances (the Kalman step with their cross-covariances left out), so a
value seen ``n`` times alone is the mean of its residuals shrunk by ``n / (n + l2)``. The table
is bounded: at most ``MAX_VALUE_OFFSETS`` rows, lowered so that each of its two arrays (weights,
variances; ``k`` floats a row) holds at most ``MAX_VALUE_ENTRIES`` floats; later values share rows
by a CRC-32 of their key. More: docs/boosters.md, "learners/value_offsets.py".

>>> offsets = ValueOffsets(n_actions=2, l2=1.0)
>>> rows = offsets.rows({"user": "ann", "x": 0.5}, learn=True)   # numbers have no offsets
>>> offsets.learn(rows, action=1, residual=1.0)
>>> offsets.predict(rows).tolist()                              # 1 / (1 + 1) of the residual
[0.0, 0.5]
>>> offsets.predict(offsets.rows({"user": "bob"}, learn=False)).tolist()   # unseen: nothing
[0.0, 0.0]
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from learners.tables import canonical, constant_step, digest, grown, room, row_of

__all__ = [
    "MAX_VALUE_ENTRIES", "MAX_VALUE_OFFSETS", "MIN_OFFSET_L2", "ValueOffsets", "value_capacity",
]

#: rows of the values' table (later values share rows)
MAX_VALUE_OFFSETS = 1 << 16
#: floats of each of the table's two arrays (``rows x k``)
MAX_VALUE_ENTRIES = 1 << 20
#: the smallest penalty: a new offset's variance ``1 / l2`` stays finite (at most 10^12)
MIN_OFFSET_L2 = 1e-12


def value_capacity(n_actions: int) -> int:
    """The rows a table of ``n_actions`` actions keeps: ``MAX_VALUE_OFFSETS``, lowered so that
    each array holds at most ``MAX_VALUE_ENTRIES`` floats (at least one row).

    >>> value_capacity(4), value_capacity(100), value_capacity(10_000)
    (65536, 10485, 104)
    """
    return max(1, min(MAX_VALUE_OFFSETS, MAX_VALUE_ENTRIES // max(1, int(n_actions))))


class ValueOffsets:
    """The offsets of an example's nominal values (strings, and the values of the features named
    in ``nominal_attributes``), one constant per value and action.

    Parameters
    ----------
    n_actions
        Number of actions k.
    l2
        Each constant's ridge penalty: a new one has variance ``1 / l2`` (``l2`` rounds of
        residual 0, in the shrinkage of a value seen alone).
    nominal_attributes
        Feature names whose values are nominal even when they are numbers.
    """

    def __init__(self, n_actions: int, l2: float = 1.0,
                 nominal_attributes: Iterable[str] | None = None):
        self.n_actions = int(n_actions)
        self.l2 = float(l2)
        self.nominal_attributes = frozenset(nominal_attributes or ())
        self.capacity = value_capacity(self.n_actions)
        self.keys: dict[int, int] = {}  # a value's digest -> its row
        self.weights = np.zeros((0, self.n_actions))
        self.variance = np.zeros((0, self.n_actions))

    def _key(self, name: str, value) -> int:
        """A value's key: the digest of its feature's name and its canonical value."""
        return digest((name, canonical(value)))

    def rows(self, x: dict, learn: bool) -> list[int]:
        """The rows of ``x``'s nominal values (a shared row once); new values get rows only when
        ``learn``."""
        rows = []
        for name, value in x.items():
            if isinstance(value, str) or (name in self.nominal_attributes and value is not None):
                row = row_of(self.keys, self.capacity, self._key(name, value), learn)
                if row is not None:
                    rows.append(row)
        if rows and max(rows) >= self.weights.shape[0]:  # new rows: 0, of variance 1 / l2
            size = room(max(rows), self.capacity)
            self.weights = grown(self.weights, size, 0.0)
            self.variance = grown(self.variance, size, 1.0 / self.l2)
        return list(dict.fromkeys(rows))

    def predict(self, rows: list[int]) -> np.ndarray:
        """The sum of the offsets of ``rows``, one per action."""
        if not rows:
            return np.zeros(self.n_actions)
        return self.weights[np.asarray(rows, dtype=np.int64)].sum(axis=0)

    def predict_action(self, rows: list[int], action: int) -> float:
        """``action``'s entry of :meth:`predict`, without the other actions' columns (summed in
        the same order, so the same float)."""
        if not rows:
            return 0.0
        return float(np.cumsum(self.weights[np.asarray(rows, dtype=np.int64), action])[-1])

    def learn(self, rows: list[int], action: int, residual: float) -> None:
        """One Kalman step of ``action``'s offsets of ``rows`` on ``residual`` (the reward less
        everything else's estimate, these offsets included)."""
        if not rows:
            return
        at = (np.asarray(rows, dtype=np.int64), action)
        variance = self.variance[at]
        constant_step(self.weights, self.variance, at, variance, 1.0 + variance.sum(), residual)
