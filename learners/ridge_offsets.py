"""The ridge reward model's offsets: the own terms of nominal values past their features' caps
and of pairs of nominal values, kept in two bounded tables and learned by one Kalman step.

A mixin of :class:`learners.ridge.RidgeRewards`, whose state it reads and writes. More:
docs/boosters.md, "learners/ridge.py".

>>> from learners.ridge import RidgeRewards
>>> model = RidgeRewards(n_actions=2, max_values=0)   # every value is past its cap
>>> for _ in range(20):
...     model.learn_one({"user": "ann", "device": "phone"}, action=1, correct=True)
>>> sorted(model.offset_rows), len(model.pair_rows)
([('=', 'device', 'phone'), ('=', 'user', 'ann')], 1)
>>> bool(model.predict_one({"user": "ann", "device": "phone"})[1] > 0.9)
True
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import NamedTuple

import numpy as np

from learners.ridge_layout import RidgeState
from learners.tables import canonical, constant_step, digest, grown, room, row_of

__all__ = [
    "MAX_OFFSETS", "MAX_OFFSET_ENTRIES", "MAX_PAIR_OFFSETS", "PAIR_OFFSET_FEATURES",
    "OffsetTables", "offset_capacity", "pair_capacity",
]

#: rows of the offsets of values past their features' caps (later ones share rows)
MAX_OFFSETS = 4096
#: bound on the entries of the offsets' inverse Gram matrices, ``rows x k x (m + 1)^2``, and on
#: each of the pairs' two arrays (weights, variances), ``rows x k``
MAX_OFFSET_ENTRIES = 1 << 20
#: rows of the pairs' constant offsets (later pairs share rows)
MAX_PAIR_OFFSETS = 1 << 16
#: an example's first nominal features among which pairs of values get offsets
PAIR_OFFSET_FEATURES = 16


def offset_capacity(n_actions: int, offset_features: int) -> int:
    """The offset rows a model of ``n_actions`` actions keeps: ``MAX_OFFSETS``, lowered so that
    their inverse Gram matrices (``k x (m + 1)^2`` entries a row) hold at most
    ``MAX_OFFSET_ENTRIES`` entries (at least one row).

    >>> offset_capacity(4, 4), offset_capacity(26, 4), offset_capacity(10_000, 4)
    (4096, 1613, 4)
    """
    per_row = max(1, int(n_actions)) * (int(offset_features) + 1) ** 2
    return max(1, min(MAX_OFFSETS, MAX_OFFSET_ENTRIES // per_row))


def pair_capacity(n_actions: int) -> int:
    """The rows of pairs' offsets a model of ``n_actions`` actions keeps: ``MAX_PAIR_OFFSETS``,
    lowered so that their weights (``k`` floats a row) hold at most ``MAX_OFFSET_ENTRIES``.

    >>> pair_capacity(4), pair_capacity(100), pair_capacity(10_000)
    (65536, 10485, 104)
    """
    return max(1, min(MAX_PAIR_OFFSETS, MAX_OFFSET_ENTRIES // max(1, int(n_actions))))


def _pair_key(name, value, other, other_value) -> int:
    """A pair's key in the pairs' table, whatever the features' order: 64 bits of a BLAKE2b
    digest of the pair in its features' order (deterministic across processes; a table of many
    pairs keeps integers, not the pairs' strings)."""
    pair = (name, value, other, other_value)
    if repr(other) < repr(name):
        pair = (other, other_value, name, value)
    return digest(pair)


class OffsetBlock(NamedTuple):
    """What the offsets' block of a round's Kalman step reads, for the ``taught`` actions."""

    rows: np.ndarray  # the values' offset rows
    pairs: np.ndarray  # the pairs' rows
    taught: np.ndarray
    local: np.ndarray  # what an offset reads of the example
    pv: np.ndarray  # P local of each row, (R, t, m)
    variance: np.ndarray  # each pair's variance, (Q, t)
    row_spread: np.ndarray  # the variance the rows give the estimates, sum local P local, (t,)
    pair_spread: np.ndarray  # and the pairs', (t,)


class OffsetTables(RidgeState):
    """The offsets of :class:`learners.ridge.RidgeRewards` (a mixin; the state is the model's).

    - A value past its feature's cap: a small ridge regression per action (penalty
      ``offset_l2``) on a constant and the first ``offset_features`` numeric features.
    - A pair of nominal values of one example, one of them past its cap (``pair_offset_l2``): a
      constant per action, in a table of its own. The example's ``p`` pairs share one prior:
      a new one's variance is ``1 / (p pair_offset_l2)``.
    """

    #: what a model saved before pairs of values had offsets reads
    pair_offset_l2 = None

    def _init_offsets(self, pair_offset_l2: float | None) -> None:
        """The empty tables (``offset_l2``, ``offset_features`` and ``n_actions`` set)."""
        self.pair_offset_l2 = pair_offset_l2
        self.max_offsets = offset_capacity(self.n_actions, self.offset_features)
        self.offset_rows: dict[Hashable, int] = {}  # a value past its feature's cap -> its row
        m = self.offset_features + 1
        self.offset_weights = np.zeros((0, self.n_actions, m))  # per row and action
        self.offset_inverse = np.zeros((0, self.n_actions, m, m))  # and its inverse Gram matrix
        self.max_pairs = pair_capacity(self.n_actions)
        self.pair_rows: dict[Hashable, int] = {}  # a pair of values -> its row
        self.pair_weights = np.zeros((0, self.n_actions))  # its constant offset per action
        self.pair_variance = np.zeros((0, self.n_actions))  # and that constant's variance

    def _offset_row(self, key: Hashable, learn: bool) -> int | None:
        """The offset row of a value past its feature's cap; None for a new one when only
        predicting (its offset is 0)."""
        row = row_of(self.offset_rows, self.max_offsets, key, learn)
        if row is not None and row >= self.offset_weights.shape[0]:  # a new one is 0, its
            rows = room(row, self.max_offsets)  # inverse I / offset_l2
            self.offset_weights = grown(self.offset_weights, rows, 0.0)
            eye = np.eye(self.offset_features + 1) / self.offset_l2
            self.offset_inverse = grown(self.offset_inverse, rows, eye)
        return row

    def _pair_rows(self, nominals: list[tuple], learn: bool) -> list[int]:
        """The rows, in the pairs' table, of the pairs of ``nominals`` (name, value, past its
        cap) of which one value is past its cap. The example's ``p`` pairs share one prior: a
        new one's variance is ``1 / (p pair_offset_l2)``, so that an id beside many features
        does not take a round's residual ``p`` times over."""
        if self.pair_offset_l2 is None or not any(past for _, _, past in nominals):
            return []
        nominals = [(name, canonical(value), past)
                    for name, value, past in nominals[:PAIR_OFFSET_FEATURES]]
        keys = [
            _pair_key(name, value, other, other_value)
            for i, (name, value, past) in enumerate(nominals)
            for other, other_value, other_past in nominals[i + 1 :]
            if past or other_past
        ]
        known = len(self.pair_rows)
        rows = [row for key in keys
                if (row := row_of(self.pair_rows, self.max_pairs, key, learn)) is not None]
        if learn and len(self.pair_rows) > known:  # new pairs: room, and their share
            if max(rows) >= self.pair_weights.shape[0]:  # a new one is 0, of variance
                size = room(max(rows), self.max_pairs)  # 1 / pair_offset_l2
                self.pair_weights = grown(self.pair_weights, size, 0.0)
                self.pair_variance = grown(self.pair_variance, size, 1.0 / self.pair_offset_l2)
            self.pair_variance[known : len(self.pair_rows)] /= len(keys)
        return list(dict.fromkeys(rows))  # a shared row counts once

    def _offsets(self, rows: list[int], local: np.ndarray, pairs: list[int]) -> np.ndarray:
        """The sum of the offsets of ``rows`` at ``local`` and of the pairs ``pairs``, ``(k,)``."""
        if not rows and not pairs:  # most rounds of most streams
            return np.zeros(self.n_actions)
        total = (self.offset_weights[np.asarray(rows, dtype=np.int64)] @ local).sum(axis=0)
        if pairs:
            total += self.pair_weights[np.asarray(pairs, dtype=np.int64)].sum(axis=0)
        return total

    def _offset_block(self, rows: list[int] | np.ndarray, pairs: list[int] | np.ndarray,
                      taught: np.ndarray,
                      local: np.ndarray) -> OffsetBlock:
        """The offsets' block of a round's Kalman step for the ``taught`` actions."""
        rows, pairs = np.asarray(rows, dtype=np.int64), np.asarray(pairs, dtype=np.int64)
        pv = self.offset_inverse[rows[:, None], taught[None, :]] @ local  # (R, t, m)
        variance = (self.pair_variance[pairs[:, None], taught[None, :]] if pairs.size
                    else np.zeros((0, taught.size)))
        return OffsetBlock(rows, pairs, taught, local, pv, variance, (pv @ local).sum(axis=0),
                           variance.sum(axis=0))

    def _update_offsets(self, block: OffsetBlock, residuals: np.ndarray, extra) -> None:
        """One Kalman step of the offsets of ``block`` together: the residual is shared among
        them in proportion to their uncertainty (``P local``; a pair's variance), their
        cross-covariances left out, with ``extra`` more variance in the denominator (the map's
        ``v P v`` when it learns in the same step). A new id beside a value seen often takes
        nearly all of it, whatever their order."""
        denominator = 1.0 + block.row_spread + block.pair_spread + extra
        gain = block.pv / denominator[None, :, None]
        at = (block.rows[:, None], block.taught[None, :])
        self.offset_weights[at] += gain * residuals[None, :, None]
        self.offset_inverse[at] -= gain[..., :, None] * block.pv[..., None, :]
        if block.pairs.size:
            pair_at = (block.pairs[:, None], block.taught[None, :])
            constant_step(self.pair_weights, self.pair_variance, pair_at, block.variance,
                          denominator[None, :], residuals[None, :])
